"""Every kind the operator reconciles has a job construct of its name, validated by the
typed API, and docs/constructs.md's table names them and what KubeflowCrds makes."""

from __future__ import annotations

import re
from pathlib import Path

import constructs
import pytest

import kubetrain.constructs as package
from kubetrain.api.kinds import OPERATOR_KINDS
from kubetrain.constructs import KubeflowCrds
from kubetrain.constructs.objects import manifests
from tests.unit.constructs.jobs_helpers import new_chart

DOCS = Path(__file__).resolve().parents[3] / "docs" / "constructs.md"


def _table_row(first_cell_fragment: str) -> str:
    rows = [
        line
        for line in DOCS.read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and first_cell_fragment in line.split(" | ")[0]
    ]
    assert len(rows) == 1, f"docs/constructs.md: no single table row for {first_cell_fragment}"
    return rows[0]


@pytest.mark.parametrize("kind", list(OPERATOR_KINDS))
def test_every_served_kind_has_a_job_construct(kind: str) -> None:
    construct = getattr(package, kind, None)
    props = getattr(package, f"{kind}Props", None)
    assert isinstance(construct, type) and issubclass(construct, constructs.Construct), kind
    assert props is not None and f"{kind}Props" in package.__all__, kind


def test_the_docs_table_names_every_job_construct() -> None:
    names = [
        line.split(" | ")[0]
        for line in DOCS.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `")
    ]
    listed = {name for cell in names for name in re.findall(r"`(\w+)`", cell)}
    assert sorted(set(OPERATOR_KINDS) - listed) == []


def test_the_docs_say_which_crds_kubeflow_crds_makes() -> None:
    chart = new_chart()
    KubeflowCrds(chart, "Crds")
    kinds = [crd["spec"]["names"]["kind"] for crd in manifests(chart)]
    row = _table_row("`KubeflowCrds`")
    assert "three CRDs" not in row
    assert len(kinds) == 9
    assert [kind for kind in kinds if f"`{kind}`" not in row] == []
