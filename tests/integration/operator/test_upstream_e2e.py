"""Upstream Kubeflow Trainer v2.3.0's own end-to-end suite (``test/e2e`` of the pinned
Trainer module, Ginkgo), compiled unchanged by ``make cluster-tools`` into
``trainer-e2e.test``, run against kubetrain's operator on the local control plane.

The specs that run here are those whose pods need not run code: kwok plays the kubelet.
The others, and why, are in :data:`NOT_RUN_HERE` (the README lists them too).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.dynamic import DynamicClient

from cluster.local import LocalCluster
from cluster.tools import Tools, find_tools
from kubetrain.controller.config import OperatorConfig
from tests.conftest import REPO_ROOT
from tests.integration.operator.conftest import RunningOperator

RUNTIMES = REPO_ROOT / "tests/data/upstream/trainer-v2.3.0/manifests/base/runtimes"

#: The specs run here (Ginkgo's full text: containers, then the leaf), all of which pass.
RUN_HERE = (
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
    "PyTorch, DeepSpeed, JAX and XGBoost runtime references": "each waits to see its Job "
    "active but not ready, then complete; kwok makes a pod ready as it starts it, and no "
    "driver here holds readiness back or runs the training scripts",
    "Flux runtime reference": "kubetrain has no Flux policy (flux-distributed runtime)",
    "runtime status server instrumentation": "kubetrain has no status server yet",
}


@pytest.fixture
def operator_config() -> OperatorConfig:
    """Every namespace: the suite makes its own (``e2e-<random>``)."""
    return OperatorConfig(workers=2, kube_api_qps=100, kube_api_burst=200)


@pytest.fixture
def e2e_tools() -> Tools:
    return find_tools(only=("trainer-e2e", "kueue"))


@pytest.fixture
def upstream_runtimes(
    e2e_tools: Tools, dyn: DynamicClient, local_cluster: LocalCluster
) -> Iterator[None]:
    """What the suite expects installed: JobSet's CRD (it checks no JobSet is made) and
    upstream's torch-distributed ClusterTrainingRuntime, as shipped."""
    (jobset_crd,) = [p for p in e2e_tools.kueue_dependency_crds if "jobset" in p.name]
    local_cluster.kubectl("apply", "--server-side", "-f", str(jobset_crd))
    local_cluster.kubectl(
        "wait", "--for=condition=Established", "crd/jobsets.jobset.x-k8s.io", "--timeout=60s"
    )
    runtime = RUNTIMES / "torch_distributed.yaml"
    local_cluster.kubectl("apply", "--server-side", "-f", str(runtime))
    try:
        yield
    finally:
        local_cluster.kubectl("delete", "-f", str(runtime), "--ignore-not-found", check=False)


def _specs(report: Path) -> dict[str, dict[str, Any]]:
    """The suite's JSON report: each spec run (not skipped) by its full text."""
    suites = json.loads(report.read_text(encoding="utf-8"))
    found: dict[str, dict[str, Any]] = {}
    for suite in suites:
        for spec in suite.get("SpecReports") or []:
            if spec.get("LeafNodeType") != "It" or spec.get("State") == "skipped":
                continue
            text = " ".join([*spec.get("ContainerHierarchyTexts", []), spec["LeafNodeText"]])
            found[text] = spec
    return found


def test_upstream_trainer_e2e_specs_pass_against_kubetrain(
    operator: RunningOperator,
    upstream_runtimes: None,
    e2e_tools: Tools,
    local_cluster: LocalCluster,
    tmp_path: Path,
) -> None:
    """Upstream's own test binary, unchanged, passes every spec listed in RUN_HERE."""
    report = tmp_path / "report.json"
    focus = "|".join(f"^{text}$".replace("(", r"\(").replace(")", r"\)") for text in RUN_HERE)
    done = subprocess.run(
        [
            str(e2e_tools.path("trainer-e2e.test")),
            f"-ginkgo.focus={focus}",
            f"-ginkgo.json-report={report}",
            "-ginkgo.no-color",
            "-ginkgo.v",
            "-ginkgo.timeout=9m",
        ],
        env={"KUBECONFIG": str(local_cluster.kubeconfig), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    specs = _specs(report)
    failed = {
        text: (spec.get("Failure") or {}).get("Message", spec.get("State"))
        for text, spec in specs.items()
        if spec.get("State") != "passed"
    }
    assert not failed, f"failed upstream specs: {failed}\n{done.stdout[-4000:]}"
    assert sorted(specs) == sorted(RUN_HERE), f"ran {sorted(specs)}\n{done.stdout[-4000:]}"
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
