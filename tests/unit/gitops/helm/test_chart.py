"""The Helm chart export: the committed charts/kubetrain/ is what a fresh export gives,
its values schema agrees with the typed props' own checks, and the values table in docs/gitops.md
is the schema's. (helm itself renders, lints and installs it in
tests/integration/test_helm_chart.py.)"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kubetrain import __version__
from kubetrain.api import all_crds
from kubetrain.controller.config import JOB_KINDS
from kubetrain.gitops.helm import (
    CHART_NAME,
    default_values,
    operator_props,
    values_schema,
    values_table,
)
from kubetrain.gitops.stack import Stack, load_stacks
from kubetrain.manifest import parse_yaml

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def local() -> Stack:
    return load_stacks(root=ROOT)["local"]


@pytest.fixture(scope="module")
def files(local_chart_files: dict[str, str]) -> dict[str, str]:
    """The ``local`` stack's chart export (``chart_files``, computed ahead: conftest.py)."""
    return local_chart_files


def test_the_committed_chart_is_a_fresh_export(files: dict[str, str]) -> None:
    chart = ROOT / "charts" / CHART_NAME
    committed = {str(p.relative_to(chart)): p.read_text() for p in chart.rglob("*") if p.is_file()}
    stale = sorted(p for p in files.keys() | committed.keys() if files.get(p) != committed.get(p))
    assert stale == [], (
        f"charts/kubetrain is stale ({', '.join(stale)}): run `kubetrain helm local`"
    )


def test_chart_version_is_the_stacks_and_app_version_kubetrains(
    local: Stack, files: dict[str, str]
) -> None:
    chart = parse_yaml(files["Chart.yaml"])
    assert chart["version"] == local.version
    assert chart["appVersion"] == __version__
    assert chart["name"] == CHART_NAME


def test_crds_are_plain_files_and_values_yaml_holds_the_stacks_settings(
    local: Stack, files: dict[str, str]
) -> None:
    crds = sorted(p for p in files if p.startswith("crds/"))
    assert len(crds) == len(all_crds())
    assert all("{{" not in files[p] for p in crds)
    values = parse_yaml(files["values.yaml"])
    assert values == default_values(local.operator)
    assert operator_props(local.operator, values).effective_config() == (
        local.operator.effective_config()
    )


def _validates(schema: dict[str, Any], values: dict[str, Any]) -> bool:
    return not list(jsonschema.Draft7Validator(schema).iter_errors(values))


def _props_accept(local: Stack, values: dict[str, Any]) -> bool:
    try:
        # The construct checks the merged config when it renders.
        operator_props(local.operator, values).effective_config()
    except ValueError:
        return False
    return True


def _with(values: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(values)
    *parents, last = path.split(".")
    node = out
    for name in parents:
        node = node[name]
    node[last] = value
    return out


BOUNDARY_CASES = [
    ("replicas", 1),
    ("replicas", 10),
    ("replicas", 0),
    ("replicas", 11),
    ("workers", 1),
    ("workers", 64),
    ("workers", 0),
    ("workers", 65),
    ("kubeApiQps", 0.5),
    ("kubeApiQps", 0),
    ("kubeApiBurst", 1),
    ("kubeApiBurst", 0),
    ("metricsPort", 1024),
    ("metricsPort", 65535),
    ("metricsPort", 1023),
    ("metricsPort", 65536),
    ("metricsPort", 8081),
    ("startupTimeoutSeconds", 1),
    ("startupTimeoutSeconds", 0),
    ("successGraceSeconds", 0),
    ("successGraceSeconds", -1),
    ("eventQps", 0.1),
    ("eventQps", 0),
    ("logLevel", "debug"),
    ("logLevel", "verbose"),
    ("gangScheduler", "none"),
    ("gangScheduler", "volcano"),
    ("leaderElectionId", "my-lease"),
    ("leaderElectionId", "My_Lease"),
    ("watchNamespaces", ["team-a", "team-b"]),
    ("watchNamespaces", ["kube-system"]),
    ("watchNamespaces", ["Team"]),
    ("watchNamespaces", ["a", "a"]),
    ("kinds", {kind: False for kind in JOB_KINDS}),
    ("kinds", {kind: kind == "MPIJob" for kind in JOB_KINDS}),
    ("image.tag", "latest"),
    ("image.tag", ""),
    ("image.digest", "sha256:" + "ab" * 32),
    ("image.digest", "sha256:short"),
    ("image.repository", "Registry/UPPER"),
    ("resources.cpu", "500m"),
    ("resources.cpu", "half"),
    ("resources.memoryLimit", "1Gi"),
    ("tolerations", [{"key": "dedicated", "operator": "Equal", "value": "ops"}]),
    ("tolerations", [{"key": "dedicated", "operator": "Sometimes"}]),
    ("tolerations", [{"key": "dedicated", "effect": "NoSchedule", "colour": "red"}]),
]


@pytest.mark.parametrize(("path", "value"), BOUNDARY_CASES, ids=lambda v: str(v)[:40])
def test_the_schema_refuses_what_the_props_refuse(local: Stack, path: str, value: Any) -> None:
    schema = values_schema(local.operator)
    values = _with(default_values(local.operator), path, value)
    assert _validates(schema, values) == _props_accept(local, values), (path, value)


def test_rejects_a_tag_and_digest_both_empty(local: Stack) -> None:
    values = _with(default_values(local.operator), "image.tag", "")
    assert not _validates(values_schema(local.operator), values)
    assert not _props_accept(local, values)


def test_rejects_unknown_values(local: Stack) -> None:
    values = {**default_values(local.operator), "replicaCount": 2}
    assert not _validates(values_schema(local.operator), values)


def test_the_default_values_are_valid(local: Stack, files: dict[str, str]) -> None:
    schema = json.loads(files["values.schema.json"])
    jsonschema.Draft7Validator.check_schema(schema)
    assert _validates(schema, parse_yaml(files["values.yaml"]))


def test_the_documented_values_table_is_generated_from_the_schema(local: Stack) -> None:
    documented = (ROOT / "docs/gitops.md").read_text()
    assert values_table(values_schema(local.operator), default_values(local.operator)) in documented
