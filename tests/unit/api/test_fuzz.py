"""Property tests: whatever shape a job has, loading it ends in exactly one of two ways.

Either it is accepted, and its ``to_wire()`` form loads back to an equal job (which the
defaulting step and ``kubetrain validate``'s summary also handle), or it raises
``JobValidationError`` whose every error names a path and whose message stays short. No
other exception, however the input is mutated. The counts are printed.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubetrain.api import JobValidationError, apply_defaults, load_job
from kubetrain.api.errors import FieldError
from kubetrain.api.limits import MAX_LISTED_ERRORS
from kubetrain.api.loader import load_jobs_from_yaml
from kubetrain.api.reading import decode_text
from kubetrain.commands.validate import describe
from tests.unit.api.mutations import SEEDS, mutated_jobs

#: At least this many mutated jobs per run (issue 15: 2,000 in CI time).
FUZZ_EXAMPLES = 2000
#: Longest one error line may be: every quoted part is capped.
MAX_ERROR_LINE = 1000


def _check_rejection(error: JobValidationError, *, paths_required: bool) -> None:
    assert error.errors, "a rejection lists at least one error"
    for field_error in error.errors:
        assert isinstance(field_error, FieldError)
        assert isinstance(field_error.path, str)
        if paths_required:
            assert field_error.path, f"no path in {field_error}"
        assert len(str(field_error)) <= MAX_ERROR_LINE, str(field_error)[:300]
    assert len(str(error)) <= (MAX_LISTED_ERRORS + 2) * MAX_ERROR_LINE


def outcome_of(doc: dict[str, Any]) -> str:
    """'accepted' or 'rejected', having checked what each promises."""
    try:
        job = load_job(doc)
    except JobValidationError as error:
        _check_rejection(error, paths_required=True)
        return "rejected"
    again = load_job(job.to_wire())
    assert again == job, "to_wire() did not load back to an equal job"
    assert apply_defaults(job).kind == job.kind
    assert describe(job)
    return "accepted"


def test_every_seed_is_accepted() -> None:
    # The unmutated seeds are valid jobs, upstream's examples included.
    assert len(SEEDS) >= 20
    assert {name: outcome_of(doc) for name, doc in SEEDS} == dict.fromkeys(
        (name for name, _ in SEEDS), "accepted"
    )


def test_mutated_jobs_are_accepted_and_reload_or_rejected_with_paths(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outcomes: Counter[str] = Counter()

    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(mutated_jobs())
    def check(doc: dict[str, Any]) -> None:
        outcomes[outcome_of(doc)] += 1

    check()
    total = sum(outcomes.values())
    with capsys.disabled():
        print(f"\nfuzz (mutated jobs through load_job): {total} examples, {dict(outcomes)}")
    assert total >= FUZZ_EXAMPLES
    # Both outcomes happen: the mutations neither all break nor all miss.
    assert outcomes["accepted"] > 0 and outcomes["rejected"] > 0


def _text_variants(text: str, rng: random.Random) -> list[bytes]:
    """Byte-level damage a file can have: duplicate keys, bad bytes, cut-off text,
    tabs, a deep flow nesting, an alias bomb, control characters."""
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    return [
        "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]]).encode(),
        text.encode()[: rng.randrange(1, len(text))],
        text.encode().replace(b"a", b"\xff", 1),
        text.replace("  ", "\t", 1).encode(),
        (text + "extra: " + "[" * 5000 + "]" * 5000 + "\n").encode(),
        (
            "a: &a [" + ",".join(["x" * 8] * 50) + "]\n"
            "b: &b [" + ",".join(["*a"] * 50) + "]\n"
            "c: [" + ",".join(["*b"] * 50) + "]\n" + text
        ).encode(),
        text.replace("\n", "\n\x07", 1).encode(),
        ("\ufeff" + text).encode(),
    ]


@settings(max_examples=150, deadline=None, database=None)
@given(mutated_jobs(), st.randoms(use_true_random=False))
def test_damaged_files_are_read_or_rejected_with_a_message(
    doc: dict[str, Any], rng: random.Random
) -> None:
    text = yaml.safe_dump(doc, sort_keys=False)
    for data in _text_variants(text, rng):
        try:
            results = list(load_jobs_from_yaml(decode_text(data, "job.yaml"), "job.yaml"))
        except JobValidationError as error:
            _check_rejection(error, paths_required=False)
            continue
        for _, result in results:
            if isinstance(result, JobValidationError):
                _check_rejection(result, paths_required=False)
            else:
                assert load_job(result.to_wire()) == result
