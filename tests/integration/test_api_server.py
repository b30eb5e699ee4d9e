"""What the project generates, checked by a real kube-apiserver: the CRDs are accepted
and Established, every synthesized object applies server-side in chart order, the
example jobs are accepted without losing a field, invalid jobs are rejected by the
schema and the CEL rules with the expected messages, and re-applying changes nothing."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from kubetrain.api.invariants import INVARIANTS, Invariant
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

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Every stack under stacks/: a new stack or chart is covered without editing this file.
STACK_NAMES = sorted(load_stacks(root=REPO_ROOT))
EXAMPLES = sorted((REPO_ROOT / "examples").glob("*.yaml"))
CRD_KIND = "CustomResourceDefinition"


def load_example(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((REPO_ROOT / "examples" / name).read_text())
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
        assert resource.namespaced is True


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


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_synthesized_object_applies_in_chart_order_and_reapplies_unchanged(
    stack: str, dyn: DynamicClient, core_v1: client.CoreV1Api, namespace: str
) -> None:
    charts = render_stack(stack, root=REPO_ROOT)
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
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
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


# --- invalid jobs ---------------------------------------------------------------------------

INVARIANTS_BY_NAME = {invariant.name: invariant for invariant in INVARIANTS}


@dataclass(frozen=True)
class Rejected:
    """A job made invalid by ``mutate`` and the message the API server must give.

    ``invariant`` names the CEL rule expected to fire (its message and field path are
    then expected); otherwise ``message`` and ``field`` are the schema error expected.
    """

    id: str
    example: str
    mutate: Callable[[dict[str, Any]], None]
    invariant: str | None = None
    message: str = ""
    field: str = ""
    #: Where server-side apply fails before validation: its (HTTP status, message, field).
    ssa_error: tuple[int, str, str] | None = None

    def expected(self) -> tuple[str, str]:
        if self.invariant is not None:
            rule: Invariant = INVARIANTS_BY_NAME[self.invariant]
            return rule.message, rule.field_path.lstrip(".")
        return self.message, self.field


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


def _all(*mutations: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        for mutation in mutations:
            mutation(obj)

    return mutate


def _tf_chief_and_master(obj: dict[str, Any]) -> None:
    specs = obj["spec"]["tfReplicaSpecs"]
    first = next(iter(specs.values()))
    specs["Chief"] = copy.deepcopy(first) | {"replicas": 1}
    specs["Master"] = copy.deepcopy(first) | {"replicas": 1}


LONG = "a" * 58
REJECTED = [
    # CEL rules (kubetrain.api.invariants): every rule has a case, see the test below.
    Rejected(
        "pytorch-two-masters",
        "pytorchjob.yaml",
        _set("spec.pytorchReplicaSpecs.Master.replicas", 2),
        invariant="pytorch-master-at-most-one",
    ),
    Rejected(
        "pytorch-elastic-without-worker",
        "pytorchjob-elastic.yaml",
        lambda obj: _pt(obj).update(Master=_pt(obj).pop("Worker")),
        invariant="pytorch-elastic-needs-worker",
    ),
    Rejected(
        "pytorch-elastic-min-above-max",
        "pytorchjob-elastic.yaml",
        _all(_set("spec.elasticPolicy.minReplicas", 4), _set("spec.elasticPolicy.maxReplicas", 2)),
        invariant="pytorch-elastic-bounds",
    ),
    Rejected(
        "pytorch-nproc-twice",
        "pytorchjob-elastic.yaml",
        _all(_set("spec.elasticPolicy.nProcPerNode", 8), _set("spec.nprocPerNode", "8")),
        invariant="pytorch-nproc-once",
    ),
    Rejected(
        "pytorch-name-too-long",
        "pytorchjob.yaml",
        _set("metadata.name", LONG),
        invariant="pytorch-name-fits",
    ),
    Rejected("tf-chief-and-master", "tfjob.yaml", _tf_chief_and_master, invariant="tf-one-chief"),
    Rejected(
        "tf-name-too-long", "tfjob.yaml", _set("metadata.name", LONG), invariant="tf-name-fits"
    ),
    Rejected(
        "mpi-two-launchers",
        "mpijob.yaml",
        _set("spec.mpiReplicaSpecs.Launcher.replicas", 2),
        invariant="mpi-one-launcher",
    ),
    Rejected(
        "mpi-without-worker",
        "mpijob.yaml",
        _delete("spec.mpiReplicaSpecs.Worker"),
        invariant="mpi-needs-worker",
    ),
    Rejected(
        "mpi-name-too-long", "mpijob.yaml", _set("metadata.name", LONG), invariant="mpi-name-fits"
    ),
    # The structural schema.
    Rejected(
        "unknown-restart-policy",
        "pytorchjob.yaml",
        _set("spec.pytorchReplicaSpecs.Worker.restartPolicy", "Sometimes"),
        message='Unsupported value: "Sometimes"',
        field="spec.pytorchReplicaSpecs.Worker.restartPolicy",
    ),
    Rejected(
        "unknown-clean-pod-policy",
        "tfjob.yaml",
        _set("spec.runPolicy.cleanPodPolicy", "Some"),
        message='Unsupported value: "Some"',
        field="spec.runPolicy.cleanPodPolicy",
    ),
    Rejected(
        "negative-replicas",
        "pytorchjob.yaml",
        _set("spec.pytorchReplicaSpecs.Worker.replicas", -1),
        message="should be greater than or equal to 0",
        field="spec.pytorchReplicaSpecs.Worker.replicas",
    ),
    Rejected(
        "negative-backoff-limit",
        "mpijob.yaml",
        _set("spec.runPolicy.backoffLimit", -1),
        message="should be greater than or equal to 0",
        field="spec.runPolicy.backoffLimit",
    ),
    Rejected(
        "unknown-replica-type",
        "pytorchjob.yaml",
        lambda obj: _pt(obj).update(Chief=_pt(obj).pop("Worker")),
        message="replica type must be one of: Master, Worker",
        field="spec.pytorchReplicaSpecs",
    ),
    Rejected(
        "nproc-per-node-not-a-number",
        "pytorchjob.yaml",
        _set("spec.nprocPerNode", "eight"),
        message="should match",
        field="spec.nprocPerNode",
    ),
    Rejected(
        "replica-without-template",
        "tfjob.yaml",
        lambda obj: obj["spec"]["tfReplicaSpecs"]["PS"].pop("template"),
        message="Required value",
        field="spec.tfReplicaSpecs.PS.template",
    ),
    Rejected(
        "no-replica-specs",
        "mpijob.yaml",
        _delete("spec.mpiReplicaSpecs"),
        message="Required value",
        field="spec.mpiReplicaSpecs",
    ),
    Rejected(
        "container-without-name",
        "pytorchjob.yaml",
        lambda obj: _pt(obj)["Worker"]["template"]["spec"]["containers"][0].pop("name"),
        message="Required value",
        field="spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].name",
        # containers is a list map keyed by name: server-side apply cannot merge an
        # element without its key and answers 500 before the schema is checked.
        ssa_error=(
            500,
            'omits all key fields ["name"]',
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers",
        ),
    ),
]


def test_every_cel_rule_has_a_rejection_case() -> None:
    covered = {case.invariant for case in REJECTED if case.invariant}
    missing = sorted(set(INVARIANTS_BY_NAME) - covered)
    assert missing == [], f"add a Rejected case to REJECTED for each of these CEL rules: {missing}"


@pytest.mark.parametrize("method", ["create", "server-side-apply"])
@pytest.mark.parametrize("case", REJECTED, ids=[case.id for case in REJECTED])
def test_rejects_invalid_job(
    case: Rejected,
    method: str,
    dyn: DynamicClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
) -> None:
    job = in_namespace(load_example(case.example), namespace)
    case.mutate(job)
    status, message, field = 422, *case.expected()
    if method == "server-side-apply" and case.ssa_error is not None:
        status, message, field = case.ssa_error
    with pytest.raises(ApiException) as raised:
        if method == "create":
            resource_for(dyn, job).create(body=job, namespace=namespace)
        else:
            apply(dyn, job)
    err = raised.value
    text = api_error_message(err)
    assert err.status == status, f"expected HTTP {status}, got {err.status}: {text}"
    assert message in text, f"expected the message {message!r} in: {text}"
    assert field in text, f"expected the field {field!r} in: {text}"
