"""The committed schema bundle the unit tier validates manifests against, so that
``make test-unit`` needs nothing but the virtualenv.

Every object kubetrain synthesizes is checked against the schema of the API that serves
it: built-in kinds against the pinned Kubernetes release's OpenAPI, Kueue's kinds against
the pinned Kueue module's CRD files, the Prometheus Operator's against its pinned CRD
files. Those sources are downloads (the Go module proxy); this module copies from them
only what the checks read into ``tests/data/schemas/``, one JSON file per source named
after its pinned version:

- ``kubernetes-<version>.json``: for each kind of ``BUILTIN_KINDS``, the name of its
  OpenAPI definition, and every definition those reach through ``$ref``;
- ``kueue-<version>.json`` and ``prometheus-operator-<version>.json``: each kind's
  ``openAPIV3Schema`` at the version listed.

Everything is copied as the source has it, less the ``description`` texts (most of the
bytes, and nothing a check reads).

``make test-schemas`` (``python -m tests.schema_bundle --write``) regenerates them after a
pin moves; ``tests/integration/test_pinned_schemas.py`` (the tier that downloads the
sources) fails when the committed bundle is not what the pins give.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubetrain.api.k8s_openapi import K8S_VERSION
from kubetrain.manifest import parse_yaml

BUNDLE_DIR = Path(__file__).resolve().parent / "data" / "schemas"

#: The built-in kinds the unit tier checks (what the constructs synthesize).
BUILTIN_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "ConfigMap"),
    ("v1", "Namespace"),
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "ServiceAccount"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "Deployment"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("node.k8s.io/v1", "RuntimeClass"),
    ("policy/v1", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
)
KUEUE_KINDS: tuple[tuple[str, str], ...] = (
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"),
)
MONITORING_KINDS: tuple[tuple[str, str], ...] = (
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
)


class BundleMissingError(LookupError):
    """The committed bundle lacks a file or a kind."""


def _pins() -> dict[str, str]:
    """Source name -> pinned version (the go.mod files under cluster/tools)."""
    from cluster import tools

    return {
        "kubernetes": K8S_VERSION,
        "kueue": tools.module_version(tools.KUEUE_MODULE / "go.mod", "sigs.k8s.io/kueue"),
        "prometheus-operator": tools.module_version(
            tools.PROMETHEUS_OPERATOR_MODULE / "go.mod",
            "github.com/prometheus-operator/prometheus-operator",
        ),
    }


def bundle_path(source: str) -> Path:
    return BUNDLE_DIR / f"{source}-{_pins()[source]}.json"


def load(source: str) -> dict[str, Any]:
    """The committed bundle of ``source`` at its pinned version."""
    path = bundle_path(source)
    if not path.exists():
        raise BundleMissingError(
            f"{path.relative_to(BUNDLE_DIR.parent.parent.parent)} is missing (the pin of "
            f"{source} moved?): run `make test-schemas`"
        )
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _key(api_version: str, kind: str) -> str:
    return f"{api_version} {kind}"


def lookup(bundle: dict[str, Any], section: str, api_version: str, kind: str) -> Any:
    try:
        return bundle[section][_key(api_version, kind)]
    except KeyError:
        raise BundleMissingError(
            f"{api_version} {kind} is not in the committed schema bundle: add it to "
            "tests/schema_bundle.py and run `make test-schemas`"
        ) from None


# -- generation (needs the downloaded sources) ---------------------------------------------


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        # A property may be named "description" (the ``properties`` map's keys are names).
        return {
            k: _without_descriptions(v)
            for k, v in node.items()
            if not (k == "description" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_without_descriptions(v) for v in node]
    return node


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref.rsplit("/", 1)[-1]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def kubernetes_bundle(openapi_dir: Path) -> dict[str, Any]:
    """The definitions ``BUILTIN_KINDS`` reach, from the OpenAPI documents in
    ``openapi_dir``."""
    from kubetrain.api.k8s_openapi import kind_definition

    kinds: dict[str, str] = {}
    definitions: dict[str, Any] = {}
    for api_version, kind in BUILTIN_KINDS:
        path, name = kind_definition(openapi_dir, api_version, kind)
        kinds[_key(api_version, kind)] = name
        source = json.loads(path.read_text())["components"]["schemas"]
        pending = [name]
        while pending:
            current = pending.pop()
            if current in definitions:
                continue
            definitions[current] = source[current]
            pending.extend(_refs(source[current]))
    return {"version": K8S_VERSION, "kinds": kinds, "definitions": definitions}


def crd_bundle(version: str, paths: list[Path], wanted: tuple[tuple[str, str], ...]) -> Any:
    """Each wanted kind's ``openAPIV3Schema`` from the CRD files ``paths``."""
    schemas: dict[str, Any] = {}
    for api_version, kind in wanted:
        group, version_name = api_version.split("/", 1)
        # Files are named <group>_<plural>.yaml: only a kind's own are read (others may
        # hold YAML that a safe loader refuses).
        candidates = [p for p in paths if p.name.split("_", 1)[-1].startswith(kind.lower())]
        crds = [parse_yaml(p.read_text()) for p in candidates]
        crd = next(
            (c for c in crds if c["spec"]["group"] == group and c["spec"]["names"]["kind"] == kind),
            None,
        )
        if crd is None:
            raise KeyError(f"{api_version} {kind} is in none of the CRD files given")
        served = [v for v in crd["spec"]["versions"] if v["name"] == version_name]
        if not served:
            raise KeyError(f"the {kind} CRD serves no version {version_name}")
        schemas[_key(api_version, kind)] = served[0]["schema"]["openAPIV3Schema"]
    return {"version": version, "schemas": schemas}


def generate() -> dict[str, str]:
    """Every bundle file's name and text, from the downloaded sources."""
    from cluster import tools
    from kubetrain.api.k8s_openapi import openapi_dir

    pins = _pins()
    documents = {
        "kubernetes": kubernetes_bundle(openapi_dir()),
        "kueue": crd_bundle(pins["kueue"], tools.kueue_module_crds(), KUEUE_KINDS),
        "prometheus-operator": crd_bundle(
            pins["prometheus-operator"], tools.prometheus_operator_crds(), MONITORING_KINDS
        ),
    }
    return {
        f"{source}-{pins[source]}.json": json.dumps(
            _without_descriptions(document), indent=1, sort_keys=True
        )
        + "\n"
        for source, document in documents.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help="rewrite tests/data/schemas/")
    args = parser.parse_args(argv)
    files = generate()
    stale = sorted(
        name
        for name, text in files.items()
        if not (BUNDLE_DIR / name).exists() or (BUNDLE_DIR / name).read_text() != text
    )
    extra = sorted(p.name for p in BUNDLE_DIR.glob("*.json") if p.name not in files)
    if not args.write:
        for name in stale:
            print(f"{name}: stale")
        for name in extra:
            print(f"{name}: no longer pinned")
        return 1 if stale or extra else 0
    BUNDLE_DIR.mkdir(parents=True, exist_ok=True)
    for name in extra:
        (BUNDLE_DIR / name).unlink()
        print(f"removed {name}")
    for name, text in sorted(files.items()):
        (BUNDLE_DIR / name).write_text(text)
        print(f"wrote tests/data/schemas/{name} ({len(text) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
