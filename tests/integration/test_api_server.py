"""What the project generates, checked by a real kube-apiserver: the CRDs are accepted
and Established, every synthesized object applies server-side in chart order, the
example jobs and upstream's are accepted without losing a field, invalid jobs are
rejected by the schema and the CEL rules with the messages ``kubetrain validate`` gives,
managedBy is immutable, and re-applying changes nothing. (Agreement of validate and the
server on fuzzed jobs is tests/integration/test_api_parity.py.)"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from kubetrain.api import JobValidationError, apply_defaults, load_job
from kubetrain.api.invariants import INVARIANTS, MANAGED_BY_IMMUTABLE, check_update
from kubetrain.api.kinds import KINDS
from kubetrain.manifest import parse_yaml, parse_yaml_all
from kubetrain.synth import load_stacks, render_stack
from tests.integration.kube import (
    api_error_message,
    apply,
    comparable,
    condition,
    diff_paths,
    exists,
    get,
    missing_paths,
    resource_for,
    wait_for_established,
    wait_until_gone,
)
from tests.k8s_schema import stored_as_server_defaults
from tests.unit.api.invariant_cases import CASES as INVARIANT_CASES
from tests.unit.api.invariant_cases import InvariantCase

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Every stack under stacks/: a new stack or chart is covered without editing this file.
STACK_NAMES = sorted(load_stacks(root=REPO_ROOT))
EXAMPLES = sorted((REPO_ROOT / "examples").glob("*.yaml"))
CRD_KIND = "CustomResourceDefinition"


def load_example(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = parse_yaml((REPO_ROOT / "examples" / name).read_text())
    return doc


def in_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = namespace
    return obj


# --- CRDs ---------------------------------------------------------------------------------


def test_crds_are_established_with_their_names(
    dyn: DynamicClient, installed_crds: list[dict[str, Any]]
) -> None:
    assert {crd["spec"]["names"]["kind"] for crd in installed_crds} == {
        "PyTorchJob",
        "TFJob",
        "MPIJob",
        "PaddleJob",
        "JAXJob",
        "XGBoostJob",
        "TrainJob",
        "TrainingRuntime",
        "ClusterTrainingRuntime",
    }
    for crd in installed_crds:
        live = get(dyn, crd)
        names_accepted = condition(live, "NamesAccepted") or {}
        assert names_accepted.get("status") == "True", live["status"]
        assert live["status"]["acceptedNames"]["kind"] == crd["spec"]["names"]["kind"]
        served = [v["name"] for v in crd["spec"]["versions"] if v["served"]]
        api_version = f"{crd['spec']['group']}/{served[0]}"
        # Discovery serves the kind: clients can now find and use it.
        resource = dyn.resources.get(api_version=api_version, kind=crd["spec"]["names"]["kind"])
        assert resource.namespaced is (crd["spec"]["scope"] == "Namespaced")


# --- every synthesized object, chart by chart -----------------------------------------------


def _namespaced_target(
    dyn: DynamicClient, core_v1: client.CoreV1Api, obj: dict[str, Any], namespace: str
) -> str | None:
    """Give a namespaced object without a namespace the test's namespace, and make sure
    an explicitly named namespace exists (as Argo CD's CreateNamespace=true would).
    Returns the name of a namespace created here, if any."""
    if not resource_for(dyn, obj).namespaced:
        return None
    wanted = obj["metadata"].get("namespace")
    if not wanted:
        obj["metadata"]["namespace"] = namespace
        return None
    if exists(dyn, "v1", "Namespace", wanted):
        return None
    core_v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=wanted)))
    return str(wanted)


def _delete_all(dyn: DynamicClient, objects: list[dict[str, Any]]) -> None:
    """Delete what a stack test applied, CRDs excepted (other tests share them), and
    wait until it is gone so that the next stack can create the same names."""
    doomed = [obj for obj in reversed(objects) if obj["kind"] != CRD_KIND]
    for obj in doomed:
        resource = resource_for(dyn, obj)
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        try:
            resource.delete(name=obj["metadata"]["name"], namespace=namespace)
        except ApiException as err:
            if err.status != 404:
                raise
    for obj in doomed:
        resource = resource_for(dyn, obj)
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        wait_until_gone(dyn, obj, namespace)


@pytest.fixture(scope="module")
def monitoring_crds(dyn: DynamicClient) -> None:
    """The Prometheus Operator's ServiceMonitor and PrometheusRule CRDs (of the pinned
    release), as its installation provides them: the GPU stacks' monitoring chart needs
    them, and the API server then checks the objects against their schemas."""
    from cluster.tools import prometheus_operator_crds

    wanted = (
        "monitoring.coreos.com_servicemonitors.yaml",
        "monitoring.coreos.com_prometheusrules.yaml",
    )
    crds = [parse_yaml(p.read_text()) for p in prometheus_operator_crds() if p.name in wanted]
    assert len(crds) == len(wanted), f"the Prometheus Operator module lacks {wanted}"
    for crd in crds:
        apply(dyn, crd)
    for crd in crds:
        wait_for_established(dyn, crd["metadata"]["name"])


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_synthesized_object_applies_in_chart_order_and_reapplies_unchanged(
    stack: str,
    dyn: DynamicClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    monitoring_crds: None,
) -> None:
    # The queues chart holds Kueue's objects, which need Kueue running (its CRDs convert
    # through Kueue's webhook): tests/integration/test_kueue_queues.py applies and
    # re-applies it on Kueue's control plane.
    charts = [chart for chart in render_stack(stack, root=REPO_ROOT) if chart.name != "queues"]
    order = [(chart.name, obj["kind"]) for chart in charts for obj in chart.objects]
    assert order, f"stack {stack} synthesizes no objects"
    first_other = next((i for i, (_, kind) in enumerate(order) if kind != CRD_KIND), len(order))
    late_crds = [entry for entry in order[first_other:] if entry[1] == CRD_KIND]
    assert late_crds == [], f"CRDs must come before every other object, these do not: {late_crds}"

    applied: list[dict[str, Any]] = []
    try:
        for chart in charts:
            for original in chart.objects:
                obj = copy.deepcopy(original)
                created = _namespaced_target(dyn, core_v1, obj, namespace)
                if created:
                    applied.append(
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": created}}
                    )
                try:
                    apply(dyn, obj)
                except ApiException as err:
                    pytest.fail(
                        f"chart {chart.name}: server-side apply of {obj['kind']}/"
                        f"{obj['metadata']['name']} was rejected: {api_error_message(err)}",
                        pytrace=False,
                    )
                applied.append(obj)
            # Custom resources of a later chart need this chart's CRDs served first.
            for obj in chart.objects:
                if obj["kind"] == CRD_KIND:
                    wait_for_established(dyn, obj["metadata"]["name"], why=f" (chart {chart.name})")

        changes: dict[str, list[str]] = {}
        for obj in applied:
            live = get(dyn, obj)
            dry = apply(dyn, obj, dry_run=True)
            diff = list(diff_paths(comparable(live), comparable(dry)))
            if diff:
                changes[f"{obj['kind']}/{obj['metadata']['name']}"] = diff
        assert changes == {}, f"re-applying (server-side dry run) would change: {changes}"
    finally:
        _delete_all(dyn, applied)


# --- example jobs ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_job_is_accepted_without_losing_a_field(
    path: Path, dyn: DynamicClient, namespace: str, installed_crds: list[dict[str, Any]]
) -> None:
    docs = [doc for doc in parse_yaml_all(path.read_text()) if doc]
    assert docs, f"{path} holds no documents"
    for doc in docs:
        job = in_namespace(doc, namespace)
        try:
            stored = apply(dyn, job)
        except ApiException as err:
            pytest.fail(f"{path.name}: rejected: {api_error_message(err)}", pytrace=False)
        lost = list(missing_paths(job["spec"], stored["spec"], "spec"))
        assert lost == [], f"{path.name}: the API server did not keep what was sent: {lost}"
        dry = apply(dyn, job, dry_run=True)
        assert list(diff_paths(stored, dry)) == [], f"{path.name}: re-apply would change it"


# --- upstream's example jobs ---------------------------------------------------------------------

#: Upstream's Kubeflow v1 jobs (Trainer v2's manifests have their own tests:
#: tests/integration/test_trainer_api_server.py).
UPSTREAM = sorted(
    path
    for path in (REPO_ROOT / "tests" / "data" / "upstream").rglob("*.yaml")
    if "trainer-v2.3.0" not in path.parts
)


@pytest.mark.parametrize("path", UPSTREAM, ids=[p.stem for p in UPSTREAM])
def test_upstream_example_is_admitted_and_stored_as_validate_reads_it(
    path: Path,
    api_client: client.ApiClient,
    dyn: DynamicClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
) -> None:
    """Upstream's manifests (the compatibility yardstick) pass the CRDs, created as
    ``kubectl create``/``kubectl apply`` do, and what the API server stores is the job
    kubetrain read with the CRD's defaults: explicit nulls such as Intel MPI's ``command:``
    pruned on both sides, nothing else lost, and the defaults those of the operator.
    (Server-side apply refuses such nulls: see the next test.)"""
    (doc,) = [d for d in parse_yaml_all(path.read_text()) if d]
    job = in_namespace(doc, namespace)
    typed = load_job(job)
    try:
        strict_create(api_client, job, namespace)
    except ApiException as err:
        pytest.fail(f"{path.name}: rejected: {api_error_message(err)}", pytrace=False)
    stored = get(dyn, job)
    # What the server stores: the job kubetrain read, with the defaults its CRD declares
    # (upstream's: an MPIJob gets launcherCreationPolicy, mpiImplementation, ...).
    wanted = stored_as_server_defaults(typed.to_wire())
    assert list(missing_paths(wanted["spec"], stored["spec"], "spec")) == []
    assert load_job(stored).to_wire()["spec"] == load_job(wanted).to_wire()["spec"]
    assert (
        apply_defaults(load_job(stored)).to_wire()["spec"]
        == apply_defaults(typed).to_wire()["spec"]
    )


def test_server_side_apply_refuses_explicit_nulls_that_create_prunes(
    dyn: DynamicClient, namespace: str, installed_crds: list[dict[str, Any]]
) -> None:
    """A fact of the API server (any CRD) that docs/api.md states: in a server-side apply
    patch, ``command:`` with no value reaches validation as null."""
    job = in_namespace(load_example("pytorchjob.yaml"), namespace)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"] = (
        None
    )
    with pytest.raises(ApiException) as raised:
        apply(dyn, job)
    assert "must be of type array" in api_error_message(raised.value)


# --- invalid jobs ---------------------------------------------------------------------------


def strict_create(api_client: client.ApiClient, job: dict[str, Any], namespace: str) -> None:
    """Create ``job`` as ``kubectl create`` does: strict field validation (unknown fields
    are errors, not warnings)."""
    group, version = job["apiVersion"].split("/")
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        group, version, namespace, PLURALS[job["kind"]], job, field_validation="Strict"
    )


PLURALS = {kind: info.plural for kind, info in KINDS.items()}


@dataclass(frozen=True)
class Rejected:
    """A job made invalid by ``mutate``, the schema error the API server must give and a
    fragment of what ``kubetrain validate`` says about the same field."""

    id: str
    example: str
    mutate: Callable[[dict[str, Any]], None]
    message: str
    field: str
    validate: str
    status: int = 422
    #: Where server-side apply fails before validation: its (HTTP status, message, field).
    ssa_error: tuple[int, str, str] | None = None


def _pt(spec: dict[str, Any]) -> dict[str, Any]:
    specs: dict[str, Any] = spec["spec"]["pytorchReplicaSpecs"]
    return specs


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation setting the dotted ``path`` (keys only) to ``value``."""

    def mutate(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = obj
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value

    return mutate


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = obj
        for key in parents:
            target = target[key]
        del target[last]

    return mutate


def _worker_container(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        _pt(obj)["Worker"]["template"]["spec"]["containers"][0].update(fields)

    return mutate


def _duplicate_worker_container(obj: dict[str, Any]) -> None:
    containers = _pt(obj)["Worker"]["template"]["spec"]["containers"]
    containers.append(copy.deepcopy(containers[0]))


W = "spec.pytorchReplicaSpecs.Worker"
REJECTED = [
    Rejected(
        "unknown-restart-policy",
        "pytorchjob.yaml",
        _set(f"{W}.restartPolicy", "Sometimes"),
        message='Unsupported value: "Sometimes"',
        field=f"{W}.restartPolicy",
        validate=f'{W}.restartPolicy: "Sometimes" is invalid',
    ),
    Rejected(
        "unknown-clean-pod-policy",
        "tfjob.yaml",
        _set("spec.runPolicy.cleanPodPolicy", "Some"),
        message='Unsupported value: "Some"',
        field="spec.runPolicy.cleanPodPolicy",
        validate='spec.runPolicy.cleanPodPolicy: "Some" is invalid',
    ),
    Rejected(
        "negative-replicas",
        "pytorchjob.yaml",
        _set(f"{W}.replicas", -1),
        message="should be greater than or equal to 0",
        field=f"{W}.replicas",
        validate=f"{W}.replicas: -1 is invalid: must be >= 0",
    ),
    Rejected(
        # Issue 15: admitted before the CRD carried int32 bounds, then failed by the operator.
        "replicas-beyond-int32",
        "pytorchjob.yaml",
        _set(f"{W}.replicas", 4294967296),
        message="should be less than or equal to 2147483647",
        field=f"{W}.replicas",
        validate=f"{W}.replicas: 4294967296 is invalid: must be <= 2147483647",
    ),
    Rejected(
        "negative-backoff-limit",
        "mpijob.yaml",
        _set("spec.runPolicy.backoffLimit", -1),
        message="should be greater than or equal to 0",
        field="spec.runPolicy.backoffLimit",
        validate="spec.runPolicy.backoffLimit: -1 is invalid: must be >= 0",
    ),
    Rejected(
        "nproc-per-node-not-a-number",
        "pytorchjob.yaml",
        _set("spec.nprocPerNode", "eight"),
        message="should match",
        field="spec.nprocPerNode",
        validate='spec.nprocPerNode: "eight" is invalid: must match',
    ),
    Rejected(
        "replica-without-template",
        "tfjob.yaml",
        lambda obj: obj["spec"]["tfReplicaSpecs"]["PS"].pop("template"),
        message="Required value",
        field="spec.tfReplicaSpecs.PS.template",
        validate="spec.tfReplicaSpecs.PS.template: is required",
    ),
    Rejected(
        "no-replica-specs",
        "mpijob.yaml",
        _delete("spec.mpiReplicaSpecs"),
        message="Required value",
        field="spec.mpiReplicaSpecs",
        validate="spec.mpiReplicaSpecs: is required",
    ),
    Rejected(
        "float-quantity",
        "pytorchjob.yaml",
        _worker_container(resources={"limits": {"cpu": 1e308}}),
        message="must be of type integer,string",
        field=f"{W}.template.spec.containers[0].resources.limits.cpu",
        validate=f"{W}.template.spec.containers[0].resources.limits.cpu: 1e+308 is invalid",
    ),
    Rejected(
        "duplicate-container-names",
        "pytorchjob.yaml",
        _duplicate_worker_container,
        message='Duplicate value: {"name":"pytorch"}',
        field="spec.pytorchReplicaSpecs[Worker].template.spec.containers[1]",
        validate=f"{W}.template.spec.containers[1]: is invalid: duplicate entry: item 0 "
        'already has name "pytorch"',
        ssa_error=(
            500,
            'duplicate entries for key [name="pytorch"]',
            f"{W}.template.spec.containers",
        ),
    ),
    Rejected(
        "duplicate-env-names",
        "pytorchjob.yaml",
        _worker_container(env=[{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]),
        message='Duplicate value: {"name":"A"}',
        field="spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].env[1]",
        validate=f"{W}.template.spec.containers[0].env[1]: is invalid: duplicate entry",
        ssa_error=(500, 'duplicate entries for key [name="A"]', f"{W}.template.spec.containers"),
    ),
    Rejected(
        "snake-case-field",
        "pytorchjob.yaml",
        _set(f"{W}.restart_policy", "Never"),
        message=f'strict decoding error: unknown field "{W}.restart_policy"',
        field=f"{W}.restart_policy",
        validate=f"{W}.restart_policy: unknown field: did you mean 'restartPolicy'?",
        status=400,
        ssa_error=(500, "field not declared in schema", f"{W}.restart_policy"),
    ),
    Rejected(
        "container-without-name",
        "pytorchjob.yaml",
        lambda obj: _pt(obj)["Worker"]["template"]["spec"]["containers"][0].pop("name"),
        message="Required value",
        field="spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].name",
        validate=f"{W}.template.spec.containers[0].name: is required",
        # containers is a list map keyed by name: server-side apply cannot merge an
        # element without its key and answers 500 before the schema is checked.
        ssa_error=(
            500,
            'omits all key fields ["name"]',
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers",
        ),
    ),
]


def _rejection(err: ApiException) -> tuple[int, str]:
    return err.status, api_error_message(err)


@pytest.mark.parametrize("method", ["create", "server-side-apply"])
@pytest.mark.parametrize("case", REJECTED, ids=[case.id for case in REJECTED])
def test_rejects_invalid_job(
    case: Rejected,
    method: str,
    dyn: DynamicClient,
    api_client: client.ApiClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
) -> None:
    job = in_namespace(load_example(case.example), namespace)
    case.mutate(job)
    status, message, field = case.status, case.message, case.field
    if method == "server-side-apply" and case.ssa_error is not None:
        status, message, field = case.ssa_error
    with pytest.raises(ApiException) as raised:
        if method == "create":
            strict_create(api_client, job, namespace)
        else:
            apply(dyn, job)
    got_status, text = _rejection(raised.value)
    assert got_status == status, f"expected HTTP {status}, got {got_status}: {text}"
    assert message in text, f"expected the message {message!r} in: {text}"
    assert field in text, f"expected the field {field!r} in: {text}"
    # kubetrain validate refuses the same job at the same field.
    with pytest.raises(JobValidationError) as refused:
        load_job(job)
    said = [str(e) for e in refused.value.errors]
    assert any(case.validate in e for e in said), f"{case.validate!r} not in {said}"


def test_every_cel_rule_has_a_rejection_case() -> None:
    covered = {case.invariant for case in INVARIANT_CASES}
    missing = sorted({i.name for i in INVARIANTS} - covered)
    assert missing == [], f"add an InvariantCase for each of these CEL rules: {missing}"


@pytest.mark.parametrize("method", ["create", "server-side-apply"])
@pytest.mark.parametrize("case", INVARIANT_CASES, ids=[case.invariant for case in INVARIANT_CASES])
def test_rejects_with_the_message_kubetrain_validate_gives(
    case: InvariantCase,
    method: str,
    dyn: DynamicClient,
    api_client: client.ApiClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
) -> None:
    """Each CEL rule fires on its case with the message of its Python check, which
    ``kubetrain validate`` reports for the same job."""
    job = in_namespace(case.job, namespace)
    with pytest.raises(JobValidationError) as refused:
        load_job(job)
    assert any(case.rule.message in str(e) for e in refused.value.errors)
    with pytest.raises(ApiException) as raised:
        if method == "create":
            strict_create(api_client, job, namespace)
        else:
            apply(dyn, job)
    status, text = _rejection(raised.value)
    assert status == 422, text
    assert case.rule.message in text, f"expected {case.rule.message!r} in: {text}"
    assert case.server_field() in text, f"expected the field {case.server_field()!r} in: {text}"


# --- jobs upstream admits that kubetrain used to refuse -----------------------------------------


def test_admits_lower_case_tf_replica_types_and_reads_them_canonical(
    api_client: client.ApiClient,
    dyn: DynamicClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
) -> None:
    job = in_namespace(load_example("tfjob.yaml"), namespace)
    specs = job["spec"]["tfReplicaSpecs"]
    job["spec"]["tfReplicaSpecs"] = {"ps": specs["PS"], "worker": specs["Worker"]}
    strict_create(api_client, job, namespace)
    stored = get(dyn, job, namespace=namespace)
    assert sorted(stored["spec"]["tfReplicaSpecs"]) == ["ps", "worker"]
    assert load_job(stored).summary() == {"PS": 1, "Worker": 2}


def test_admits_a_launcher_only_mpijob_running_ranks_in_the_launcher(
    api_client: client.ApiClient, namespace: str, installed_crds: list[dict[str, Any]]
) -> None:
    job = in_namespace(load_example("mpijob.yaml"), namespace)
    del job["spec"]["mpiReplicaSpecs"]["Worker"]
    job["spec"]["runLauncherAsWorker"] = True
    assert load_job(job).summary() == {"Launcher": 1}
    strict_create(api_client, job, namespace)


def test_admits_a_job_at_the_replica_limits(
    api_client: client.ApiClient, namespace: str, installed_crds: list[dict[str, Any]]
) -> None:
    job = in_namespace(load_example("tfjob.yaml"), namespace)
    job["metadata"]["name"] = "at-limit"
    specs = job["spec"]["tfReplicaSpecs"]
    specs["PS"]["replicas"] = 999
    specs["Worker"]["replicas"] = 1000
    specs["Evaluator"] = copy.deepcopy(specs["PS"]) | {"replicas": 1}
    assert sum(load_job(job).summary().values()) == 2000
    strict_create(api_client, job, namespace)


# --- runPolicy.managedBy is immutable -------------------------------------------------------


def _replace(dyn: DynamicClient, job: dict[str, Any]) -> dict[str, Any]:
    live = get(dyn, job)
    updated = copy.deepcopy(job)
    updated["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
    result: dict[str, Any] = resource_for(dyn, job).replace(body=updated).to_dict()
    return result


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("kueue.x-k8s.io/multikueue", "kubeflow.org/training-operator"),
        ("kueue.x-k8s.io/multikueue", None),
        (None, "kueue.x-k8s.io/multikueue"),
    ],
    ids=["changed", "removed", "added"],
)
def test_managed_by_cannot_change_once_the_job_exists(
    before: str | None,
    after: str | None,
    api_client: client.ApiClient,
    dyn: DynamicClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
) -> None:
    job = in_namespace(load_example("pytorchjob.yaml"), namespace)
    policy = job["spec"]["runPolicy"]
    if before:
        policy["managedBy"] = before
    strict_create(api_client, job, namespace)
    # Other changes are admitted.
    policy["backoffLimit"] = 5
    assert _replace(dyn, job)["spec"]["runPolicy"]["backoffLimit"] == 5
    if after:
        policy["managedBy"] = after
    else:
        del policy["managedBy"]
    with pytest.raises(ApiException) as raised:
        _replace(dyn, job)
    status, text = _rejection(raised.value)
    assert status == 422 and MANAGED_BY_IMMUTABLE in text, text
    assert "spec.runPolicy.managedBy" in text
    # The Python side of the rule says the same.
    (error,) = check_update("PyTorchJob", get(dyn, job), job)
    assert error.expected == MANAGED_BY_IMMUTABLE


# --- stored defaults --------------------------------------------------------------------------


def test_an_mpijob_is_stored_with_upstreams_defaults(
    api_client: client.ApiClient,
    dyn: DynamicClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
) -> None:
    """What upstream's CRD makes the server store for an MPIJob that states none of it
    (``kubectl get -o yaml`` and Argo CD show it), plus the run policy's and replicas'
    defaults; the operator's defaulting step gives the same job from either form."""
    (doc,) = [
        d
        for d in parse_yaml_all(
            (REPO_ROOT / "tests/data/upstream/mpi-operator-v0.8.0/pi/pi.yaml").read_text()
        )
        if d
    ]
    job = in_namespace(doc, namespace)
    for key in ("slotsPerWorker", "runLauncherAsWorker", "sshAuthMountPath"):
        job["spec"].pop(key, None)
    job["spec"]["runPolicy"] = {}
    for rspec in job["spec"]["mpiReplicaSpecs"].values():
        rspec.pop("replicas", None)
    strict_create(api_client, job, namespace)
    spec = get(dyn, job)["spec"]
    assert {k: spec.get(k) for k in UPSTREAM_MPI_DEFAULTS} == UPSTREAM_MPI_DEFAULTS
    assert spec["runPolicy"] == {"suspend": False}
    assert {t: r.get("replicas") for t, r in spec["mpiReplicaSpecs"].items()} == {
        "Launcher": 1,
        "Worker": 1,
    }
    stored_spec = apply_defaults(load_job(get(dyn, job))).to_wire()["spec"]
    assert stored_spec == apply_defaults(load_job(job)).to_wire()["spec"]


UPSTREAM_MPI_DEFAULTS = {
    "launcherCreationPolicy": "AtStartup",
    "mpiImplementation": "OpenMPI",
    "runLauncherAsWorker": False,
    "slotsPerWorker": 1,
    "sshAuthMountPath": "/root/.ssh",
}


def test_pytorch_and_tf_jobs_are_stored_with_their_restart_policy_and_replicas(
    dyn: DynamicClient, namespace: str, installed_crds: list[dict[str, Any]]
) -> None:
    for name, policy in (("pytorchjob.yaml", "OnFailure"), ("tfjob.yaml", "Never")):
        job = in_namespace(load_example(name), namespace)
        specs = next(v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs"))
        for rspec in specs.values():
            rspec.pop("restartPolicy", None)
            rspec.pop("replicas", None)
        stored = next(v for k, v in apply(dyn, job)["spec"].items() if k.endswith("ReplicaSpecs"))
        assert {t: (r["restartPolicy"], r["replicas"]) for t, r in stored.items()} == {
            t: (policy, 1) for t in specs
        }
