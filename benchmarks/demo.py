"""The operator end to end on the local control plane: ``make demo``.

1. starts the local control plane (or reuses the one ``make cluster-up`` started),
2. applies the ``local`` stack (CRDs, the operator's RBAC/Deployment, one sample job per
   framework) with server-side apply,
3. runs ``kubetrain operator`` as a local process (on kwok's fake nodes no container
   runs, so the Deployment's pod is a stand-in; the real operator is this process),
4. plays the training programs: once a job is Running, its pods "exit 0" (kwok's fake
   kubelet, see cluster/stages) - an MPIJob's launcher only, its workers run sshd -
5. prints every state change until all three jobs have Succeeded.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from cluster.fake_pods import EXIT_CODE_ANNOTATION, exit_patch
from cluster.local import LocalCluster
from kubetrain.api import keys as K
from kubetrain.controller.errors import ApiError
from kubetrain.controller.kube import JOB_RESOURCES, PODS, KubeApi
from kubetrain.synth import render_stack

DEFAULT_WORKDIR = Path("build/cluster")


def apply_stack(cluster: LocalCluster, stack: str) -> list[dict[str, Any]]:
    """Server-side apply every chart of ``stack``; return its training jobs."""
    charts = render_stack(stack)
    jobs: list[dict[str, Any]] = []
    for chart in charts:
        objects = [o for o in chart.objects if o["kind"] not in JOB_RESOURCES]
        jobs += [o for o in chart.objects if o["kind"] in JOB_RESOURCES]
        if objects:
            cluster.kubectl(
                "apply",
                "--server-side",
                "--field-manager=kubetrain-demo",
                "-f",
                "-",
                input=yaml.safe_dump_all(objects),
            )
            print(f"applied chart {chart.name}: {len(objects)} objects")
        if chart.name == "crds":
            # By name: `crd --all` would wait on CRDs of other charts too.
            crds = [crd["metadata"]["name"] for crd in objects]
            cluster.wait_established(crds, deadline=time.monotonic() + 60)
    if any(o["kind"] == "ClusterTrainingRuntime" for c in charts for o in c.objects):
        jobs.append(TRAINJOB)
    if jobs:
        cluster.kubectl(
            "apply",
            "--server-side",
            "--field-manager=kubetrain-demo",
            "-f",
            "-",
            input=yaml.safe_dump_all(jobs),
        )
        names = ", ".join(f"{j['kind']}/{j['metadata']['name']}" for j in jobs)
        print(f"applied the sample jobs: {names}")
    return jobs


#: A TrainJob of the stack's linear-scaling runtime, as the Kubeflow SDK would post it.
TRAINJOB: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "sample-trainjob", "namespace": "default"},
    "spec": {"runtimeRef": {"name": "torch-ddp-sample"}, "trainer": {"numNodes": 2}},
}


def state_of(job: dict[str, Any] | None) -> str:
    if job is None:
        return "(deleted)"
    status = job.get("status") or {}
    if job["kind"] == "TrainJob":
        # Its conditions stay empty until the end (the Kubeflow SDK needs that).
        state = status.get("state")
        return "Succeeded" if state == "Complete" else str(state or "(no status yet)")
    conditions = status.get("conditions") or []
    return str(conditions[-1]["type"]) if conditions else "(no status yet)"


def pods_of(api: KubeApi, job: dict[str, Any]) -> list[dict[str, Any]]:
    meta = job["metadata"]
    if job["kind"] == "TrainJob":
        selector = f"{K.JOBSET_NAME_LABEL}={meta['name']}"
    else:
        selector = K.job_selector(job["kind"], meta["name"])
    items, _ = api.list(PODS, meta.get("namespace", "default"), label_selector=selector)
    return items


def summary(pods: list[dict[str, Any]]) -> str:
    phases: dict[str, int] = {}
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase", "Pending")
        phases[phase] = phases.get(phase, 0) + 1
    return ", ".join(f"{n} {p}" for p, n in sorted(phases.items())) or "no pods"


def finish_training(api: KubeApi, job: dict[str, Any], pods: list[dict[str, Any]]) -> None:
    """Make the job's programs exit 0 (an MPIJob's workers only serve sshd)."""
    for pod in pods:
        meta = pod["metadata"]
        role = (meta.get("labels") or {}).get(K.JOB_ROLE)
        if job["kind"] == "MPIJob" and role != "launcher":
            continue
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        if EXIT_CODE_ANNOTATION in (meta.get("annotations") or {}):
            continue
        api.request(
            "PATCH",
            PODS.path(meta["namespace"], meta["name"]),
            body=exit_patch(0),
            content_type="application/merge-patch+json",
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.demo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--stack", default="local")
    parser.add_argument("--run-seconds", type=float, default=3.0, help="how long each job 'trains'")
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args(argv)

    cluster = LocalCluster(args.workdir)
    if cluster.is_running():
        print(f"using the control plane in {cluster.workdir}")
    else:
        print(f"starting the local control plane in {cluster.workdir} ...")
        cluster.up()
    jobs = apply_stack(cluster, args.stack)
    api = KubeApi.connect(str(cluster.kubeconfig))
    log = cluster.workdir / "demo-operator.log"
    operator = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubetrain.commands.operator",
            f"--kubeconfig={cluster.kubeconfig}",
            "--log-format=text",
            "--metrics-port=18080",
            "--metrics-bind-address=127.0.0.1",
            "--health-port=18081",
            "--health-bind-address=127.0.0.1",
            "--progress-port=18443",
            "--progress-bind-address=127.0.0.1",
            "--progress-host=127.0.0.1",
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    print(f"operator running (pid {operator.pid}, log {log})\n")
    began = time.monotonic()
    last: dict[str, str] = {}
    running_since: dict[str, float] = {}
    try:
        while time.monotonic() - began < args.timeout:
            if operator.poll() is not None:
                print(log.read_text()[-3000:], file=sys.stderr)
                print("the operator exited", file=sys.stderr)
                return 1
            done = 0
            for job in jobs:
                meta = job["metadata"]
                key = f"{job['kind']} {meta.get('namespace', 'default')}/{meta['name']}"
                live = api.get(
                    JOB_RESOURCES[job["kind"]], meta.get("namespace", "default"), meta["name"]
                )
                state = state_of(live)
                pods = pods_of(api, job) if live else []
                line = f"{state:<16} pods: {summary(pods)}"
                if last.get(key) != line:
                    print(f"{time.monotonic() - began:6.1f}s  {key:<40} {line}")
                    last[key] = line
                if state == "Running":
                    running_since.setdefault(key, time.monotonic())
                    if time.monotonic() - running_since[key] >= args.run_seconds:
                        finish_training(api, job, pods)
                done += state == "Succeeded"
            if done == len(jobs):
                print(f"\nall {len(jobs)} sample jobs Succeeded in {time.monotonic() - began:.1f}s")
                print("the control plane keeps running: make cluster-down stops it")
                return 0
            time.sleep(0.5)
        print(f"timed out after {args.timeout:.0f}s; operator log: {log}", file=sys.stderr)
        return 1
    except ApiError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        operator.terminate()
        operator.wait(timeout=30)
        api.close()


if __name__ == "__main__":
    raise SystemExit(main())
