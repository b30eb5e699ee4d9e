"""Structural schemas for the Kubernetes types kubetrain embeds in its CRDs.

The source is the OpenAPI v3 of one pinned Kubernetes release (``K8S_VERSION``), taken
from the ``k8s.io/kubernetes`` Go module (``make openapi`` fetches it into
``$KUBETRAIN_CACHE/openapi/<version>``). ``python -m kubetrain.api.k8s_openapi --write``
converts the types in ``EMBEDDED`` into CRD-ready structural schemas and writes them to
``schemas/k8s-<version>.json``, which is committed so the package works without Go. A
test regenerates the file and compares, so it never drifts from the pinned OpenAPI.

Conversion rules (what makes a Kubernetes OpenAPI type a valid, compact CRD schema):
- ``$ref`` and ``allOf: [$ref]`` are inlined;
- descriptions, examples, patch-strategy markers and ``default`` are dropped (defaults in
  a CRD would mutate users' objects), except the default of a list-map key that is not
  required, which the API server needs (``ports[].protocol``);
- IntOrString and Quantity become ``x-kubernetes-int-or-string`` with ``anyOf``;
- an embedded ObjectMeta keeps only the fields a template may carry.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import cache
from pathlib import Path
from typing import Any

K8S_VERSION = "v1.34.4"

# Definition name -> OpenAPI v3 document (file under api/openapi-spec/v3) holding it.
EMBEDDED: dict[str, str] = {
    "io.k8s.api.core.v1.PodTemplateSpec": "api__v1_openapi.json",
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector": "api__v1_openapi.json",
    "io.k8s.api.autoscaling.v2.MetricSpec": "apis__autoscaling__v2_openapi.json",
    # Kubeflow Trainer v2 (kubetrain.api.trainer): the JobSet-shaped runtime template and
    # the core types a TrainJob's trainer, initializers and runtime patches carry.
    "io.k8s.api.batch.v1.JobTemplateSpec": "apis__batch__v1_openapi.json",
    "io.k8s.api.core.v1.PersistentVolumeClaim": "api__v1_openapi.json",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": "api__v1_openapi.json",
    "io.k8s.api.core.v1.EnvVar": "api__v1_openapi.json",
    "io.k8s.api.core.v1.ResourceRequirements": "api__v1_openapi.json",
    "io.k8s.api.core.v1.LocalObjectReference": "api__v1_openapi.json",
    "io.k8s.api.core.v1.Volume": "api__v1_openapi.json",
    "io.k8s.api.core.v1.VolumeMount": "api__v1_openapi.json",
    "io.k8s.api.core.v1.SecurityContext": "api__v1_openapi.json",
    "io.k8s.api.core.v1.PodSecurityContext": "api__v1_openapi.json",
    "io.k8s.api.core.v1.Affinity": "api__v1_openapi.json",
    "io.k8s.api.core.v1.Toleration": "api__v1_openapi.json",
    "io.k8s.api.core.v1.PodSchedulingGate": "api__v1_openapi.json",
}

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_EMBEDDED_META_FIELDS = ("annotations", "finalizers", "generateName", "labels", "name", "namespace")
_INT_OR_STRING = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
}
_KEEP_KEYS = {
    "type",
    "format",
    "enum",
    "required",
    "properties",
    "items",
    "additionalProperties",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
}
SCHEMA_FILE = Path(__file__).parent / "schemas" / f"k8s-{K8S_VERSION}.json"


def openapi_dir() -> Path:
    """Where ``make openapi`` put the pinned OpenAPI documents."""
    env = os.environ.get("KUBETRAIN_OPENAPI_DIR")
    if env:
        return Path(env)
    cache_root = Path(os.environ.get("KUBETRAIN_CACHE", Path.home() / ".cache" / "kubetrain"))
    return cache_root / "openapi" / K8S_VERSION


def _ref_name(node: dict[str, Any]) -> str | None:
    if "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        return str(all_of[0]["$ref"]).rsplit("/", 1)[-1]
    return None


class _Converter:
    """``for_crd``: the result will be embedded in a CRD, whose list-map keys must be
    required or defaulted; for validating built-in objects that rule does not apply."""

    def __init__(self, definitions: dict[str, Any], *, for_crd: bool = True) -> None:
        self.definitions = definitions
        self.for_crd = for_crd

    def definition(self, name: str, stack: tuple[str, ...] = ()) -> dict[str, Any]:
        if name in stack and not self.for_crd:
            # Recursive types (JSONSchemaProps) are checked to this depth only.
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        if name in stack:
            raise ValueError(f"recursive Kubernetes type {name} via {' -> '.join(stack)}")
        if name in _INT_OR_STRING:
            out: dict[str, Any] = {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
            }
            if name.endswith("Quantity"):
                from kubetrain.api.base import QUANTITY_PATTERN

                out["pattern"] = QUANTITY_PATTERN
            return out
        source = self.definitions[name]
        if name == _OBJECT_META:
            props = source["properties"]
            source = {
                "type": "object",
                "properties": {k: props[k] for k in _EMBEDDED_META_FIELDS},
            }
        return self.node(source, (*stack, name))

    def node(self, source: dict[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
        ref = _ref_name(source)
        if ref is not None:
            return self.definition(ref, stack)
        out: dict[str, Any] = {}
        for key, value in source.items():
            if key not in _KEEP_KEYS:
                continue
            if key == "properties":
                out[key] = {k: self.node(v, stack) for k, v in sorted(value.items())}
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                out[key] = self.node(value, stack)
            else:
                out[key] = value
        if out.get("x-kubernetes-list-type") == "map":
            self._keep_map_key_defaults(source, out, stack)
        if "type" not in out and "x-kubernetes-int-or-string" not in out:
            # Free-form JSON (RawExtension and the like).
            out = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return out

    def _keep_map_key_defaults(
        self, source: dict[str, Any], out: dict[str, Any], stack: tuple[str, ...]
    ) -> None:
        item_ref = _ref_name(source["items"])
        if item_ref is None:
            return
        item_source = self.definitions[item_ref]
        required = set(item_source.get("required", []))
        for key in out["x-kubernetes-list-map-keys"]:
            if key in required:
                continue
            default = item_source["properties"][key].get("default")
            if default is None and not self.for_crd:
                continue
            if default is None:
                raise ValueError(f"list-map key {item_ref}.{key} is neither required nor defaulted")
            out["items"]["properties"][key]["default"] = default


def convert(directory: Path) -> dict[str, Any]:
    """Convert every type in ``EMBEDDED`` from the OpenAPI documents in ``directory``."""
    result: dict[str, Any] = {}
    for name, filename in sorted(EMBEDDED.items()):
        path = directory / filename
        if not path.exists():
            raise FileNotFoundError(
                f"Kubernetes OpenAPI document {path} is missing: run `make openapi` "
                f"(fetches k8s.io/kubernetes@{K8S_VERSION} through the Go module proxy)"
            )
        definitions = json.loads(path.read_text())["components"]["schemas"]
        result[name] = _Converter(definitions).definition(name)
    return {"kubernetesVersion": K8S_VERSION, "definitions": result}


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


@cache
def embedded_schemas() -> dict[str, Any]:
    """The committed structural schemas, keyed by Kubernetes definition name."""
    data: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
    return dict(data["definitions"])


def embedded_schema(definition: str) -> dict[str, Any]:
    try:
        schema: dict[str, Any] = embedded_schemas()[definition]
    except KeyError:
        raise KeyError(
            f"Kubernetes type {definition} is not embedded; add it to EMBEDDED and run "
            "`make schemas`"
        ) from None
    return schema


def strict_schema(schema: Any) -> Any:
    """Copy of a structural schema that also rejects unknown fields (like kubectl's
    strict field validation), so a typo such as ``contianers`` is reported."""
    if isinstance(schema, dict):
        out = {k: strict_schema(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict_schema(v) for v in schema]
    return schema


@cache
def _gvk_index(directory: Path) -> dict[tuple[str, str], tuple[Path, str]]:
    """(apiVersion, kind) -> (document, definition name) over every OpenAPI document."""
    index: dict[tuple[str, str], tuple[Path, str]] = {}
    for path in sorted(directory.glob("*_openapi.json")):
        schemas = json.loads(path.read_text()).get("components", {}).get("schemas", {})
        for name, schema in schemas.items():
            for gvk in schema.get("x-kubernetes-group-version-kind", []):
                group, version = gvk.get("group", ""), gvk["version"]
                api_version = f"{group}/{version}" if group else version
                if name.endswith(f".{gvk['kind']}"):
                    index[(api_version, gvk["kind"])] = (path, name)
    return index


def kind_definition(directory: Path, api_version: str, kind: str) -> tuple[Path, str]:
    """The OpenAPI document in ``directory`` that defines a built-in kind, and the name of
    its definition there."""
    index = _gvk_index(directory)
    if not index:
        raise FileNotFoundError(
            f"no Kubernetes OpenAPI documents in {directory}: run `make openapi`"
        )
    try:
        return index[(api_version, kind)]
    except KeyError:
        raise KeyError(
            f"{api_version} {kind} is not a built-in kind of Kubernetes {K8S_VERSION}"
        ) from None


def structural_schema(definitions: dict[str, Any], name: str) -> dict[str, Any]:
    """Structural schema of the OpenAPI definition ``name`` (for validating objects, not
    for embedding in a CRD), resolving references within ``definitions``."""
    return _Converter(definitions, for_crd=False).definition(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help=f"write {SCHEMA_FILE.name}")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render(convert(openapi_dir()))
    if args.write:
        SCHEMA_FILE.write_text(text)
        print(f"wrote {SCHEMA_FILE} ({len(text)} bytes)")
        return 0
    if args.check:
        stale = not SCHEMA_FILE.exists() or SCHEMA_FILE.read_text() != text
        print(f"{SCHEMA_FILE.name}: {'stale, run `make schemas`' if stale else 'up to date'}")
        return 1 if stale else 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
