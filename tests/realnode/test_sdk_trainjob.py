"""The Kubeflow SDK's ``train(func)`` for real: the function the SDK ships runs in the
TrainJob's node pods on the real node (a gloo all-reduce across them, under the torch
env the operator gives each node), ``get_job_logs`` returns what it printed, and
``wait_for_job_status`` ends on the pods' real exit codes."""

from __future__ import annotations

from pathlib import Path

from cluster.local import LocalCluster
from tests.integration.operator.sdk_users import Sdk, scientist_env
from tests.integration.sdk import run_sdk
from tests.realnode.workloads import TRAINING_TIMEOUT


def test_sdk_function_runs_in_the_node_pods(
    installed_stack: Path, real_node_cluster: LocalCluster, node_namespace: str, tmp_path: Path
) -> None:
    env = scientist_env(real_node_cluster.kubeconfig, node_namespace, tmp_path)
    sdk = Sdk(env)
    name = sdk("train-allreduce", "--runtime", "torch-distributed", "--num-nodes", "2")["name"]
    done = run_sdk(
        "trainer_v2",
        *("wait", "--name", name, "--status", "Complete", "--status", "Failed"),
        *("--timeout", str(int(TRAINING_TIMEOUT))),
        env=env,
        timeout=TRAINING_TIMEOUT + 60,
    )
    assert done.get("job", {}).get("status") == "Complete", done
    lines = {
        step: sdk("logs", "--name", name, "--step", step)["lines"] for step in ("node-0", "node-1")
    }
    # world 2: ranks 0 and 1 contribute 1 + 2.
    for rank, step in enumerate(("node-0", "node-1")):
        wanted = f"node {rank} rank {rank} of 2: allreduce sum 3"
        assert any(wanted in line for line in lines[step]), (step, lines[step][-20:])
