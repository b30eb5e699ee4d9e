"""XGBoostJob's API: upstream's examples load unchanged and pass ``kubetrain validate``, the
defaults are upstream's (``xgboost_defaults.go``), the webhook's refusals are refused with
their words, and every field of upstream's CRD is in kubetrain's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import XGBoostJob, apply_defaults, crd_for, load_job
from kubetrain.api.errors import JobValidationError
from kubetrain.cli import main
from kubetrain.manifest import parse_yaml
from tests.builders.jobs import set_path, template, xgboost_job
from tests.conftest import REPO_ROOT

UPSTREAM = REPO_ROOT / "tests" / "data" / "upstream" / "training-operator-v1.9.0" / "xgboost"
EXAMPLES = sorted(UPSTREAM.rglob("*.yaml"))
UPSTREAM_FIELDS = (
    REPO_ROOT / "tests/data/upstream-crd-fields/training-operator-v1.9.0-xgboostjobs.txt"
)
XGB = "spec.xgbReplicaSpecs"


def _doc(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = parse_yaml(path.read_text(encoding="utf-8"))
    return doc


def _ids(paths: list[Path]) -> list[str]:
    return [p.relative_to(UPSTREAM).as_posix() for p in paths]


def test_every_v1_example_is_here() -> None:
    # Upstream's examples/xgboost holds 7 v1 YAMLs (and a v1alpha1 one, left out).
    assert len(EXAMPLES) == 7
    assert not any("v1alpha1" in p.name for p in EXAMPLES)


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_upstream_example_loads_unchanged(path: Path) -> None:
    doc = _doc(path)
    job = load_job(doc, str(path))
    assert isinstance(job, XGBoostJob)
    assert job.to_wire() == doc
    assert [t.value for t in job.spec.xgb_replica_specs] == ["Master", "Worker"]


def test_validate_accepts_every_upstream_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", *map(str, EXAMPLES)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(EXAMPLES)
    assert all(line.startswith("ok ") and "Master x1, Worker x2" in line for line in out)


def test_defaults_are_upstreams() -> None:
    bare = set_path(xgboost_job(), f"{XGB}.Worker", {"template": template("xgboost")})
    job = apply_defaults(load_job(bare))
    wire = job.to_wire()
    assert wire["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    for rtype in ("Master", "Worker"):
        rspec = wire["spec"]["xgbReplicaSpecs"][rtype]
        assert rspec["replicas"] == 1
        assert rspec["restartPolicy"] == "Never"
        (container,) = rspec["template"]["spec"]["containers"]
        assert container["ports"] == [
            {"name": "xgboostjob-port", "containerPort": 9999, "protocol": "TCP"}
        ]


def test_defaults_keep_a_declared_port_and_restart_policy() -> None:
    (example,) = [p for p in EXAMPLES if p.name == "xgboostjob.yaml"]
    wire = apply_defaults(load_job(_doc(example))).to_wire()
    worker = wire["spec"]["xgbReplicaSpecs"]["Worker"]
    assert worker["restartPolicy"] == "ExitCode"
    ports = worker["template"]["spec"]["containers"][0]["ports"]
    assert [(p["name"], p["containerPort"]) for p in ports] == [("xgboostjob-port", 9991)]


def _refusal(job: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(JobValidationError) as err:
        load_job(job)
    return [(e.path, e.expected) for e in err.value.errors]


def test_rejects_a_job_without_master() -> None:
    errors = _refusal(set_path(xgboost_job(), XGB, {"Worker": {"template": template("xgboost")}}))
    assert errors == [
        (
            f"{XGB}.Master",
            "an XGBoostJob's Master replica spec must be present (it runs the tracker)",
        )
    ]


@pytest.mark.parametrize("replicas", [0, 2])
def test_rejects_a_master_with_other_than_one_replica(replicas: int) -> None:
    errors = _refusal(set_path(xgboost_job(), f"{XGB}.Master.replicas", replicas))
    assert errors == [(f"{XGB}.Master.replicas", "an XGBoostJob's Master replicas must be 1")]


def test_rejects_a_replica_without_the_xgboost_container() -> None:
    errors = _refusal(set_path(xgboost_job(), f"{XGB}.Worker.template", template("trainer")))
    assert errors == [
        (
            f"{XGB}.Worker.template.spec.containers",
            "must have at least one container with name xgboost",
        )
    ]


def test_rejects_replica_types_in_other_letter_cases() -> None:
    """Upstream's webhook compares replica types exactly (its defaulter's camel-casing runs
    only later, in the controller), so ``master`` is refused."""
    job = set_path(xgboost_job(), XGB, {"master": {"template": template("xgboost")}})
    paths = [path for path, _ in _refusal(job)]
    assert f"{XGB}.master" in paths


def test_rejects_a_container_without_image() -> None:
    errors = _refusal(
        set_path(xgboost_job(), f"{XGB}.Master.template.spec.containers[0].image", "")
    )
    assert errors == [
        (f"{XGB}.Master.template.spec.containers[0].image", "every container must have an image")
    ]


def _paths(schema: Any, path: str) -> Iterator[str]:
    if not isinstance(schema, dict):
        return
    yield path
    if path.endswith(".template"):
        return
    for key, child in schema.get("properties", {}).items():
        yield from _paths(child, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _paths(schema[key], f"{path}[{key}]")


def test_crd_has_every_field_of_upstreams_crd() -> None:
    lines = UPSTREAM_FIELDS.read_text(encoding="utf-8").splitlines()
    upstream = [line for line in lines if line and not line.startswith("#")]
    (version,) = crd_for("XGBoostJob")["spec"]["versions"]
    root = version["schema"]["openAPIV3Schema"]["properties"]
    ours = {p for top in ("spec", "status") for p in _paths(root[top], top)}
    assert len(upstream) == 47
    assert [p for p in upstream if p not in ours] == []
