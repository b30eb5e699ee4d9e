"""Trainer v2's CRDs on a real kube-apiserver: Established with upstream's names and scopes;
upstream v2.3.0's runtimes and examples, and the TrainJobs the real Kubeflow SDK posts,
admitted unchanged with no field pruned; every CEL rule refusing its case with the message
``kubetrain validate`` gives, at the same field; the update rules; quantities as the SDK
sends them; and ``kubetrain validate`` agreeing with the server on fuzzed objects."""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from kubetrain.api import JobValidationError
from kubetrain.api.trainer import check_trainer_update, load_trainer_object
from tests.builders.trainer import (
    runtime,
    sdk_bodies,
    trainer_examples,
    trainjob,
    upstream_documents,
)
from tests.integration.kube import api_error_message, apply, missing_paths
from tests.k8s_schema import stored_as_server_defaults
from tests.unit.api.mutations import OPERATIONS, mutate, node_paths
from tests.unit.api.trainer_rule_cases import (
    ADMITTED_UPDATES,
    CASES,
    RULES_BY_NAME,
    UPDATES,
    RuleCase,
    UpdateCase,
)

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
PLURALS = {
    "TrainJob": "trainjobs",
    "TrainingRuntime": "trainingruntimes",
    "ClusterTrainingRuntime": "clustertrainingruntimes",
}
UPSTREAM = upstream_documents()
SDK = sdk_bodies()


def create(
    api_client: client.ApiClient,
    obj: dict[str, Any],
    namespace: str,
    *,
    dry_run: bool = False,
    strict: bool = True,
) -> dict[str, Any]:
    """Create ``obj`` as ``kubectl create`` does (strict field validation) or, with
    ``strict=False``, as the Kubeflow SDK does (the server's default); return what the
    server stores (or would store, with ``dry_run``)."""
    api = client.CustomObjectsApi(api_client)
    kwargs: dict[str, Any] = {}
    if dry_run:
        kwargs["dry_run"] = "All"
    if strict:
        kwargs["field_validation"] = "Strict"
    plural = PLURALS[obj["kind"]]
    if obj["kind"] == "ClusterTrainingRuntime":
        result = api.create_cluster_custom_object(GROUP, VERSION, plural, obj, **kwargs)
    else:
        result = api.create_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, obj, **kwargs
        )
    return cast(dict[str, Any], result)


def in_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    if obj["kind"] != "ClusterTrainingRuntime":
        obj["metadata"]["namespace"] = namespace
    return obj


# --- the CRDs ------------------------------------------------------------------------------------


def test_trainer_kinds_are_served_with_upstreams_names(
    dyn: DynamicClient, installed_crds: list[dict[str, Any]]
) -> None:
    served = {
        kind: dyn.resources.get(api_version=f"{GROUP}/{VERSION}", kind=kind) for kind in PLURALS
    }
    assert {kind: (r.name, r.namespaced) for kind, r in served.items()} == {
        "TrainJob": ("trainjobs", True),
        "TrainingRuntime": ("trainingruntimes", True),
        "ClusterTrainingRuntime": ("clustertrainingruntimes", False),
    }


# --- what users send------------------------------------------------------------------------


def with_server_defaults(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the API server stores it: the defaults the CRDs declare (upstream v2.3.0's:
    a TrainJob's ``runtimeRef.apiGroup``, ``kind``, ``managedBy``, ``suspend``; a runtime's
    MPI and gang settings, ...) filled in where absent; everything else unchanged."""
    return stored_as_server_defaults(obj)


@pytest.mark.parametrize(("name", "doc"), UPSTREAM, ids=[name for name, _ in UPSTREAM])
def test_upstream_manifest_is_admitted_unchanged(
    name: str,
    doc: dict[str, Any],
    api_client: client.ApiClient,
    dyn: DynamicClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
) -> None:
    """Upstream v2.3.0's runtimes and examples, as ``kubectl create`` and ``kubectl apply
    --server-side`` send them; the server keeps every field, and stores what kubetrain read.
    (Cluster-scoped runtimes are created as a dry run: other tests share their names.)"""
    obj = in_namespace(doc, namespace)
    typed = load_trainer_object(with_server_defaults(obj))
    cluster_scoped = obj["kind"] == "ClusterTrainingRuntime"
    try:
        stored = create(api_client, obj, namespace, dry_run=cluster_scoped)
        apply(dyn, obj, dry_run=True)
    except ApiException as err:
        pytest.fail(f"{name}: rejected: {api_error_message(err)}", pytrace=False)
    assert list(missing_paths(obj["spec"], stored["spec"], "spec")) == []
    assert load_trainer_object(stored).spec == typed.spec


@pytest.mark.parametrize("call", SDK, ids=list(SDK))
def test_the_kubeflow_sdks_trainjob_is_admitted_unchanged(
    call: str, api_client: client.ApiClient, namespace: str, installed_crds: list[dict[str, Any]]
) -> None:
    """The body the SDK posted (floats for quantities, no apiGroup, whole functions in
    the command), posted the way the SDK posts it."""
    body = SDK[call]
    stored = create(api_client, body, namespace, strict=False)
    assert list(missing_paths(body["spec"], stored["spec"], "spec")) == []
    assert (
        load_trainer_object(stored).to_wire()["spec"]
        == load_trainer_object(with_server_defaults(body)).to_wire()["spec"]
    )


@pytest.mark.parametrize("value", [2, 2.0, "2", "1500m"])
def test_admits_quantities_as_the_sdk_sends_them(
    value: Any, api_client: client.ApiClient, namespace: str, installed_crds: list[dict[str, Any]]
) -> None:
    job = trainjob(
        trainer={"resourcesPerNode": {"limits": {"cpu": value}, "requests": {"cpu": value}}}
    )
    stored = create(api_client, job, namespace, dry_run=True)
    assert stored["spec"]["trainer"]["resourcesPerNode"]["limits"]["cpu"] == value
    load_trainer_object(job)


@pytest.mark.parametrize("value", [0.5, 1e20])
def test_refuses_fractional_quantities_like_validate(
    value: float, api_client: client.ApiClient, namespace: str, installed_crds: list[dict[str, Any]]
) -> None:
    """``resourcesPerNode`` is a core ResourceRequirements: a quantity is an integer or a
    string, and the server takes a JSON float only when it is a whole number (write
    ``"500m"``, which the SDK sends for ``resources_per_node={"cpu": "500m"}``)."""
    job = trainjob(trainer={"resourcesPerNode": {"limits": {"cpu": value}}})
    with pytest.raises(ApiException) as raised:
        create(api_client, job, namespace, dry_run=True)
    text = api_error_message(raised.value)
    assert "spec.trainer.resourcesPerNode.limits.cpu" in text and "integer,string" in text
    with pytest.raises(JobValidationError) as refused:
        load_trainer_object(job)
    assert [str(e) for e in refused.value.errors] == [
        f"spec.trainer.resourcesPerNode.limits.cpu: {json.dumps(value)} is invalid: "
        "must be an integer or a string"
    ]


# --- each CEL rule, on the server, with validate's message ---------------------------------------


def test_every_cel_rule_has_a_rejection_case() -> None:
    assert sorted(set(RULES_BY_NAME) - {case.rule_name for case in CASES}) == []


@pytest.mark.parametrize("method", ["create", "server-side-apply"])
@pytest.mark.parametrize("case", CASES, ids=[case.rule_name for case in CASES])
def test_rejects_with_the_message_kubetrain_validate_gives(
    case: RuleCase,
    method: str,
    api_client: client.ApiClient,
    dyn: DynamicClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
) -> None:
    obj = in_namespace(case.obj, namespace)
    with pytest.raises(JobValidationError) as refused:
        load_trainer_object(obj)
    assert any(case.rule.message in str(e) for e in refused.value.errors)
    with pytest.raises(ApiException) as raised:
        if method == "create":
            create(api_client, obj, namespace, dry_run=True)
        else:
            apply(dyn, obj, dry_run=True)
    text = api_error_message(raised.value)
    assert raised.value.status == 422, text
    assert case.rule.message in text, f"expected {case.rule.message!r} in: {text}"
    assert f"{case.server_field}: Invalid value" in text, f"expected {case.server_field!r}: {text}"
    # The rule refuses this object alone: the server names no other problem.
    assert text.count("Invalid value") == 1, text


# --- updates--------------------------------------------------------------------------------


def _replace(api_client: client.ApiClient, namespace: str, new: dict[str, Any]) -> dict[str, Any]:
    api = client.CustomObjectsApi(api_client)
    name = new["metadata"]["name"]
    live = cast(
        dict[str, Any],
        api.get_namespaced_custom_object(GROUP, VERSION, namespace, "trainjobs", name),
    )
    body = copy.deepcopy(new)
    body["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
    result = api.replace_namespaced_custom_object(
        GROUP, VERSION, namespace, "trainjobs", name, body, field_validation="Strict"
    )
    return cast(dict[str, Any], result)


def create_with_status(api_client: client.ApiClient, obj: dict[str, Any], namespace: str) -> None:
    """Create the TrainJob ``obj``, then write its status, if it has one, as the operator
    does (the status subresource: a create ignores it)."""
    stored = create(api_client, obj, namespace)
    if "status" in obj:
        body = {**stored, "status": obj["status"]}
        client.CustomObjectsApi(api_client).replace_namespaced_custom_object_status(
            GROUP, VERSION, namespace, "trainjobs", obj["metadata"]["name"], body
        )


@pytest.mark.parametrize("case", UPDATES, ids=[case.id for case in UPDATES])
def test_refuses_update_with_validates_message(
    case: UpdateCase,
    api_client: client.ApiClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
) -> None:
    create_with_status(api_client, case.old, namespace)
    with pytest.raises(ApiException) as raised:
        _replace(api_client, namespace, case.new)
    text = api_error_message(raised.value)
    assert raised.value.status == 422, text
    assert case.rule.message in text, text
    assert case.rule.field_path.lstrip(".") in text, text
    (error,) = check_trainer_update("TrainJob", case.old, case.new)
    assert error.expected == case.rule.message


@pytest.mark.parametrize(
    ("old", "new"),
    [(o, n) for _, o, n in ADMITTED_UPDATES],
    ids=[i for i, _, _ in ADMITTED_UPDATES],
)
def test_admits_update(
    old: dict[str, Any],
    new: dict[str, Any],
    api_client: client.ApiClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
) -> None:
    create_with_status(api_client, old, namespace)
    stored = _replace(api_client, namespace, new)
    assert list(missing_paths(new["spec"], stored["spec"], "spec")) == []
    assert check_trainer_update("TrainJob", old, new) == []


# --- validate and the server agree on fuzzed objects----------------------------------------

SEEDS = [doc for _, doc in UPSTREAM] + list(SDK.values()) + [doc for _, doc in trainer_examples()]
#: (mutations per object, how many objects), as for the v1 kinds' parity test.
SAMPLE = ((1, 250), (3, 150))


@st.composite
def _mutated(draw: st.DrawFn, *, max_mutations: int) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = node_paths(doc)
        path = draw(st.sampled_from(paths))
        mutate(draw, doc, path, draw(st.sampled_from(OPERATIONS)), for_server=True)
    return doc


def fuzzed_objects() -> list[dict[str, Any]]:
    """The same sample on every run (hypothesis, derandomized)."""
    objects: list[dict[str, Any]] = []
    for mutations, count in SAMPLE:

        @settings(
            max_examples=count,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(_mutated(max_mutations=mutations))
        def collect(obj: dict[str, Any]) -> None:
            objects.append(obj)

        collect()
    for obj in objects:
        if isinstance(obj.get("metadata"), dict):
            obj["metadata"].pop("namespace", None)
    return objects


def _server_says(
    api_client: client.ApiClient, obj: dict[str, Any], namespace: str
) -> tuple[bool, str]:
    kind = obj.get("kind")
    if (
        obj.get("apiVersion") != f"{GROUP}/{VERSION}"
        or not isinstance(kind, str)
        or kind not in PLURALS
    ):
        return False, f"no resource serves {obj.get('apiVersion')!r} {obj.get('kind')!r}"
    try:
        create(api_client, obj, namespace, dry_run=True)
    except ApiException as error:
        return False, api_error_message(error)
    return True, ""


def _validate_says(obj: dict[str, Any]) -> tuple[bool, str]:
    try:
        load_trainer_object(obj)
    except JobValidationError as error:
        return False, str(error)
    return True, ""


def test_validate_and_the_api_server_agree_on_fuzzed_trainer_objects(
    api_client: client.ApiClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    objects = fuzzed_objects()
    matrix: Counter[tuple[str, str]] = Counter()
    disagreements = []
    for obj in objects:
        ours, our_reason = _validate_says(obj)
        theirs, their_reason = _server_says(api_client, obj, namespace)
        verdict = ("accepted" if ours else "rejected", "accepted" if theirs else "rejected")
        matrix[verdict] += 1
        if ours != theirs:
            disagreements.append(
                f"validate {verdict[0]}, API server {verdict[1]}:\n"
                f"  input: {json.dumps(obj)[:3000]}\n"
                f"  validate: {our_reason[:1500]}\n  API server: {their_reason[:1500]}"
            )
    with capsys.disabled():
        print(
            f"\nparity of kubetrain validate and the API server on {len(objects)} fuzzed "
            "Trainer objects:"
        )
        print("  validate \\ API server   accepted   rejected")
        for side in ("accepted", "rejected"):
            row = [matrix[(side, other)] for other in ("accepted", "rejected")]
            print(f"  {side:22s} {row[0]:9d} {row[1]:10d}")
        for text in disagreements:
            print(text)
    assert len(objects) == sum(count for _, count in SAMPLE)
    assert matrix[("accepted", "accepted")] >= 20, "the sample must hold valid objects too"
    assert disagreements == [], f"{len(disagreements)} disagreement(s), printed above"


# --- stored defaults --------------------------------------------------------------------------


def test_a_trainjob_and_a_runtime_are_stored_with_upstreams_defaults(
    api_client: client.ApiClient, namespace: str, installed_crds: list[dict[str, Any]]
) -> None:
    """What upstream v2.3.0's CRDs make the server store, for objects that state none of it
    (``kubectl get -o yaml``, Argo CD and Kueue read the stored object)."""
    job = create(api_client, in_namespace(trainjob("bare"), namespace), namespace)["spec"]
    assert {k: job.get(k) for k in ("suspend", "managedBy")} == {
        "suspend": False,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    }
    assert job["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    mpi_runtime = runtime(
        "TrainingRuntime",
        "bare-mpi",
        podGroupPolicy={"coscheduling": {}},
    )
    mpi_runtime["spec"]["mlPolicy"] = {"numNodes": 2, "mpi": {}}
    mpi_runtime["spec"]["template"]["spec"]["failurePolicy"] = {"maxRestarts": 1}
    mpi_runtime["metadata"]["labels"]["trainer.kubeflow.org/framework"] = "mpi"
    spec = create(api_client, in_namespace(mpi_runtime, namespace), namespace)["spec"]
    assert spec["mlPolicy"]["mpi"] == {
        "mpiImplementation": "OpenMPI",
        "numProcPerNode": 1,
        "runLauncherAsNode": False,
        "sshAuthMountPath": "/root/.ssh",
    }
    assert spec["podGroupPolicy"]["coscheduling"] == {"scheduleTimeoutSeconds": 60}
    jobset = spec["template"]["spec"]
    assert jobset["failurePolicy"] == {"maxRestarts": 1, "restartStrategy": "Recreate"}
    assert [(r["replicas"], r["groupName"]) for r in jobset["replicatedJobs"]] == [(1, "default")]
