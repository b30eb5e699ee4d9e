"""Upstream Kubeflow Trainer v2.3.0's own end-to-end suite (``test/e2e`` of the pinned
Trainer module, Ginkgo), compiled unchanged by ``make cluster-tools`` into
``trainer-e2e.test``, run against kubetrain's operator on the local control plane, with
upstream's four runtimes installed as shipped.

kwok plays the kubelet. Pods in the suite's namespaces (``e2e-*``) start 2 s after they
are bound (``cluster/stages/pod-running.yaml``), and :class:`PodDriver` ends them as
their command would, by patching the pod as the fake-kubelet mechanism does (never the
job): ``sshd`` and ``/pause`` run until stopped, ``sleep N`` exits 0 after N seconds,
and anything else (a training script) exits 0 a second after it started. The specs not
run here, and why, are in :data:`NOT_RUN_HERE` (docs/sdk.md lists them too).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from cluster.fake_pods import EXIT_CODE_ANNOTATION, make_pod_exit
from cluster.local import LocalCluster
from cluster.tools import Tools, find_tools
from kubetrain.controller.conditions import parse_time
from tests.conftest import REPO_ROOT
from tests.integration.kube import wait_for_established
from tests.integration.operator.conftest import RunningOperator
from tests.integration.trainer_e2e import failures, focus_of, run_suite, specs

RUNTIMES = REPO_ROOT / "tests/data/upstream/trainer-v2.3.0/manifests/base/runtimes"
UPSTREAM_RUNTIMES = (
    "torch_distributed.yaml",
    "deepspeed_distributed.yaml",
    "jax_distributed.yaml",
    "xgboost_distributed.yaml",
)

#: The specs run here (Ginkgo's full text: containers, then the leaf), all of which pass.
RUN_HERE = (
    "TrainJob e2e when Creating TrainJob to perform the PyTorch workload "
    "should create TrainJob with PyTorch runtime reference",
    "TrainJob e2e when Creating TrainJob to perform OpenMPI workload "
    "should create TrainJob with DeepSpeed runtime reference",
    "TrainJob e2e when Creating TrainJob to perform JAX workload "
    "should create TrainJob with JAX runtime reference",
    "TrainJob e2e when Creating TrainJob to perform XGBoost workload "
    "should create TrainJob with XGBoost runtime reference",
    "TrainJob e2e when Creating a TrainJob with RuntimePatches "
    "should preserve user-provided manager fields",
    "TrainJob e2e when Creating a TrainJob with RuntimePatches "
    "should update Time only for the changed patch on update",
    "TrainJob e2e when Creating a TrainJob managed by an external controller "
    "should not be reconciled by the built-in controller",
    "TrainJob e2e when Creating a TrainJob with Resource Timeouts "
    "should fail the TrainJob with DeadlineExceeded when active timeout expires",
    "TrainJob e2e when Updating a runtime a suspended TrainJob should use the original runtime "
    "configuration and not pick up the new configuration TrainingRuntime",
    "TrainJob e2e when Updating a runtime a suspended TrainJob should use the original runtime "
    "configuration and not pick up the new configuration ClusterTrainingRuntime",
)
#: The suite's other specs, and why they do not run here yet.
NOT_RUN_HERE = {
    # A TrainJob on a flux-policy runtime is refused (InvalidSpec naming why): its pods
    # would run their command without Flux, which upstream's plugin installs.
    "Flux runtime reference": "kubetrain has no Flux policy (flux-distributed runtime)",
    # Its pod must run a Python script that calls the operator's progress server:
    # tests/realnode/test_progress_pod.py runs it on the real node.
    "runtime status server instrumentation": "runs on the real node",
}


@pytest.fixture
def e2e_tools() -> Tools:
    return find_tools(only=("trainer-e2e", "kueue"))


@pytest.fixture
def upstream_runtimes(
    e2e_tools: Tools, dyn: DynamicClient, local_cluster: LocalCluster
) -> Iterator[None]:
    """What the suite expects installed: JobSet's CRD (it checks no JobSet is made) and
    upstream's ClusterTrainingRuntimes, as shipped."""
    (jobset_crd,) = [p for p in e2e_tools.kueue_dependency_crds if "jobset" in p.name]
    local_cluster.kubectl("apply", "--server-side", "-f", str(jobset_crd))
    wait_for_established(dyn, "jobsets.jobset.x-k8s.io")
    for runtime in UPSTREAM_RUNTIMES:
        local_cluster.kubectl("apply", "--server-side", "-f", str(RUNTIMES / runtime))
    try:
        yield
    finally:
        for runtime in UPSTREAM_RUNTIMES:
            local_cluster.kubectl(
                "delete", "-f", str(RUNTIMES / runtime), "--ignore-not-found", check=False
            )


class PodDriver:
    """Ends the suite's pods as their command would (module docs), every 0.2 s."""

    def __init__(self, core_v1: client.CoreV1Api) -> None:
        self.core_v1 = core_v1
        self.ended: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="e2e-pods", daemon=True)

    def __enter__(self) -> PodDriver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self._step(time.time())
            except (ApiException, urllib3.exceptions.HTTPError):
                continue  # a namespace going away meanwhile; the next look retries

    def _step(self, now: float) -> None:
        listed: Any = self.core_v1.list_pod_for_all_namespaces(_preload_content=False)
        for pod in json.loads(listed.data)["items"]:
            meta, status = pod["metadata"], pod.get("status") or {}
            if not meta["namespace"].startswith("e2e-") or meta.get("deletionTimestamp"):
                continue
            annotations = meta.get("annotations") or {}
            if status.get("phase") != "Running" or EXIT_CODE_ANNOTATION in annotations:
                continue
            runs = _runs_for(pod["spec"]["containers"][0])
            started = parse_time(status.get("startTime"))
            if runs is not None and started is not None and now - started.timestamp() >= runs:
                make_pod_exit(self.core_v1, meta["namespace"], meta["name"], 0)
                self.ended.append(f"{meta['namespace']}/{meta['name']}")


def _runs_for(container: dict[str, Any]) -> float | None:
    """How long a container with this command runs, in seconds (None: until stopped)."""
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    words = " ".join(argv).split()  # `sh -c "sleep 600"` sleeps too
    if any(w.endswith(("sshd", "/pause")) for w in words):
        return None
    if "sleep" in words and words.index("sleep") + 1 < len(words):
        return float(words[words.index("sleep") + 1])
    return 1.0


def test_upstream_trainer_e2e_specs_pass_against_kubetrain(
    operator: RunningOperator,
    upstream_runtimes: None,
    e2e_tools: Tools,
    local_cluster: LocalCluster,
    core_v1: client.CoreV1Api,
    tmp_path: Path,
) -> None:
    """Upstream's own test binary, unchanged, passes every spec listed in RUN_HERE."""
    report = tmp_path / "report.json"
    with PodDriver(core_v1) as driver:
        done = run_suite(e2e_tools, local_cluster.kubeconfig, report, focus_of(RUN_HERE), tmp_path)
    ran = specs(report)
    failed = failures(ran)
    assert not failed, f"failed upstream specs: {failed}\n{done.stdout[-4000:]}"
    assert sorted(ran) == sorted(RUN_HERE), f"ran {sorted(ran)}\n{done.stdout[-4000:]}"
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # The framework specs' pods were ended by the driver (their runtimes' commands).
    assert driver.ended, "the driver ended no pod"
