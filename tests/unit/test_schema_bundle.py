"""The committed schema bundle (``tests/schema_bundle.py``) that the unit tier validates
manifests against: complete for what it lists, clear about what it lacks, and strict."""

from __future__ import annotations

import pytest

from tests import k8s_schema, schema_bundle


@pytest.mark.parametrize("api_version,kind", schema_bundle.BUILTIN_KINDS)
def test_every_listed_builtin_kind_resolves(api_version: str, kind: str) -> None:
    schema = k8s_schema.builtin_schema(api_version, kind)
    assert {"apiVersion", "kind", "metadata"} <= set(schema["properties"])


@pytest.mark.parametrize(
    "source,kinds",
    [("kueue", schema_bundle.KUEUE_KINDS), ("prometheus-operator", schema_bundle.MONITORING_KINDS)],
)
def test_every_listed_custom_kind_has_its_schema(
    source: str, kinds: tuple[tuple[str, str], ...]
) -> None:
    bundle = schema_bundle.load(source)
    for api_version, kind in kinds:
        schema = schema_bundle.lookup(bundle, "schemas", api_version, kind)
        assert schema["type"] == "object"
        assert {"apiVersion", "kind", "metadata"} <= set(schema["properties"])


def test_a_kind_outside_the_bundle_says_how_to_add_it() -> None:
    with pytest.raises(schema_bundle.BundleMissingError, match=r"batch/v1 Job .*make test-schemas"):
        k8s_schema.builtin_schema("batch/v1", "Job")


def test_the_bundle_keeps_no_description_texts_but_keeps_a_field_named_description() -> None:
    assert '"description": "' not in schema_bundle.bundle_path("kueue").read_text()
    priority = schema_bundle.lookup(
        schema_bundle.load("kueue"), "schemas", "kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"
    )
    assert priority["properties"]["description"]["type"] == "string"


def test_a_misspelled_field_of_a_builtin_kind_is_an_error() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"contianers": [{"name": "x", "image": "x"}]},
            },
        },
    }
    errors = k8s_schema.schema_errors(deployment)
    assert any("contianers" in e for e in errors), errors
