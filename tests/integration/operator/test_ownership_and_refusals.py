"""What the operator must never do and what it must always say, on a real API server:
it never adopts, changes or deletes an object it did not create; its ServiceAccount
cannot read a Secret; it stays out of excluded namespaces (its informers, and an
admission policy whatever its RBAC); a child the API server refuses is reported on the
job at once, and a refusal only a spec change can fix fails the job after a few tries;
the startup gate never waits for an event it has already seen."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cdk8s
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from kubetrain.constructs.objects import manifests
from kubetrain.constructs.operator import TrainingOperator, TrainingOperatorProps
from kubetrain.constructs.types import Image
from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.errors import ApiError
from kubetrain.controller.informer import Informer
from kubetrain.controller.kube import CONFIG_MAPS, KubeApi, Resource
from kubetrain.controller.rbac import PolicyRule, cluster_rules, operator_rules
from tests.integration.credentials import (
    ROLE_BINDINGS,
    SECRETS,
    create_service_account,
    request_token,
    write_token_kubeconfig,
)
from tests.integration.kube import apply, condition, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, mpi_job, pytorch_job

# -- ownership --------------------------------------------------------------------------


def test_rejects_adopting_a_users_config_map_and_leaves_it_untouched(
    operator: RunningOperator, jobs: Jobs, admin: KubeApi
) -> None:
    mine = admin.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "train-config", "namespace": jobs.namespace},
            "data": {"settings": "keep me"},
        }
    )
    jobs.create(mpi_job("train", workers=1))
    failed = jobs.wait_condition("MPIJob", "train", "Failed")
    message = condition(failed, "Failed")["message"]  # type: ignore[index]
    assert condition(failed, "Failed")["reason"] == "ChildNameConflict"  # type: ignore[index]
    assert f"ConfigMap {jobs.namespace}/train-config already exists" in message
    assert "not controlled by any object" in message
    jobs.wait_event("train", "ChildNameConflict")
    after = admin.get(CONFIG_MAPS, jobs.namespace, "train-config")
    assert after is not None
    assert after["metadata"]["resourceVersion"] == mine["metadata"]["resourceVersion"]
    assert "ownerReferences" not in after["metadata"]
    assert after["data"] == {"settings": "keep me"}
    # Deleting the job cannot garbage-collect what it never owned.
    jobs.delete("MPIJob", "train")
    wait_for(lambda: jobs.get("MPIJob", "train"), lambda j: j is None, what="the job gone")
    kept = admin.get(CONFIG_MAPS, jobs.namespace, "train-config")
    assert kept is not None and kept["data"] == {"settings": "keep me"}


def test_a_users_secret_is_never_taken_for_the_jobs_ssh_key(
    operator: RunningOperator, jobs: Jobs, admin: KubeApi
) -> None:
    theirs = admin.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/ssh-auth",
            "metadata": {"name": "keys-ssh", "namespace": jobs.namespace},
            "stringData": {"ssh-privatekey": "someone else's key"},
        }
    )
    jobs.create(mpi_job("keys", workers=1))
    running = jobs.wait_condition("MPIJob", "keys", "Running")
    recorded = running["status"]["sshAuthSecretName"]
    assert recorded != "keys-ssh" and recorded.startswith("keys-ssh-")
    worker = jobs.pods("keys")["keys-worker-0"]
    volumes = {v["name"]: v for v in worker["spec"]["volumes"]}
    assert volumes["ssh-auth"]["secret"]["secretName"] == recorded
    after = admin.get(SECRETS, jobs.namespace, "keys-ssh")
    assert after is not None
    assert after["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
    assert "ownerReferences" not in after["metadata"]


def test_the_jobs_own_children_are_still_reconciled(operator: RunningOperator, jobs: Jobs) -> None:
    jobs.create(mpi_job("grow", workers=1))
    jobs.wait_condition("MPIJob", "grow", "Running")
    jobs.patch("MPIJob", "grow", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 2}}}})
    hosts = wait_for(
        lambda: jobs.config_maps("grow")["grow-config"]["data"]["hostfile"],
        lambda text: text.count("\n") == 2,
        what="the hostfile to list both workers",
    )
    assert f"grow-worker-1.grow.{jobs.namespace}.svc" in hosts
    assert jobs.state("MPIJob", "grow") != "Failed"


# -- refusals ---------------------------------------------------------------------------


@pytest.fixture
def fast_refusals(operator: RunningOperator) -> Iterator[RunningOperator]:
    """The shared operator with refusal backoff 0.2 s (0.2, 0.4, 0.8, 1.6) instead of 2 s,
    for one test (the tests of an operator run one at a time; the next gets 2 s again)."""
    reconciler = operator.operator.reconciler
    before = reconciler.refusal_backoff_seconds
    reconciler.refusal_backoff_seconds = 0.2
    try:
        yield operator
    finally:
        reconciler.refusal_backoff_seconds = before


def test_pods_refused_by_pod_security_are_reported_then_fail_the_job(
    fast_refusals: RunningOperator, jobs: Jobs, core_v1: client.CoreV1Api
) -> None:
    core_v1.patch_namespace(
        jobs.namespace,
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
    )
    jobs.create(pytorch_job("psa", workers=1))
    created = jobs.wait(
        "PyTorchJob",
        "psa",
        lambda j: (condition(j, "Created") or {}).get("reason") == "ChildRefused",
        what="the refusal on the Created condition",
    )
    message = condition(created, "Created")["message"]  # type: ignore[index]
    assert "violates PodSecurity" in message
    assert re.search(r"try [1-4] of 5", message), message
    # The Event is recorded beside the status write, not before it: it may come later.
    jobs.wait_event("psa", "ChildRefused")
    failed = jobs.wait_condition("PyTorchJob", "psa", "Failed")
    final = condition(failed, "Failed")
    assert final is not None and final["reason"] == "ChildRefused"
    assert "violates PodSecurity" in final["message"] and "try 5 of 5" in final["message"]


def test_a_quota_refusal_is_reported_and_the_job_starts_once_the_quota_allows(
    operator: RunningOperator, jobs: Jobs, core_v1: client.CoreV1Api, admin: KubeApi
) -> None:
    core_v1.create_namespaced_resource_quota(
        jobs.namespace,
        client.V1ResourceQuota(
            metadata=client.V1ObjectMeta(name="pods"),
            spec=client.V1ResourceQuotaSpec(hard={"pods": "0"}),
        ),
    )
    quotas = Resource("", "v1", "resourcequotas", "ResourceQuota")
    wait_for(
        lambda: ((admin.get(quotas, jobs.namespace, "pods") or {}).get("status") or {}).get("hard"),
        bool,
        what="the quota to be in force",
    )
    jobs.create(pytorch_job("quota", workers=1))
    created = jobs.wait(
        "PyTorchJob",
        "quota",
        lambda j: (condition(j, "Created") or {}).get("reason") == "ChildRefused",
        what="the quota refusal on the Created condition",
    )
    assert "exceeded quota" in condition(created, "Created")["message"]  # type: ignore[index]
    core_v1.patch_namespaced_resource_quota(
        "pods", jobs.namespace, {"spec": {"hard": {"pods": "10"}}}
    )
    jobs.wait_running("quota", {"quota-master-0", "quota-worker-0"})
    assert jobs.state("PyTorchJob", "quota") != "Failed"


# -- the startup gate -------------------------------------------------------------------


def test_a_gate_that_only_lacks_the_service_it_creates_opens_at_once(
    installed_crds: list[dict[str, Any]],
    kubeconfig: Path,
    operator_config: OperatorConfig,
    jobs: Jobs,
    core_v1: client.CoreV1Api,
) -> None:
    """The ordering behind the stall: the master pod is Ready, but the Service the gate
    also needs is created by the very reconcile that evaluates the gate. The write's watch
    event is the echo of it (a version the cache holds): the job must still be looked at
    again at once, not after the startup timeout (600 s). Set up deterministically: the
    worker pod and the master's Service go while no operator runs, and the new operator's
    watches are slowed by half a second (as a busy network would), so its writes (the
    Service, the job's status) reach its cache before their watch events do."""
    first = RunningOperator(operator_config, kubeconfig).start()
    try:
        jobs.create(pytorch_job("echo", workers=1, gpus=0))
        jobs.wait_running("echo", {"echo-master-0", "echo-worker-0"})
    finally:
        first.stop()
    core_v1.delete_namespaced_service("echo-master-0", jobs.namespace)
    core_v1.delete_namespaced_pod("echo-worker-0", jobs.namespace, grace_period_seconds=0)
    jobs.wait_pods("echo", lambda p: "echo-worker-0" not in p, what="the worker gone")
    wait_for(lambda: jobs.services("echo"), lambda s: "echo-master-0" not in s, what="no Service")
    second = RunningOperator(operator_config, kubeconfig)
    cluster = second.operator.cluster
    for informer in (
        cluster.child_informers[("Service", jobs.namespace)],
        cluster.job_informers[("PyTorchJob", jobs.namespace)],
    ):
        informer._apply = _delayed(informer)  # type: ignore[method-assign]
    second.start()
    try:
        jobs.wait_running("echo", {"echo-master-0", "echo-worker-0"})
        assert "echo-master-0" in jobs.services("echo")
    finally:
        second.stop()


def _delayed(informer: Informer) -> Callable[..., None]:
    """The informer's watch events (not its first list, nor our own write-through) arrive
    0.5 s late."""
    deliver = informer._apply

    def late(kind: str, obj: dict[str, Any], *, notify: bool = True) -> None:
        if notify and informer.synced.is_set():
            time.sleep(0.5)
        deliver(kind, obj, notify=notify)

    return late


def test_many_gated_jobs_all_start_without_waiting_for_the_timeout(
    operator: RunningOperator, jobs: Jobs
) -> None:
    """2 of 30 gated jobs used to wait the whole startup timeout (600 s) when the Service
    their gate needed arrived as the echo of the operator's own write. Every job must get
    its workers as soon as its master is Ready."""
    names = [f"gate-{i}" for i in range(30)]
    for name in names:
        jobs.create(pytorch_job(name, workers=1, gpus=0))
    for name in names:
        jobs.wait_running(name, {f"{name}-master-0", f"{name}-worker-0"})


# -- least privilege --------------------------------------------------------------------


def test_the_operators_token_cannot_read_any_secret(
    installed_crds: list[dict[str, Any]],
    admin: KubeApi,
    kubeconfig: Path,
    namespace: str,
    core_v1: client.CoreV1Api,
    tmp_path: Path,
) -> None:
    core_v1.create_namespaced_secret(
        namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name="db-password"), string_data={"p": "x"}),
    )
    config = OperatorConfig(namespaces=(namespace,))
    create_service_account(
        admin,
        namespace,
        "operator",
        [("operator", operator_rules(config))],
        cluster_roles=[("operator", cluster_rules(config))],
    )
    token = request_token(admin, namespace, "operator")
    api = KubeApi.connect(str(write_token_kubeconfig(kubeconfig, token, tmp_path / "kc")))
    try:
        for call in (
            lambda: api.get(SECRETS, namespace, "db-password"),
            lambda: api.list(SECRETS, namespace),
            lambda: api.request("GET", SECRETS.path(namespace), query={"watch": "true"}),
        ):
            with pytest.raises(ApiError) as denied:
                call()
            assert denied.value.status == 403
        # It can create one (an MPIJob's key pair), and that is all.
        created = api.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"generateName": "probe-", "namespace": namespace},
            },
            resource=SECRETS,
        )
        with pytest.raises(ApiError) as denied:
            api.delete(SECRETS, namespace, created["metadata"]["name"])
        assert denied.value.status == 403
    finally:
        api.close()


@pytest.fixture
def other_namespace(core_v1: client.CoreV1Api) -> Iterator[str]:
    name = f"t-excluded-{secrets.token_hex(3)}"
    core_v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    wait_for(
        lambda: [
            (sa.metadata.name if sa.metadata else "")
            for sa in core_v1.list_namespaced_service_account(name).items
        ],
        lambda names: "default" in names,
        what=f"ServiceAccount default in {name}",
    )
    try:
        yield name
    finally:
        core_v1.delete_namespace(name)


def test_the_admission_policy_keeps_the_operator_out_of_excluded_namespaces(
    admin: KubeApi,
    dyn: DynamicClient,
    api_client: client.ApiClient,
    kubeconfig: Path,
    namespace: str,
    other_namespace: str,
    tmp_path: Path,
) -> None:
    """Even where RBAC would let it, the operator's ServiceAccount cannot write in an
    excluded namespace, nor in its own (but for its Lease)."""
    name = f"op-{secrets.token_hex(3)}"
    chart = cdk8s.Chart(cdk8s.App(), "test", disable_resource_name_hashes=True)
    TrainingOperator(
        chart,
        "Operator",
        TrainingOperatorProps(
            image=Image("ghcr.io/kubetrain/operator:0.1.0"),
            namespace=namespace,
            create_namespace=False,
            name=name,
            config=OperatorConfig(exclude_namespaces=(other_namespace,)),
        ),
    )
    policy_objects = [
        o
        for o in manifests(chart)
        if "ValidatingAdmissionPolicy" in o["kind"]
        and o["metadata"]["name"] == f"{name}-excluded-namespaces"
    ]
    assert len(policy_objects) == 2
    write_pods = PolicyRule(("",), ("pods",), ("create", "get"))
    write_leases = PolicyRule(("coordination.k8s.io",), ("leases",), ("create", "get"))
    create_service_account(admin, namespace, name, [("lease", [write_leases, write_pods])])
    create_service_account(admin, other_namespace, "unused", [])
    # RBAC lets it create pods in the excluded namespace too: only the policy stops it.
    admin.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "pods", "namespace": other_namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "edit",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
        resource=ROLE_BINDINGS,
    )
    as_operator = KubeApi.connect(
        str(
            write_token_kubeconfig(
                kubeconfig, request_token(admin, namespace, name), tmp_path / "kc"
            )
        )
    )
    admission = client.AdmissionregistrationV1Api(api_client)
    try:
        for obj in policy_objects:
            apply(dyn, obj)

        def pod(ns: str) -> dict[str, Any]:
            return {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"generateName": "probe-", "namespace": ns},
                "spec": {"containers": [{"name": "c", "image": "registry.example/x:1"}]},
            }

        def refused_in(ns: str) -> str:
            try:
                as_operator.create(pod(ns))
            except ApiError as err:
                return f"{err.status} {err.message}"
            return "created"

        verdict = wait_for(
            lambda: refused_in(other_namespace),
            lambda text: "never writes in the excluded namespaces" in text,
            what="the policy to deny the operator's pod in the excluded namespace",
        )
        assert verdict.startswith("403 ")
        assert "never writes in the excluded namespaces" in refused_in(namespace)
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "kubetrain-operator", "namespace": namespace},
            "spec": {"holderIdentity": name},
        }
        as_operator.create(lease)  # its own Lease stays allowed
    finally:
        as_operator.close()
        for obj in policy_objects:
            try:
                if obj["kind"] == "ValidatingAdmissionPolicy":
                    admission.delete_validating_admission_policy(obj["metadata"]["name"])
                else:
                    admission.delete_validating_admission_policy_binding(obj["metadata"]["name"])
            except ApiException as err:
                if err.status != 404:
                    raise


def test_a_cluster_wide_operator_leaves_excluded_namespaces_alone(
    installed_crds: list[dict[str, Any]],
    kubeconfig: Path,
    api_client: client.ApiClient,
    namespace: str,
    other_namespace: str,
) -> None:
    config = OperatorConfig(workers=2, exclude_namespaces=(other_namespace,))
    running = RunningOperator(config, kubeconfig).start()
    try:
        here, there = Jobs(api_client, namespace), Jobs(api_client, other_namespace)
        there.create(pytorch_job("left-alone", workers=1))
        here.create(pytorch_job("handled", workers=1))
        here.wait_running("handled", {"handled-master-0", "handled-worker-0"})
        here.wait_condition("PyTorchJob", "handled", "Running")
        job = there.get("PyTorchJob", "left-alone")
        assert job is not None and "status" not in job
        assert there.pods("left-alone") == {} and there.services("left-alone") == {}
    finally:
        running.stop()
