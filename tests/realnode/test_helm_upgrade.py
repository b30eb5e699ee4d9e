"""The upgrade of the Argo CD tests, through Helm: the generated chart installed with the
real helm on the control plane with the real node (the operator runs there), 20 jobs of
every kind started, then the stack's next version upgraded in place as docs/gitops.md says
(the new CRDs applied server-side first, since Helm never upgrades ``crds/``, then ``helm
upgrade``): no job or pod recreated, the removed runtime deleted, the operator rolled with
the Lease handed over; ``helm uninstall`` keeps the CRDs and the users' jobs.

Runs before the modules that install the stack with kubectl; leaves the cluster as it
found it.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.local import LocalCluster
from cluster.tools import find_tools
from kubetrain.gitops.helm import CHART_NAME
from kubetrain.manifest import parse_yaml
from tests.ahead import Ahead
from tests.clusters import ClusterClients
from tests.integration.kube import list_objects, wait_for
from tests.realnode.upgrade import (
    NEW_FIELD,
    WAIT,
    add_crd_field,
    helm_stack,
    lease_holder,
    operator_args,
    operator_pods,
    remove_stack_leftovers,
    runtime_names,
    served_spec_fields,
    snapshot,
    start_fleet,
    wait_rolled,
)
from tests.realnode.workloads import OPERATOR_NAMESPACE

RELEASE = "kubetrain"
RELEASE_NAMESPACE = "kubetrain-system-releases"
FLEET_NAMESPACE = "team-helm"
PYTORCHJOB_CRD = "pytorchjobs.kubeflow.org"


@dataclasses.dataclass
class Helm:
    cluster: LocalCluster
    home: Path
    #: The real helm, found (under make test, perhaps waited for) by find_tools.
    binary: Path

    def __call__(self, *args: str) -> str:
        env = dict(os.environ)
        for name in ("HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME"):
            env[name] = str(self.home / name.lower())
        kube = ["--kubeconfig", str(self.cluster.kubeconfig), "--namespace", RELEASE_NAMESPACE]
        done = subprocess.run(
            [str(self.binary), *args, *kube],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"
        return done.stdout


@pytest.fixture(scope="module")
def helm(
    real_node_cluster: LocalCluster,
    real_node_clients: ClusterClients,
    node_images: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Helm]:
    installed = list_objects(
        real_node_clients.dyn, "apps/v1", "Deployment", namespace=OPERATOR_NAMESPACE
    )
    assert not installed, "the operator is already installed: the Helm test needs it absent"
    made = Helm(
        real_node_cluster, tmp_path_factory.mktemp("helm-home"), find_tools(only=("helm",)).helm
    )
    try:
        yield made
    finally:
        cluster = real_node_cluster
        env = {**os.environ, "HELM_CONFIG_HOME": str(made.home / "helm_config_home")}
        subprocess.run(
            [
                str(made.binary),
                "uninstall",
                RELEASE,
                "--ignore-not-found",
                "--wait",
                "--kubeconfig",
                str(cluster.kubeconfig),
                "--namespace",
                RELEASE_NAMESPACE,
            ],
            capture_output=True,
            check=False,
            env=env,
        )
        # The jobs' namespace after the operator is gone: its runtime's finalizer is
        # released here (the operator would release it once no TrainJob uses it).
        remove_stack_leftovers(cluster, FLEET_NAMESPACE, RELEASE_NAMESPACE)


def _available(clients: ClusterClients) -> int:
    found = list_objects(clients.dyn, "apps/v1", "Deployment", namespace=OPERATOR_NAMESPACE)
    return int(((found[0].get("status") or {}).get("availableReplicas") or 0) if found else 0)


def test_helm_upgrade_in_place_under_running_jobs(
    helm: Helm, real_node_clients: ClusterClients, helm_charts: Ahead[tuple[Path, Path]]
) -> None:
    cluster, clients = helm.cluster, real_node_clients
    stack = helm_stack()
    first, second = helm_charts.result()
    helm("install", RELEASE, str(first), "--create-namespace")
    wait_for(
        lambda: _available(clients),
        lambda n: n == 2,
        what="the operator's 2 replicas available on the real node",
        timeout=WAIT,
        interval=1.0,
    )
    before = start_fleet(cluster, clients, FLEET_NAMESPACE)
    leader_before, operators_before = lease_holder(clients), operator_pods(clients)
    removed = stack.runtimes[-1].props.name
    assert removed in runtime_names(cluster)

    # The next version: new flags, a runtime fewer, and a new field in a CRD (the chart's
    # crds/ are generated from the same CRDs; the field is added to the file here).
    start = time.monotonic()
    crd_file = second / "crds" / f"{PYTORCHJOB_CRD}.yaml"
    crd: dict[str, Any] = parse_yaml(crd_file.read_text())
    add_crd_field(crd, {"type": "string", "description": "a note"})
    crd_file.write_text(yaml.safe_dump(crd, sort_keys=False))
    # Helm installs crds/ once and never upgrades them: docs/gitops.md's step for a newer
    # version's CRDs comes first. Helm's field manager owns what it installed, so the
    # changed CRD conflicts without --force-conflicts (this test found the docs'
    # command lacking it).
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(second / "crds"))
    helm("upgrade", RELEASE, str(second))
    _, leader_after = wait_rolled(clients, operators_before)
    took = time.monotonic() - start
    after = snapshot(clients, FLEET_NAMESPACE)
    recreated = sorted(n for n, uid in before["pods"].items() if after["pods"].get(n) != uid)
    print(
        f"\nhelm upgrade 0.1.0 -> 0.1.1 under {len(before['jobs'])} running jobs "
        f"({len(before['pods'])} pods): {took:.0f} s to the operator rolled, leader "
        f"{leader_before} -> {leader_after}, pods recreated: {len(recreated)}"
    )
    (release,) = parse_yaml(helm("list", "-o", "yaml"))
    assert release["chart"] == f"{CHART_NAME}-0.1.1" and str(release["revision"]) == "2"
    assert recreated == [], f"pods recreated: {recreated}"
    assert after == before, "a job was recreated or changed state"
    assert "--log-level=debug" in operator_args(clients)
    assert NEW_FIELD in served_spec_fields(cluster, PYTORCHJOB_CRD)
    assert removed not in runtime_names(cluster), "helm upgrade left the removed runtime"

    helm("uninstall", RELEASE, "--wait")
    wait_for(
        lambda: operator_pods(clients),
        lambda pods: not pods,
        what="the operator's pods gone after helm uninstall",
        timeout=WAIT,
    )
    crds = cluster.kubectl("get", "crd", "-o", "name").stdout
    assert PYTORCHJOB_CRD in crds, "helm uninstall deleted a CRD"
    assert snapshot(clients, FLEET_NAMESPACE)["jobs"] == before["jobs"]
