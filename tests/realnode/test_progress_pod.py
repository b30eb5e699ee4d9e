"""Progress reports from inside a TrainJob's pod on the real node: the pod has exactly what
the operator gives it (the SDK's variables, the kubelet's projected token for its
TrainJob's audience, the CA from ``<trainjob>-tls-config``) and reaches the operator's
pods through the ``kubetrain-operator-progress`` Service.

- the Kubeflow SDK's own ``update_trainjob_status``, called by a function the SDK's
  ``train`` ships (the trainer image carries the SDK);
- upstream Trainer v2.3.0's e2e spec for its status server, unchanged (its pod runs
  ``python3 -c`` with upstream's script against the stack's ``torch-distributed``).
"""

from __future__ import annotations

from pathlib import Path

from cluster.local import LocalCluster
from cluster.tools import find_tools
from tests.clusters import ClusterClients
from tests.integration.kube import read
from tests.integration.operator.sdk_users import Sdk, scientist_env
from tests.integration.sdk import run_sdk
from tests.integration.trainer_e2e import failures, focus_of, run_suite, specs
from tests.realnode.workloads import TRAINING_TIMEOUT

STATUS_SPEC = (
    "TrainJob e2e when Creating TrainJob with runtime status server instrumentation "
    "should inject runtime configuration which allows the runtime status endpoint to be called"
)


def test_the_sdks_progress_report_from_a_pod_reaches_its_trainjob(
    installed_stack: Path,
    real_node_cluster: LocalCluster,
    real_node_clients: ClusterClients,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    env = scientist_env(real_node_cluster.kubeconfig, node_namespace, tmp_path)
    sdk = Sdk(env)
    name = sdk("train-progress", "--runtime", "torch-distributed")["name"]
    done = run_sdk(
        "trainer_v2",
        *("wait", "--name", name, "--status", "Complete", "--status", "Failed"),
        *("--timeout", str(int(TRAINING_TIMEOUT))),
        env=env,
        timeout=TRAINING_TIMEOUT + 60,
    )
    lines = sdk("logs", "--name", name, "--step", "node-0")["lines"]
    assert done.get("job", {}).get("status") == "Complete", (done, lines[-20:])
    assert any("progress reported: True" in line for line in lines), lines[-20:]
    trainjob = read(
        real_node_clients.dyn, "trainer.kubeflow.org/v1alpha1", "TrainJob", name, node_namespace
    )
    status = trainjob["status"]["trainerStatus"]
    assert status["progressPercentage"] == 42 and status["estimatedRemainingSeconds"] == 120
    assert status["metrics"] == [{"name": "loss", "value": "0.123"}]


def test_upstreams_status_server_spec_passes_on_the_real_node(
    installed_stack: Path, real_node_cluster: LocalCluster, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    tools = find_tools(only=("trainer-e2e",))
    done = run_suite(tools, real_node_cluster.kubeconfig, report, focus_of([STATUS_SPEC]), tmp_path)
    ran = specs(report)
    assert sorted(ran) == [STATUS_SPEC], f"ran {sorted(ran)}\n{done.stdout[-4000:]}"
    assert not failures(ran), f"{failures(ran)}\n{done.stdout[-4000:]}"
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
