"""The annotations that end fake pods (cluster/fake_pods.py, cluster/stages)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cluster.fake_pods import (
    EXIT_CODE_ANNOTATION,
    MESSAGE_ANNOTATION,
    REASON_ANNOTATION,
    exit_annotations,
    exit_patch,
)
from cluster.local import stage_files
from kubetrain.manifest import parse_yaml


def test_exit_annotations_carry_code_reason_and_message() -> None:
    assert exit_annotations(137, "OOMKilled", "killed") == {
        EXIT_CODE_ANNOTATION: "137",
        REASON_ANNOTATION: "OOMKilled",
        MESSAGE_ANNOTATION: "killed",
    }
    assert exit_annotations(0) == {EXIT_CODE_ANNOTATION: "0"}
    assert exit_patch(1) == {"metadata": {"annotations": {EXIT_CODE_ANNOTATION: "1"}}}


@pytest.mark.parametrize("code", [-1, 256, 1000])
def test_rejects_exit_code_out_of_range(code: int) -> None:
    with pytest.raises(ValueError, match=f"exit_code is {code}: a process exit code is 0..255"):
        exit_annotations(code)


def test_rejects_non_integer_exit_code() -> None:
    bad: Any = "1"
    with pytest.raises(TypeError, match="exit_code must be an int, got str"):
        exit_annotations(bad)


def test_rejects_empty_reason() -> None:
    with pytest.raises(ValueError, match="reason is empty"):
        exit_annotations(1, "")


def _stages() -> list[dict[str, Any]]:
    return [parse_yaml(path.read_text()) for path in stage_files()]


def test_stages_are_kwok_stages_with_unique_names() -> None:
    stages = _stages()
    assert {stage["kind"] for stage in stages} == {"Stage"}
    names = [stage["metadata"]["name"] for stage in stages]
    assert len(names) == len(set(names)), names
    kinds = {(s["spec"]["resourceRef"]["kind"]) for s in stages}
    assert kinds == {"Node", "Pod"}


def test_stage_exit_code_pattern_accepts_exactly_0_to_255() -> None:
    """The stages only act on valid codes; the regex they use must agree with Python."""
    pattern = None
    for path in stage_files():
        match = re.search(r'test\("(\^[^"]+\$)"\)', Path(path).read_text())
        if match:
            found = match.group(1)
            assert pattern in (None, found), f"{path} uses another exit-code pattern"
            pattern = found
    assert pattern is not None, "no stage checks the exit-code annotation"
    accepted = [code for code in range(-5, 300) if re.fullmatch(pattern, str(code))]
    assert accepted == list(range(256))
    assert not re.fullmatch(pattern, "007")
