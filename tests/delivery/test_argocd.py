"""GitOps for real: the real Argo CD (v3.2.11, built here; ``cluster/argocd.py``) syncs
the ``local`` stack from a git repository, as a platform team delivers it, onto the
control plane with the real node (the operator runs there as its Deployment's pods).

The tests run in order on one delivery (module-scoped): ``make demo-argocd``'s own code
delivers the stack and the first test watches its waves, then the health of jobs through
their lives as the real controller evaluates kubetrain's Lua, an upgrade in place under
running jobs, a bad commit and its revert, and at the end the root Application deleted.
It runs on a control plane of its own (profile ``argocd``, ``tests/profiles.py``), which
is disposed of afterwards: nothing is cleaned up. Its jobs run on kwok's GPU nodes; the
operator runs on the real node (the demo imports the images the stack names, which the
node's image store keeps from one node to the next: ``cluster/node_store.py``). (Every
stack synced against the real Kueue is the other Argo CD test of a run, and why it is a
second install: ``tests/integration/test_argocd_stacks.py``.)
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from benchmarks import demo_argocd
from cluster.argocd import NAMESPACE as ARGOCD_NAMESPACE
from cluster.argocd import LocalArgoCd
from cluster.fake_pods import make_pod_exit
from cluster.gitops_repo import GitOpsRepo
from cluster.local import LocalCluster
from kubetrain.gitops.render import render_charts
from kubetrain.gitops.stack import Samples
from kubetrain.gitops.writer import write_version
from stacks.local import STACK
from tests.clusters import ClusterClients
from tests.integration.argocd_apps import app_state, applications, synced_and_healthy
from tests.integration.kube import list_objects, read, wait_for
from tests.integration.operator.jobs import pytorch_job
from tests.realnode.upgrade import (
    JOB_GROUPS,
    NEW_FIELD,
    PREFIXES,
    add_crd_field,
    bumped,
    gpu_runtime,
    jobs_of_every_kind,
    lease_holder,
    on_gpu_nodes,
    operator_args,
    operator_pods,
    runtime_names,
    served_spec_fields,
    snapshot,
    start_fleet,
    wait_rolled,
)
from tests.realnode.workloads import OPERATOR_NAMESPACE

#: The delivered stack's Applications, in wave order (no samples: see ``delivered``).
CHILDREN = ("local-crds", "local-operator", "local-runtimes")
TEAM_NAMESPACE = "team-gitops"
PYTORCHJOB_CRD = "pytorchjobs.kubeflow.org"
SYNC_TIMEOUT = 240.0


@dataclasses.dataclass
class Delivery:
    """The stack as Argo CD delivers it, and how the tests look at it."""

    cluster: LocalCluster
    clients: ClusterClients
    argocd: LocalArgoCd
    repo: GitOpsRepo
    version_dir: Path

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.clients.api_client)

    def apps(self) -> dict[str, dict[str, Any]]:
        return applications(self.clients.dyn)

    def wait_apps(
        self, done: Callable[[dict[str, dict[str, Any]]], bool], what: str
    ) -> dict[str, dict[str, Any]]:
        return wait_for(self.apps, done, what=what, timeout=SYNC_TIMEOUT, interval=1.0)

    def apply_root(self, version_dir: Path) -> None:
        self.cluster.kubectl("apply", "-f", str(version_dir / "argocd" / "root-application.yaml"))

    def refresh(self, name: str) -> None:
        """Ask Argo CD to look at git now (what its UI's Refresh button does)."""
        self.cluster.kubectl(
            "-n",
            ARGOCD_NAMESPACE,
            "annotate",
            "--overwrite",
            f"applications.argoproj.io/{name}",
            "argocd.argoproj.io/refresh=normal",
        )


def delivered(repo: GitOpsRepo) -> Any:
    """The ``local`` stack as delivered here: two operator replicas (a standby takes over
    on an upgrade), without the sample jobs (they train for real, and the 2 CPUs of the
    node go to the operator and the test's jobs)."""
    operator = dataclasses.replace(STACK.operator, replicas=2)
    return repo.stack(dataclasses.replace(STACK, operator=operator, samples=Samples()))


@pytest.fixture(scope="module")
def delivery(argocd_cluster: LocalCluster, argocd_clients: ClusterClients) -> Iterator[Delivery]:
    """The delivery ``make demo-argocd`` makes on this control plane (the first test runs
    it): its repository in the cluster's work directory, its Argo CD."""
    cluster, clients = argocd_cluster, argocd_clients
    assert cluster.real_node is not None
    repo = GitOpsRepo(cluster.workdir / "gitops")
    stack = delivered(repo)
    version_dir = repo.path / stack.argocd.path_prefix / stack.name / stack.version
    argocd = LocalArgoCd(cluster)
    made = Delivery(cluster, clients, argocd, repo, version_dir)
    try:
        yield made
    finally:
        # Argo CD's processes stop; what it delivered goes with the control plane.
        argocd.stop()


# 1. The first sync: waves wait for health --------------------------------------------


def test_make_demo_argocd_delivers_the_stack_and_each_wave_waits_for_the_last(
    delivery: Delivery,
) -> None:
    """``make demo-argocd`` (``benchmarks/demo_argocd.py``, here with two operator
    replicas: a standby takes over on the upgrade below) on this cluster: it reuses the
    running control plane, commits the ``local`` stack to a repository in the cluster's
    work directory, starts Argo CD, applies the root and returns once every Application
    is Synced and Healthy. Watched meanwhile: each child Application is created only once
    the one of the wave before it is Synced and Healthy (the Application health check in
    argocd-cm), the CRDs' app is never Degraded on its way (the CRD health check and
    tracking annotation), and the operator ends running on the real node."""
    demo: list[int | BaseException] = []

    def run_demo() -> None:
        try:
            demo.append(
                demo_argocd.main(
                    ["--workdir", str(delivery.cluster.workdir), "--operator-replicas", "2"]
                )
            )
        except BaseException as err:  # SystemExit included: the test reports it
            demo.append(err)

    thread = threading.Thread(target=run_demo, name="demo-argocd")
    thread.start()
    try:
        seen = _watch_first_sync(delivery, lambda: bool(demo))
    finally:
        thread.join(timeout=SYNC_TIMEOUT)
    assert demo == [0], f"make demo-argocd: {demo}"
    assert (delivery.version_dir / "argocd" / "root-application.yaml").is_file()
    assert delivery.apps()["local"]["spec"]["source"]["repoURL"] == delivery.repo.url
    assert delivery.repo.url == f"file://{delivery.cluster.workdir / 'gitops'}"
    # Waves: the next child appears only after the one before is Synced and Healthy.
    first_seen, healthy_at = seen.first_seen, seen.healthy_at
    for before, after in itertools.pairwise(CHILDREN):
        assert healthy_at[before] <= first_seen[after], (before, after, seen.changes)
    degraded = [s for s in seen.changes if s[1] == "local-crds" and s[2][1] == "Degraded"]
    assert degraded == [], degraded
    deployment = read(
        delivery.clients.dyn, "apps/v1", "Deployment", "kubetrain-operator", OPERATOR_NAMESPACE
    )
    assert deployment["status"]["availableReplicas"] == 2, deployment["status"]
    pods = list_objects(delivery.clients.dyn, "v1", "Pod", namespace=OPERATOR_NAMESPACE)
    assert {p["spec"]["nodeName"] for p in pods} == {"kubetrain-node"}


@dataclasses.dataclass
class FirstSync:
    #: (seconds, Application, (sync, health)) at each change.
    changes: list[tuple[float, str, tuple[str, str]]]
    first_seen: dict[str, float]
    healthy_at: dict[str, float]


def _watch_first_sync(delivery: Delivery, gave_up: Callable[[], bool]) -> FirstSync:
    """Every change of the Applications until all are Synced and Healthy (or the demo
    returned without it: ``gave_up``). Before the demo has started Argo CD there is no
    Application kind to list."""
    seen: list[tuple[float, str, tuple[str, str]]] = []
    first_seen: dict[str, float] = {}
    healthy_at: dict[str, float] = {}
    start = time.monotonic()
    deadline = start + demo_argocd.TIMEOUT_SECONDS
    while True:
        now = time.monotonic() - start
        # Read first: a demo that had returned before the listing saw its final state.
        returned = gave_up()
        try:
            apps = delivery.apps()
        except (ResourceNotFoundError, ApiException):
            apps = {}
        for name, app in apps.items():
            current = app_state(app)
            if not seen or all(s[1] != name or s[2] != current for s in seen[-20:]):
                seen.append((now, name, current))
            first_seen.setdefault(name, now)
            if current == ("Synced", "Healthy"):
                healthy_at.setdefault(name, now)
        if synced_and_healthy(("local", *CHILDREN))(apps):
            return FirstSync(seen, first_seen, healthy_at)
        assert not returned, f"make demo-argocd returned first; seen: {seen}"
        assert time.monotonic() < deadline, f"not all Synced and Healthy; seen: {seen}"
        time.sleep(0.5)


# 2. Job health through a job's life, evaluated by the real controller -----------------


def resource_health(app: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """(health status, message) of each job the Application manages, by kind/name."""
    found: dict[str, tuple[str, str]] = {}
    for res in (app.get("status") or {}).get("resources", []):
        if res["kind"] in JOB_GROUPS:
            health = res.get("health") or {}
            found[f"{res['kind']}/{res['name']}"] = (
                health.get("status", ""),
                health.get("message", ""),
            )
    return found


def test_job_health_through_its_life_as_the_real_controller_evaluates_it(
    delivery: Delivery,
) -> None:
    """A team's jobs, one of each of the seven kinds, delivered by an Application of their
    own: kubetrain's Lua, run by Argo CD's controller, says Progressing before the pods
    run, Healthy while they run (every kind),
    Suspended when suspended, Degraded on failure (with the operator's message) and
    Healthy on success."""
    folder = delivery.repo.path / "teams" / TEAM_NAMESPACE
    folder.mkdir(parents=True, exist_ok=True)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM_NAMESPACE}}
    # And one whose pods can never be placed (a node label no node has): it stays before
    # its start.
    pending = on_gpu_nodes(pytorch_job("pt-pending", workers=0))
    master = pending["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    master["nodeSelector"] = {"kubetrain.dev/no-such-node": "true"}
    pending["metadata"]["namespace"] = TEAM_NAMESPACE
    objects = [
        namespace,
        gpu_runtime(TEAM_NAMESPACE),
        *jobs_of_every_kind("a", TEAM_NAMESPACE),
        pending,
    ]
    (folder / "jobs.yaml").write_text(yaml.safe_dump_all(objects, sort_keys=False))
    delivery.repo.commit("team-gitops: one job of each kind")
    app = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "team-jobs", "namespace": ARGOCD_NAMESPACE},
        "spec": {
            "project": "default",
            "source": {
                "repoURL": delivery.repo.url,
                "targetRevision": "main",
                "path": f"teams/{TEAM_NAMESPACE}",
            },
            "destination": {"server": "https://kubernetes.default.svc"},
            "syncPolicy": {
                "automated": {"prune": False, "selfHeal": False},
                "syncOptions": ["SkipDryRunOnMissingResource=true"],
            },
        },
    }
    delivery.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(app))

    def health_of(key: str, want: str) -> tuple[str, str]:
        found = wait_for(
            lambda: resource_health(delivery.apps().get("team-jobs") or {}),
            lambda h: h.get(key, ("", ""))[0] == want,
            what=f"Argo CD's health of {key} to be {want}",
            timeout=SYNC_TIMEOUT,
            interval=1.0,
        )
        return found[key]

    # Not started: Progressing, with the operator's message.
    _, message = health_of("PyTorchJob/pt-pending", "Progressing")
    assert message, "Progressing without the job's message"

    # Running: every kind Healthy, with the operator's message.
    for kind in JOB_GROUPS:
        if kind != "TrainJob":
            _, message = health_of(f"{kind}/{PREFIXES[kind]}-a", "Healthy")
            assert message, f"{kind} Healthy without the job's message"
    _, message = health_of("TrainJob/tj-a", "Healthy")
    assert "running" in message, message

    # Suspended.
    delivery.custom.patch_namespaced_custom_object(
        *JOB_GROUPS["TFJob"],
        TEAM_NAMESPACE,
        "tfjobs",
        "tf-a",
        {"spec": {"runPolicy": {"suspend": True}}},
    )
    health_of("TFJob/tf-a", "Suspended")
    delivery.custom.patch_namespaced_custom_object(
        *JOB_GROUPS["TrainJob"], TEAM_NAMESPACE, "trainjobs", "tj-a", {"spec": {"suspend": True}}
    )
    health_of("TrainJob/tj-a", "Suspended")

    # Failed: the master exits 1 under restartPolicy Never.
    make_pod_exit(delivery.clients.core_v1, TEAM_NAMESPACE, "pt-a-master-0", 1)
    _, message = health_of("PyTorchJob/pt-a", "Degraded")
    assert message, "Degraded without the job's message"

    # Succeeded: the launcher's pod exits 0.
    launcher = [
        p
        for p in list_objects(delivery.clients.dyn, "v1", "Pod", namespace=TEAM_NAMESPACE)
        if p["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") == "mpi-a-launcher"
    ]
    assert launcher, "no launcher pod for mpi-a"
    make_pod_exit(delivery.clients.core_v1, TEAM_NAMESPACE, launcher[0]["metadata"]["name"], 0)
    health_of("MPIJob/mpi-a", "Healthy")


# 3. Upgrade in place under running jobs ----------------------------------------------

UPGRADE_NAMESPACE = "team-upgrade"


def write_bumped(delivery: Delivery, version: str, field: dict[str, Any]) -> Path:
    """The delivered stack bumped to ``version`` (``upgrade.bumped``) with ``field`` added
    to the PyTorchJob CRD, written and committed; returns the version's folder."""
    stack = bumped(delivered(delivery.repo), version)
    charts = render_charts(stack)
    crds = next(c for c in charts if c.name == "crds").objects
    add_crd_field(next(c for c in crds if c["metadata"]["name"] == PYTORCHJOB_CRD), field)
    written = write_version(stack, charts, delivery.repo.path / stack.argocd.path_prefix)
    delivery.repo.commit(f"local {version}")
    return written.path


def test_a_version_bump_upgrades_in_place_without_touching_a_running_job(
    delivery: Delivery,
) -> None:
    """0.1.0 -> 0.1.1 committed and its root applied while 20 jobs (5 of each kind) run:
    the new CRD field served, the removed runtime pruned, the operator's Deployment
    rolled on the real node with the Lease handed to a new pod, and every job and pod
    the same objects as before (none recreated, none restarted)."""
    clients = delivery.clients
    before = start_fleet(delivery.cluster, clients, UPGRADE_NAMESPACE)
    leader_before, operators_before = lease_holder(clients), operator_pods(clients)
    removed = delivered(delivery.repo).runtimes[-1].props.name
    assert removed in runtime_names(delivery.cluster)

    start = time.monotonic()
    new_dir = write_bumped(delivery, "0.1.1", {"type": "string", "description": "a note"})
    delivery.apply_root(new_dir)
    head = delivery.repo.head()
    delivery.wait_apps(
        lambda apps: (
            synced_and_healthy(("local", *CHILDREN))(apps)
            and all(
                ((apps[n].get("status") or {}).get("sync") or {}).get("revision") == head
                for n in ("local", *CHILDREN)
            )
            and "0.1.1" in apps["local-operator"]["spec"]["source"]["path"]
        ),
        "every Application Synced and Healthy at 0.1.1",
    )
    _, leader_after = wait_rolled(clients, operators_before)
    took = time.monotonic() - start
    after = snapshot(clients, UPGRADE_NAMESPACE)
    recreated = sorted(n for n, uid in before["pods"].items() if after["pods"].get(n) != uid)
    print(
        f"\nArgo CD upgrade 0.1.0 -> 0.1.1 under {len(before['jobs'])} running jobs "
        f"({len(before['pods'])} pods): {took:.0f} s to Synced and Healthy with the operator "
        f"rolled, leader {leader_before} -> {leader_after}, pods recreated: {len(recreated)}"
    )
    assert recreated == [], f"pods recreated: {recreated}"
    assert after == before, "a job was recreated or changed state"
    assert "--log-level=debug" in operator_args(clients)
    assert NEW_FIELD in served_spec_fields(delivery.cluster, PYTORCHJOB_CRD)
    assert removed not in runtime_names(delivery.cluster), "the removed runtime was not pruned"


def test_a_bad_commit_fails_the_sync_and_reverting_restores_it(delivery: Delivery) -> None:
    """0.1.2 with an invalid CRD change: the CRDs' app fails its sync with the API
    server's refusal, the later waves are not touched, the running jobs neither; git
    revert and the 0.1.1 root applied again bring back Synced and Healthy."""
    clients = delivery.clients
    before = snapshot(clients, UPGRADE_NAMESPACE)
    operators = operator_pods(clients)
    bad_dir = write_bumped(delivery, "0.1.2", {"type": "nonsense"})
    delivery.apply_root(bad_dir)

    def failed_message(apps: dict[str, dict[str, Any]]) -> str:
        # Argo CD retries an automated sync that failed: the phase stays Running, and the
        # message says what failed and when it tries again; Failed once it gives up.
        app = apps.get("local-crds", {})
        op = (app.get("status") or {}).get("operationState") or {}
        message = str(op.get("message", ""))
        at_bad = "0.1.2" in app.get("spec", {}).get("source", {}).get("path", "")
        return message if at_bad and "failed to apply" in message else ""

    apps = delivery.wait_apps(lambda a: bool(failed_message(a)), "the CRDs' sync to fail")
    message = failed_message(apps)

    def crds_app_seen_by_root(apps: dict[str, dict[str, Any]]) -> tuple[str, str]:
        for res in (apps.get("local", {}).get("status") or {}).get("resources", []):
            if res["kind"] == "Application" and res["name"] == "local-crds":
                health = res.get("health") or {}
                return str(health.get("status", "")), str(health.get("message", ""))
        return "", ""

    # Once its retries are used up, the root sees the CRDs' app Degraded (the Application
    # health check), so the root's own sync fails instead of waiting for that wave.
    apps = delivery.wait_apps(
        lambda a: crds_app_seen_by_root(a)[0] == "Degraded",
        "the root to see the CRDs' app Degraded",
    )
    assert "Sync failed" in crds_app_seen_by_root(apps)[1], crds_app_seen_by_root(apps)
    print(f"\nArgo CD's message on the bad commit: {message}")
    assert "is invalid" in message and 'Unsupported value: "nonsense"' in message, message
    time.sleep(5)
    apps = delivery.apps()
    assert "0.1.1" in apps["local-operator"]["spec"]["source"]["path"], "a later wave moved on"
    assert operator_pods(clients) == operators
    assert snapshot(clients, UPGRADE_NAMESPACE) == before

    delivery.repo.revert()
    delivery.apply_root(delivery.repo.path / "dist" / "local" / "0.1.1")
    delivery.wait_apps(
        lambda a: (
            synced_and_healthy(("local", *CHILDREN))(a)
            and "0.1.1" in a["local-crds"]["spec"]["source"]["path"]
        ),
        "every Application Synced and Healthy at 0.1.1 again",
    )
    assert snapshot(clients, UPGRADE_NAMESPACE) == before


# 4. Deleting the root --------------------------------------------------------------


def test_deleting_the_root_removes_what_kubetrain_installed_and_nothing_else(
    delivery: Delivery,
) -> None:
    """The operator, its namespace and the runtimes go; the CRDs and the users' jobs
    stay (Argo CD never deletes a CRD on cascade, and the CRDs' app does not prune)."""
    before = snapshot(delivery.clients, UPGRADE_NAMESPACE)
    delivery.cluster.kubectl(
        "-n",
        ARGOCD_NAMESPACE,
        "delete",
        "applications.argoproj.io",
        "local",
        "--wait=true",
        "--timeout=120s",
    )
    wait_for(
        delivery.apps,
        lambda apps: not (set(apps) & {"local", *CHILDREN}),
        what="the root and its children gone",
        timeout=SYNC_TIMEOUT,
    )
    wait_for(
        lambda: (
            delivery.cluster.kubectl("get", "namespace", OPERATOR_NAMESPACE, check=False).returncode
        ),
        lambda rc: rc != 0,
        what=f"namespace {OPERATOR_NAMESPACE} deleted",
        timeout=SYNC_TIMEOUT,
    )
    cluster_runtimes = delivery.cluster.kubectl("get", "clustertrainingruntimes", "-o", "name")
    assert cluster_runtimes.stdout.strip() == "", cluster_runtimes.stdout
    crds = delivery.cluster.kubectl("get", "crd", "-o", "name").stdout
    for name in (PYTORCHJOB_CRD, "trainjobs.trainer.kubeflow.org"):
        assert name in crds, crds
    assert snapshot(delivery.clients, UPGRADE_NAMESPACE) == before
