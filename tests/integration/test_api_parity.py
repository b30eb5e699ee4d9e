"""``kubetrain validate`` and the API server agree (issue 15 item 2).

A seeded sample of fuzzed jobs (mutations of kubetrain's examples and upstream's, see
tests/unit/api/mutations.py) goes through both ``load_job`` (what ``kubetrain validate``
runs) and a server-side dry-run create on the local control plane with strict field
validation (what ``kubectl create``/``apply`` sends). Each must accept exactly what the
other accepts. The matrix is printed; any disagreement fails the test with its input and
both answers.

Out of the sample on purpose (documented differences, docs/api.md "CRDs"): whole-number floats
such as ``2.0`` sent as JSON to a typed integer field (the server admits them where no CEL
rule reads the field, kubetrain refuses them; from YAML, kubectl sends ``2`` and both
accept), NaN, infinities and lone surrogates (JSON cannot carry them), and
``metadata.namespace`` (the request's namespace decides).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubetrain.api import JobValidationError, load_job
from kubetrain.api.kinds import KINDS
from kubetrain.manifest import parse_yaml
from tests.conftest import EXAMPLES
from tests.integration.kube import api_error_message
from tests.unit.api.mutations import mutated_jobs

#: (mutations per job, how many jobs): a few hundred, most with one mutation so that a fair
#: share stays valid and both sides' acceptance is compared, not only their rejections.
SAMPLE = ((1, 250), (3, 150))
SERVED = {(info.api_version, kind): info.plural for kind, info in KINDS.items()}


def fuzzed_jobs() -> list[dict[str, Any]]:
    """The same sample on every run (hypothesis, derandomized)."""
    jobs: list[dict[str, Any]] = []
    for mutations, count in SAMPLE:

        @settings(
            max_examples=count,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(mutated_jobs(for_server=True, max_mutations=mutations))
        def collect(job: dict[str, Any]) -> None:
            jobs.append(job)

        collect()
    for job in jobs:
        if isinstance(job.get("metadata"), dict):
            job["metadata"].pop("namespace", None)
    return jobs


def validate_says(job: dict[str, Any]) -> tuple[bool, str]:
    try:
        load_job(job)
    except JobValidationError as error:
        return False, str(error)
    return True, ""


def server_says(
    api: client.CustomObjectsApi, job: dict[str, Any], namespace: str
) -> tuple[bool, str]:
    key = (job.get("apiVersion"), job.get("kind"))
    plural = next((p for served, p in SERVED.items() if served == key), None)
    if plural is None:
        # kubectl cannot even find a resource for it.
        return False, f"no resource serves apiVersion {key[0]!r} kind {key[1]!r}"
    group, version = str(key[0]).split("/")
    try:
        api.create_namespaced_custom_object(
            group, version, namespace, plural, job, dry_run="All", field_validation="Strict"
        )
    except ApiException as error:
        return False, api_error_message(error)
    return True, ""


def test_validate_and_the_api_server_agree_on_fuzzed_jobs(
    api_client: client.ApiClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    api = client.CustomObjectsApi(api_client)
    jobs = fuzzed_jobs()
    matrix: Counter[tuple[str, str]] = Counter()
    disagreements = []
    for job in jobs:
        ours, our_reason = validate_says(job)
        theirs, their_reason = server_says(api, job, namespace)
        verdict = ("accepted" if ours else "rejected", "accepted" if theirs else "rejected")
        matrix[verdict] += 1
        if ours != theirs:
            disagreements.append(
                f"validate {verdict[0]}, API server {verdict[1]}:\n"
                f"  input: {json.dumps(job)[:3000]}\n"
                f"  validate: {our_reason[:1500]}\n  API server: {their_reason[:1500]}"
            )
    with capsys.disabled():
        print(f"\nparity of kubetrain validate and the API server on {len(jobs)} fuzzed jobs:")
        print("  validate \\ API server   accepted   rejected")
        for side in ("accepted", "rejected"):
            row = [matrix[(side, other)] for other in ("accepted", "rejected")]
            print(f"  {side:22s} {row[0]:9d} {row[1]:10d}")
        for text in disagreements:
            print(text)
    assert len(jobs) == sum(count for _, count in SAMPLE)
    assert matrix[("accepted", "accepted")] >= 20, "the sample must hold valid jobs too"
    assert disagreements == [], f"{len(disagreements)} disagreement(s), printed above"


# --- a submitted status: the server ignores it, and so does validate -------------------------

#: Statuses a client may send with a new job; none of them is kubetrain's to read.
ODD_STATUSES: dict[str, Any] = {
    "a number": -1,
    "text": "Running",
    "an unknown condition": {"conditions": [{"type": "Bogus", "status": "Maybe"}]},
    "a mistyped count": {"startTime": 7, "conditions": [{"type": "Running", "status": 1}]},
}
#: A status with a field the kind's status does not have: strict field validation refuses
#: it, before the server would drop the status.
UNKNOWN_STATUS_FIELD = {"conditions": [], "percentDone": "50%"}


@pytest.mark.parametrize("kind", ["PyTorchJob", "TFJob", "MPIJob", "TrainJob"])
@pytest.mark.parametrize("status", list(ODD_STATUSES), ids=str)
def test_validate_ignores_a_submitted_status_as_the_server_does(
    api_client: client.ApiClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
    kind: str,
    status: str,
) -> None:
    from kubetrain.api.trainer import load_object

    job = copy.deepcopy(EXAMPLE_BY_KIND[kind])
    job["status"] = copy.deepcopy(ODD_STATUSES[status])
    group, version = job["apiVersion"].split("/")
    plural = f"{kind.lower()}s"
    stored = cast(
        dict[str, Any],
        client.CustomObjectsApi(api_client).create_namespaced_custom_object(
            group, version, namespace, plural, job, field_validation="Strict"
        ),
    )
    assert not stored.get("status"), stored["status"]
    loaded = load_object(job)
    assert getattr(loaded, "status", None) is None
    # A readable status stays (the operator reads a stored job's status through the loader).
    kept = load_object({**job, "status": {"startTime": "2026-01-01T00:00:00Z"}})
    assert getattr(kept, "status", None) is not None
    assert getattr(kept, "status").start_time == "2026-01-01T00:00:00Z"  # noqa: B009


def _example(kind: str) -> dict[str, Any]:
    if kind == "TrainJob":
        return {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "with-status"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        }
    path = EXAMPLES / {"PyTorchJob": "pytorchjob", "TFJob": "tfjob", "MPIJob": "mpijob"}[kind]
    loaded: dict[str, Any] = parse_yaml(path.with_suffix(".yaml").read_text())
    loaded["metadata"] = {"name": "with-status"}
    return loaded


EXAMPLE_BY_KIND = {kind: _example(kind) for kind in ("PyTorchJob", "TFJob", "MPIJob", "TrainJob")}


@pytest.mark.parametrize("kind", ["PyTorchJob", "TrainJob"])
def test_validate_refuses_an_unknown_field_in_a_submitted_status_as_the_server_does(
    api_client: client.ApiClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
    kind: str,
) -> None:
    from kubetrain.api.trainer import load_object

    job = {**copy.deepcopy(EXAMPLE_BY_KIND[kind]), "status": UNKNOWN_STATUS_FIELD}
    with pytest.raises(JobValidationError) as caught:
        load_object(job)
    group, version = job["apiVersion"].split("/")
    with pytest.raises(ApiException) as refused:
        client.CustomObjectsApi(api_client).create_namespaced_custom_object(
            group, version, namespace, f"{kind.lower()}s", job, field_validation="Strict"
        )
    assert 'unknown field "status.percentDone"' in api_error_message(refused.value)
    assert "status.percentDone: unknown field" in str(caught.value)
