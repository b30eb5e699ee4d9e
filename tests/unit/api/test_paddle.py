"""PaddleJob: upstream's examples load unchanged, upstream's defaults and webhook refusals
(training-operator v1.9.0), and a CRD holding every field of upstream's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import JobValidationError, PaddleJob, apply_defaults, crd_for, load_job
from kubetrain.api.paddle import INFO as PADDLE
from kubetrain.cli import main
from kubetrain.manifest import parse_yaml
from tests.builders.jobs import paddle_job, set_path, template
from tests.conftest import REPO_ROOT

UPSTREAM = REPO_ROOT / "tests" / "data" / "upstream" / "training-operator-v1.9.0" / "paddlepaddle"
EXAMPLES = sorted(UPSTREAM.glob("*.yaml"))
UPSTREAM_PATHS = REPO_ROOT / "tests" / "data" / "upstream-crd-paths" / "paddlejobs.txt"
P = "spec.paddleReplicaSpecs"


def _errors(job: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(JobValidationError) as caught:
        load_job(job)
    return [(e.path, e.expected) for e in caught.value.errors]


def test_upstreams_examples_are_both_here() -> None:
    assert [p.name for p in EXAMPLES] == ["simple-cpu.yaml", "simple-gpu.yaml"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_upstream_example_loads_unchanged(path: Path) -> None:
    wire = parse_yaml(path.read_text())
    job = load_job(wire, str(path))
    assert isinstance(job, PaddleJob)
    assert job.to_wire() == wire
    assert job.summary() == {"Worker": 2}


def test_validate_accepts_upstreams_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", *(str(p) for p in EXAMPLES)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "PaddleJob/paddle-simple-cpu: Worker x2" in out
    assert "PaddleJob/paddle-simple-gpu: Worker x2" in out


def test_defaults_are_upstreams() -> None:
    """SetDefaults_PaddleJob: cleanPodPolicy None, replicas 1, restartPolicy OnFailure, the
    ``master`` port 36543 on the ``paddle`` container."""
    job = set_path(paddle_job(), f"{P}.Master", {"template": template("paddle")})
    wire = apply_defaults(load_job(job)).to_wire()
    assert wire["spec"]["runPolicy"] == {"cleanPodPolicy": "None", "suspend": False}
    for rtype in ("Master", "Worker"):
        spec = wire["spec"]["paddleReplicaSpecs"][rtype]
        assert spec["restartPolicy"] == "OnFailure"
        assert spec["template"]["spec"]["containers"][0]["ports"] == [
            {"name": "master", "containerPort": 36543, "protocol": "TCP"}
        ]
    assert wire["spec"]["paddleReplicaSpecs"]["Master"]["replicas"] == 1


def test_defaults_keep_a_declared_master_port_and_restart_policy() -> None:
    wire = parse_yaml(EXAMPLES[0].read_text())
    worker = apply_defaults(load_job(wire)).to_wire()["spec"]["paddleReplicaSpecs"]["Worker"]
    assert worker["restartPolicy"] == "OnFailure"
    # protocol: the CRD's embedded default for the list-map key, which the server stores.
    assert worker["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 37777, "name": "master", "protocol": "TCP"}
    ]


def test_default_port_goes_to_the_paddle_container_not_the_first() -> None:
    pod = {"spec": {"containers": [template("sidecar")["spec"]["containers"][0]]}}
    pod["spec"]["containers"].append({"name": "paddle", "image": "paddle:1"})
    wire = apply_defaults(load_job(set_path(paddle_job(), f"{P}.Worker.template", pod)))
    sidecar, paddle = wire.to_wire()["spec"]["paddleReplicaSpecs"]["Worker"]["template"]["spec"][
        "containers"
    ]
    assert "ports" not in sidecar
    assert paddle["ports"] == [{"name": "master", "containerPort": 36543, "protocol": "TCP"}]


@pytest.mark.parametrize(
    ("elastic", "expected"),
    [
        ({}, {"minReplicas": 2, "maxReplicas": 2}),
        ({"maxReplicas": 4}, {"minReplicas": 4, "maxReplicas": 4}),
        ({"minReplicas": 1}, {"minReplicas": 1, "maxReplicas": 1}),
        ({"minReplicas": 1, "maxReplicas": 3}, {"minReplicas": 1, "maxReplicas": 3}),
    ],
    ids=["none-take-workers", "max-only", "min-only", "both"],
)
def test_elastic_policy_bounds_default_as_upstream(
    elastic: dict[str, int], expected: dict[str, int]
) -> None:
    wire = apply_defaults(load_job(paddle_job(elasticPolicy=elastic))).to_wire()
    assert wire["spec"]["elasticPolicy"] == expected


def test_rejects_a_job_without_the_paddle_container_with_upstreams_quoted_message() -> None:
    job = set_path(paddle_job(), f"{P}.Worker.template", template("trainer"))
    assert _errors(job) == [
        (
            f"{P}.Worker.template.spec.containers",
            'must have at least one container with name "paddle"',
        )
    ]


@pytest.mark.parametrize(
    ("job", "path", "fragment"),
    [
        (
            set_path(paddle_job(), f"{P}.PS", {"template": template("paddle")}),
            f"{P}.PS",
            "replica type must be one of: Master, Worker",
        ),
        # Upstream's webhook compares the keys as written: no letter case folding.
        (
            set_path(paddle_job(), P, {"worker": {"template": template("paddle")}}),
            f"{P}.worker",
            "replica type must be one of: Master, Worker",
        ),
        (
            set_path(paddle_job(), f"{P}.Worker.template.spec.containers", []),
            f"{P}.Worker.template.spec.containers",
            "at least one container",
        ),
        (
            set_path(paddle_job(), f"{P}.Worker.template.spec.containers[0].image", ""),
            f"{P}.Worker.template.spec.containers[0].image",
            "every container must have an image",
        ),
        (set_path(paddle_job(), P, {}), P, "at least 1"),
        (
            set_path(paddle_job(), "metadata.name", "Paddle_Job"),
            "metadata.name",
            "must match ^[a-z]",
        ),
        (
            set_path(paddle_job(), "spec.runPolicy", {"cleanPodPolicy": "Some"}),
            "spec.runPolicy.cleanPodPolicy",
            "must be 'All', 'Running' or 'None'",
        ),
    ],
    ids=[
        "unknown-replica-type",
        "lowercase-replica-type",
        "no-containers",
        "no-image",
        "no-replica-specs",
        "name-not-dns-1035",
        "bad-clean-pod-policy",
    ],
)
def test_rejects_what_upstreams_webhook_refuses(
    job: dict[str, Any], path: str, fragment: str
) -> None:
    errors = _errors(job)
    assert any(p == path and fragment in m for p, m in errors), errors


def test_rejects_missing_replica_specs() -> None:
    job = paddle_job()
    del job["spec"]["paddleReplicaSpecs"]
    assert [p for p, _ in _errors(job)] == [P]


def _schema_paths(node: dict[str, Any], path: str = "") -> set[str]:
    paths = {path}
    for key, child in node.get("properties", {}).items():
        paths |= _schema_paths(child, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            paths |= _schema_paths(node[key], f"{path}[{key}]")
    return paths


def test_crd_has_every_field_of_upstreams_crd() -> None:
    upstream = {
        line
        for line in UPSTREAM_PATHS.read_text().splitlines()
        if line and not line.startswith("#")
    }
    (version,) = crd_for(PADDLE.kind)["spec"]["versions"]
    ours = _schema_paths(version["schema"]["openAPIV3Schema"])
    assert len(upstream) > 100
    assert sorted(upstream - ours) == []
    template = ".spec.paddleReplicaSpecs[additionalProperties].template"
    assert {f"{template}.metadata", f"{template}.spec.containers"} <= ours


def test_crd_names_and_stored_restart_policy() -> None:
    crd = crd_for(PADDLE.kind)
    assert crd["metadata"]["name"] == "paddlejobs.kubeflow.org"
    assert crd["spec"]["names"]["kind"] == "PaddleJob"
    assert crd["spec"]["names"]["listKind"] == "PaddleJobList"
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1"
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    replica = spec["properties"]["paddleReplicaSpecs"]["additionalProperties"]
    assert replica["properties"]["restartPolicy"]["default"] == "OnFailure"
    messages = [r["message"] for r in replica["x-kubernetes-validations"]]
    assert 'must have at least one container with name "paddle"' in messages


def test_rejects_a_negative_elastic_count_which_upstreams_crd_takes() -> None:
    errors = _errors(paddle_job(elasticPolicy={"minReplicas": -1}))
    assert [p for p, _ in errors] == ["spec.elasticPolicy.minReplicas"]
