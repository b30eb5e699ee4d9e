"""Goodput under faults on the real node: ``python -m benchmarks.goodput`` (or ``make
bench-goodput``; needs the images built, the real node's packages and ``make peer-tools``).

One control plane with the real node (the ``realnode`` profile's), the images imported
into its containerd, the ``local`` stack installed as users install it (the operator as
its Deployment's pod) and the real Kueue with one ClusterQueue whose CPU quota fits one
job. Per system, the same PyTorchJob of real torch.distributed ranks (gloo, CPU: the
stack's sample, ``--step-delay`` a step, checkpointing every ``--every`` steps and on
SIGTERM to a node directory, 300m a pod), queued in Kueue, and the same seeded faults at
the same times after its creation (``benchmarks/goodput_report.py``):

- ``kill``: rank 1's container killed by SIGKILL (``ctr task kill``);
- ``hang``: rank 1's processes stopped by SIGSTOP (``ctr task kill --all``), never resumed;
- ``evict``: rank 1's pod evicted through the Eviction API;
- ``preempt``: a higher-priority job of the same size queued: Kueue preempts the job,
  runs the other (about 30 s) and admits the job again.

Systems, run in this order: ``kubetrain`` (the operator of the stack; the job opts in to
progress reports with a progress timeout, so it restarts a hung gang),
``training-operator`` (upstream v1.9 as a local process watching a namespace of its own,
which kubetrain's operator excludes; its worker init container, upstream's ``nslookup``
loop in alpine, which the node cannot pull, is the same wait written in Python on the
trainer image) and ``trainer`` (upstream Trainer v2.3 + JobSet v0.12, which take the
cluster's TrainJobs over: the same training submitted as a TrainJob, see
``benchmarks/goodput_trainer.py``; it comes last).

Rank 0's log is read from the node's pod log files as it is written (the kubelet's
timestamps), and the goodput is computed from it the same way for every system; each run
stops when the job finishes or at ``--deadline-minutes``. Figures to compare, never
assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.goodput_faults import PYTORCHJOB, TRAINJOB, FaultInjector, JobKind, PodLogTail, Run
from benchmarks.goodput_report import FAULTS, Fault, SystemResult, goodput, schedule, table
from benchmarks.goodput_trainer import take_over, trainjob
from benchmarks.peer_trainer import UpstreamTrainer
from cluster.kueue import QUEUE_NAME_LABEL, Kueue
from cluster.local import LocalCluster
from cluster.process import free_port
from cluster.tools import Tools, find_tools
from cluster.topology import default_topology
from kubetrain.api import keys as K
from kubetrain.gitops.render import render_charts
from kubetrain.gitops.writer import write_version
from stacks.local import STACK
from tests.clusters import ClusterClients
from tests.realnode.workloads import (
    OPERATOR_IMAGE,
    PRIORITY_LABEL,
    QUEUE,
    checkpointing,
    local_queue,
    node_directory,
    queue_objects,
    sample,
    sized,
)

#: The systems, in the order they run (Trainer takes the TrainJob CRD over: last).
SYSTEMS = ("kubetrain", "training-operator", "trainer")
TITLES = {
    "kubetrain": "kubetrain",
    "training-operator": "training-operator v1.9",
    "trainer": "Trainer v2.3 + JobSet v0.12",
}
TRAINER_IMAGE = OPERATOR_IMAGE.replace("/operator:", "/pytorch-trainer:")
UPSTREAM_NAMESPACE = "goodput-training-operator"
#: The urgent job's steps (half a second each: about 30 s of training).
URGENT_STEPS = 60
#: Upstream's worker init container waits for the master's DNS name as upstream's does.
INIT_TEMPLATE = """\
- name: init-pytorch
  image: {{.InitContainerImage}}
  imagePullPolicy: IfNotPresent
  resources:
    requests:
      cpu: 10m
      memory: 64Mi
  command:
    - python
    - -c
    - "import socket, time\\nfor _ in range({{.MaxTries}}):\\n  try:\\n    \
socket.gethostbyname('{{.MasterAddr}}'); break\\n  except OSError:\\n    time.sleep(2)"
"""


class Bench:
    """The control plane with the real node, the stack, Kueue and upstream's operator."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir: Path = args.workdir.resolve()
        peers = tuple(p for p in ("training-operator",) if p in args.systems)
        peers += ("trainer", "jobset") if "trainer" in args.systems else ()
        self.tools: Tools = find_tools(only=("control-plane", "node", "coredns", "kueue", *peers))
        self.cluster = LocalCluster(
            self.workdir / "cluster",
            tools=self.tools,
            real_node=True,
            topology=default_topology(cpu_nodes=0, gpu_nodes=2),
        )
        self.kueue = Kueue(self.cluster, integrations=("kubeflow.org/pytorchjob",))
        self.stack_dir = Path()
        self.upstream: subprocess.Popen[bytes] | None = None
        self.trainer: UpstreamTrainer | None = None

    def up(self) -> ClusterClients:
        started = time.monotonic()
        self.cluster.up(timeout=300)
        node = self.cluster.real_node
        assert node is not None
        node.import_images([OPERATOR_IMAGE, TRAINER_IMAGE])
        config = STACK.operator.config
        excluded = (*config.exclude_namespaces, UPSTREAM_NAMESPACE)
        operator = dataclasses.replace(
            STACK.operator, config=dataclasses.replace(config, exclude_namespaces=excluded)
        )
        stack = dataclasses.replace(STACK, operator=operator)
        self.stack_dir = write_version(stack, render_charts(stack), self.workdir / "stack").path
        self.cluster.kubectl("apply", "--server-side", "-k", str(self.stack_dir / "00-crds"))
        self.cluster.kubectl("wait", "--for=condition=Established", "crd", "--all")
        self.kueue.start()
        self.cluster.kubectl("apply", "--server-side", "-k", str(self.stack_dir / "01-operator"))
        self.cluster.kubectl(
            *("-n", STACK.operator.namespace, "rollout", "status", "deployment"),
            *(STACK.operator.name, "--timeout=240s"),
        )
        self.cluster.kubectl(
            "apply", "--server-side", "-f", "-", input=json.dumps(_list(queue_objects()))
        )
        print(f"control plane, real node, stack and Kueue up in {time.monotonic() - started:.0f} s")
        return ClusterClients.connect(self.cluster)

    def start_upstream(self) -> None:
        template = self.workdir / "init-container.yaml"
        template.write_text(INIT_TEMPLATE, encoding="utf-8")
        log = (self.workdir / "training-operator.log").open("wb")
        self.upstream = subprocess.Popen(
            [
                str(self.tools.path("training-operator")),
                f"--kubeconfig={self.cluster.kubeconfig}",
                f"--namespace={UPSTREAM_NAMESPACE}",
                "--enable-scheme=pytorchjob",
                f"--pytorch-init-container-image={TRAINER_IMAGE}",
                f"--pytorch-init-container-template-file={template}",
                f"--metrics-bind-address=127.0.0.1:{free_port()}",
                f"--health-probe-bind-address=127.0.0.1:{free_port()}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        time.sleep(3)
        if self.upstream.poll() is not None:
            tail = (self.workdir / "training-operator.log").read_text(errors="replace")[-2000:]
            raise SystemExit(
                f"training-operator exited at once ({self.upstream.returncode}):\n{tail}"
            )

    def stop_upstream(self) -> None:
        if self.upstream is not None and self.upstream.poll() is None:
            self.upstream.terminate()
            self.upstream.wait(timeout=30)

    def take_over(self, namespace: str, directory: Path) -> None:
        """Upstream Trainer and JobSet hold the TrainJobs from now on."""
        self.trainer, self.kueue = take_over(
            self.cluster,
            self.kueue,
            self.tools,
            self.workdir,
            namespace=namespace,
            directory=directory,
            backoff_limit=self.args.backoff_limit,
        )

    def down(self) -> None:
        self.stop_upstream()
        if self.trainer is not None:
            self.trainer.stop()
        self.kueue.stop()
        self.cluster.down()


def _list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items}


def progress_annotations(args: argparse.Namespace) -> dict[str, str]:
    """The job reports progress and restarts past ``--hang-timeout`` (kubetrain; upstream
    ignores both)."""
    return {
        K.REPORT_PROGRESS_ANNOTATION: "true",
        K.PROGRESS_TIMEOUT_ANNOTATION: str(args.hang_timeout),
    }


def training_job(
    stack_dir: Path, namespace: str, name: str, directory: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """The stack's PyTorchJob sample as the benchmark runs it: queued at priority
    ``batch``, with ``progress_annotations``."""
    job = sample(stack_dir, "PyTorchJob", namespace)
    job["metadata"]["name"] = name
    job["metadata"]["labels"] = {QUEUE_NAME_LABEL: QUEUE, PRIORITY_LABEL: "batch"}
    job["metadata"]["annotations"] = progress_annotations(args)
    job["spec"].setdefault("runPolicy", {})["backoffLimit"] = args.backoff_limit
    checkpointing(job, directory, steps=args.steps, every=args.every, delay=args.step_delay)
    sized(job)
    return job


def urgent_job(stack_dir: Path, namespace: str, name: str, directory: Path) -> dict[str, Any]:
    """The preempting job: the same size, priority ``urgent``, about 30 s of training."""
    job = sample(stack_dir, "PyTorchJob", namespace)
    job["metadata"]["name"] = name
    job["metadata"]["labels"] = {QUEUE_NAME_LABEL: QUEUE, PRIORITY_LABEL: "urgent"}
    checkpointing(job, directory, steps=URGENT_STEPS, every=URGENT_STEPS, delay=0.5)
    sized(job)
    return job


@contextlib.contextmanager
def namespace_for(bench: Bench, clients: ClusterClients, name: str) -> Iterator[str]:
    """A namespace with the LocalQueue ``goodput``; deleted afterwards, waiting for its pods
    (the quota and the node's CPUs free for the next system)."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    bench.cluster.kubectl(
        "apply", "--server-side", "-f", "-", input=json.dumps(_list([namespace, local_queue(name)]))
    )
    try:
        yield name
    finally:
        bench.cluster.kubectl("delete", "namespace", name, "--timeout=300s", check=False)


def jobs_for(
    bench: Bench, system: str, namespace: str, name: str, directories: tuple[Path, Path]
) -> tuple[dict[str, Any], Callable[[], dict[str, Any]]]:
    """The training job ``system`` runs, and what makes the preempting one."""
    args = bench.args
    if system != "trainer":
        job = training_job(bench.stack_dir, namespace, name, directories[0], args)
        return job, lambda: urgent_job(bench.stack_dir, namespace, f"{name}-urgent", directories[1])
    annotations = progress_annotations(args)
    job = trainjob(
        name,
        namespace,
        TRAINER_IMAGE,
        priority="batch",
        steps=args.steps,
        every=args.every,
        delay=args.step_delay,
        annotations=annotations,
    )
    return job, lambda: trainjob(
        f"{name}-urgent",
        namespace,
        TRAINER_IMAGE,
        priority="urgent",
        steps=URGENT_STEPS,
        every=URGENT_STEPS,
        delay=0.5,
    )


def run_system(
    bench: Bench, clients: ClusterClients, system: str, faults: list[Fault]
) -> SystemResult:
    args = bench.args
    name = "goodput"
    directory = node_directory(f"kubetrain-goodput-{system}-")
    urgent_dir = node_directory(f"kubetrain-goodput-{system}-urgent-")
    namespace = UPSTREAM_NAMESPACE if system == "training-operator" else f"goodput-{system}"
    kind: JobKind = TRAINJOB if system == "trainer" else PYTORCHJOB
    node = bench.cluster.real_node
    assert node is not None
    try:
        with namespace_for(bench, clients, namespace):
            if system == "training-operator":
                bench.start_upstream()
            if system == "trainer":
                bench.take_over(namespace, directory)
                clients = ClusterClients.connect(bench.cluster)  # the CRDs changed
            job, urgent = jobs_for(bench, system, namespace, name, (directory, urgent_dir))
            tail = PodLogTail(node.root / "pod-logs", namespace, kind.rank0.format(name=name))
            injector = FaultInjector(clients, node.images.ctr, namespace, name, kind, urgent)
            run = Run(clients, namespace, name, kind, tail, injector, faults)
            outcome = run.go(job, deadline=args.deadline_minutes * 60)
            (bench.workdir / f"{system}-rank0.log").write_text(tail.log.text(), encoding="utf-8")
            measure = goodput(
                tail.log.steps(), run.created, None if run.finished else run.created + run.limit
            )
            return SystemResult(
                system=TITLES[system],
                outcome=outcome,
                measure=measure,
                recoveries=tuple(run.recoveries()),
                own_goodput=run.own_goodput() if system == "kubetrain" else "n/a (none upstream)",
            )
    finally:
        if system == "training-operator":
            bench.stop_upstream()
        for folder in (directory, urgent_dir):
            shutil.rmtree(folder, ignore_errors=True)


def default_steps(minutes: float, delay: float) -> int:
    """Steps whose training takes about 85 % of the run (a step costs about ``delay`` plus
    10 ms of compute and the allreduce on 300m): with the faults' cost the job lasts about
    ``minutes``, and the faults, scheduled within its training time, all land while it
    trains."""
    return int(minutes * 60 * 0.85 / (delay + 0.01))


def training_seconds(steps: int, delay: float) -> float:
    """How long ``steps`` take without faults (what the fault schedule spans)."""
    return steps * (delay + 0.01)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="the job's planned length")
    parser.add_argument("--seed", type=int, default=1, help="seeds the fault schedule")
    parser.add_argument("--systems", default="kubetrain,training-operator,trainer")
    parser.add_argument("--faults", default=",".join(FAULTS), help="which faults, by name")
    parser.add_argument("--gap", type=float, default=90.0, help="least seconds between faults")
    parser.add_argument("--step-delay", type=float, default=0.5)
    parser.add_argument("--every", type=int, default=20, help="checkpoint interval (steps)")
    parser.add_argument("--steps", type=int, default=0, help="0: from --minutes")
    parser.add_argument(
        "--hang-timeout", type=int, default=20, help="progress timeout (s): 40 steps of silence"
    )
    parser.add_argument("--backoff-limit", type=int, default=3)
    parser.add_argument("--deadline-minutes", type=float, default=0.0, help="0: 1.2 x --minutes")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.mkdtemp(prefix="goodput-")))
    args = parser.parse_args(argv)
    asked = [s for s in args.systems.split(",") if s]
    unknown = sorted(set(asked) - set(SYSTEMS))
    if unknown or not asked:
        raise SystemExit(
            f"--systems {args.systems!r}: {', '.join(unknown) or 'none'} unknown; expected "
            f"some of {', '.join(SYSTEMS)}"
        )
    args.systems = [s for s in SYSTEMS if s in asked]
    args.steps = args.steps or default_steps(args.minutes, args.step_delay)
    args.deadline_minutes = args.deadline_minutes or 1.2 * args.minutes
    try:
        faults = schedule(
            args.seed,
            training_seconds(args.steps, args.step_delay),
            kinds=[f for f in args.faults.split(",") if f],
            gap=args.gap,
        )
    except ValueError as err:
        raise SystemExit(str(err)) from None
    print(
        f"seed {args.seed}: {args.steps} steps of {args.step_delay:g} s + compute, checkpoint "
        f"every {args.every}; faults "
        + ", ".join(f"{f.kind} at +{f.at:.0f} s" for f in faults)
        + f"; deadline {args.deadline_minutes:g} min; work directory {args.workdir}",
        flush=True,
    )
    args.workdir.mkdir(parents=True, exist_ok=True)
    bench = Bench(args)
    results = []
    try:
        clients = bench.up()
        for system in args.systems:
            results.append(run_system(bench, clients, system, faults))
            print(table(results[-1:]), flush=True)
    finally:
        bench.down()
    print("\n" + table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
