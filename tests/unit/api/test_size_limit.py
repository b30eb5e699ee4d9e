"""One size limit for every entry point: a job the API server could never receive (its
request limit, ``MAX_FILE_BYTES``) is refused by ``kubetrain validate``, by the library's
text loaders and by the loaders of in-memory objects, with the same message; a job just
under it is accepted by all of them."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import JobValidationError, load_job, load_jobs_from_yaml
from kubetrain.api.limits import MAX_FILE_BYTES
from kubetrain.api.trainer import load_object, load_objects_from_yaml, load_trainer_object
from kubetrain.cli import main
from kubetrain.manifest import emit_yaml, parse_yaml
from tests.conftest import EXAMPLES

LIMIT_TEXT = f"must be at most {MAX_FILE_BYTES:,} bytes"


def _with_env_value(manifest: dict[str, Any], value: str) -> dict[str, Any]:
    """``manifest`` with one environment variable of ``value`` in its first container."""
    job = copy.deepcopy(manifest)
    specs = next(v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs"))
    container = next(iter(specs.values()))["template"]["spec"]["containers"][0]
    container.setdefault("env", []).append({"name": "BULK", "value": value})
    return job


def _pytorch_example() -> dict[str, Any]:
    loaded: dict[str, Any] = parse_yaml((EXAMPLES / "pytorchjob.yaml").read_text())
    return loaded


def _trainjob(value: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "bulky"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"env": [{"name": "BULK", "value": value}]},
        },
    }


def _first_error(call: Callable[[], Any]) -> str:
    with pytest.raises(JobValidationError) as caught:
        result = call()
        # The stream loaders yield each document's error instead of raising it.
        for _, item in result:
            if isinstance(item, JobValidationError):
                raise item
    return str(caught.value)


OVER = "x" * (MAX_FILE_BYTES + 1)
UNDER = "x" * (MAX_FILE_BYTES - 64 * 1024)


@pytest.mark.parametrize(
    "entry",
    [
        "load_job",
        "load_object",
        "load_jobs_from_yaml",
        "load_objects_from_yaml",
    ],
)
def test_rejects_a_job_over_the_request_limit_in_every_entry_point(entry: str) -> None:
    job = _with_env_value(_pytorch_example(), OVER)
    calls: dict[str, Callable[[], Any]] = {
        "load_job": lambda: [(0, load_job(job))],
        "load_object": lambda: [(0, load_object(job))],
        "load_jobs_from_yaml": lambda: load_jobs_from_yaml(emit_yaml(job)),
        "load_objects_from_yaml": lambda: list(load_objects_from_yaml(emit_yaml(job))),
    }
    message = _first_error(calls[entry])
    assert LIMIT_TEXT in message
    assert "the API server's request limit" in message


def test_validate_refuses_the_same_job_with_the_same_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bulky.yaml"
    path.write_text(emit_yaml(_with_env_value(_pytorch_example(), OVER)))
    assert main(["validate", str(path)]) == 1
    assert LIMIT_TEXT in capsys.readouterr().err


def test_rejects_a_trainjob_over_the_request_limit() -> None:
    message = _first_error(lambda: [(0, load_trainer_object(_trainjob(OVER)))])
    assert LIMIT_TEXT in message and "as JSON" in message


def test_counts_the_json_form_not_the_characters() -> None:
    # Each control character is six bytes of JSON (\u0001): a sixth of the limit in
    # characters is over it on the wire.
    value = "\x01" * (MAX_FILE_BYTES // 6 + 1)
    job = _with_env_value(_pytorch_example(), value)
    message = _first_error(lambda: [(0, load_job(job))])
    on_the_wire = len(json.dumps(job, separators=(",", ":"), ensure_ascii=False).encode())
    assert on_the_wire > 6 * len(value)
    assert f"{LIMIT_TEXT} as JSON (the API server's request limit), got {on_the_wire:,} bytes" in (
        message
    )


def test_accepts_a_job_just_under_the_limit_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _with_env_value(_pytorch_example(), UNDER)
    text = emit_yaml(job, width=2**31 - 1)
    assert len(text.encode()) <= MAX_FILE_BYTES
    assert load_job(job).name == "pytorch-ddp"
    assert load_object(job).metadata.name == "pytorch-ddp"
    [(_, loaded)] = list(load_jobs_from_yaml(text))
    assert not isinstance(loaded, JobValidationError)
    path = tmp_path / "bulky.yaml"
    path.write_text(text)
    assert main(["validate", str(path)]) == 0
    assert load_trainer_object(_trainjob(UNDER)).metadata.name == "bulky"
