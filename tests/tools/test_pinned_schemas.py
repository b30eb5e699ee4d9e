"""The committed schemas are what the pinned sources give: the pod-template schema
embedded in kubetrain's CRDs (``kubetrain/api/schemas``) and the bundle the unit tier
validates manifests against (``tests/data/schemas``, ``tests/schema_bundle.py``). The
sources are downloads (``make openapi kueue-crds monitoring-crds``), so these run in the
tier that fetches them; the unit tier reads only what is committed."""

from __future__ import annotations

from kubetrain.api import k8s_openapi
from tests import schema_bundle


def test_committed_schema_matches_the_pinned_openapi() -> None:
    directory = k8s_openapi.openapi_dir()
    assert (directory / "api__v1_openapi.json").exists(), (
        f"{directory} lacks the Kubernetes {k8s_openapi.K8S_VERSION} OpenAPI: run `make openapi`"
    )
    regenerated = k8s_openapi.render(k8s_openapi.convert(directory))
    assert k8s_openapi.SCHEMA_FILE.read_text() == regenerated, "stale: run `make schemas`"


def test_committed_schema_bundle_matches_the_pins() -> None:
    generated = schema_bundle.generate()
    committed = {p.name for p in schema_bundle.BUNDLE_DIR.glob("*.json")}
    assert committed == set(generated), (
        "the bundle's files are not the pinned versions': run `make test-schemas`"
    )
    for name, text in generated.items():
        assert (schema_bundle.BUNDLE_DIR / name).read_text() == text, (
            f"{name} is stale: run `make test-schemas`"
        )
