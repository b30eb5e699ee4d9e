"""Property tests for the Trainer v2 loader, as for the v1 jobs (test_fuzz.py): whatever
shape a TrainJob or runtime has, loading it is accepted (and ``to_wire()`` loads back to
an equal object, which ``kubetrain validate`` can describe) or rejected with every error
naming a path; no other exception. The seeds are upstream v2.3.0's manifests, the Kubeflow
SDK's TrainJobs and kubetrain's examples."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubetrain.api import JobValidationError
from kubetrain.api.trainer import load_trainer_object
from kubetrain.commands.validate import describe_trainer
from tests.builders.trainer import sdk_bodies, trainer_examples, upstream_documents
from tests.unit.api.mutations import OPERATIONS, mutate, node_paths
from tests.unit.api.test_fuzz import _check_rejection

SEEDS = [doc for _, doc in upstream_documents()]
SEEDS += list(sdk_bodies().values()) + [doc for _, doc in trainer_examples()]
FUZZ_EXAMPLES = 1500


@st.composite
def mutated_objects(draw: st.DrawFn, max_mutations: int = 3) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = node_paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        mutate(draw, doc, path, draw(st.sampled_from(OPERATIONS)), for_server=False)
    return doc


def outcome_of(doc: dict[str, Any]) -> str:
    try:
        loaded = load_trainer_object(doc)
    except JobValidationError as error:
        _check_rejection(error, paths_required=True)
        return "rejected"
    assert load_trainer_object(loaded.to_wire()) == loaded
    assert describe_trainer(loaded)
    return "accepted"


def test_mutated_trainer_objects_are_accepted_and_reload_or_rejected_with_paths(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outcomes: Counter[str] = Counter()

    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(mutated_objects())
    def check(doc: dict[str, Any]) -> None:
        outcomes[outcome_of(doc)] += 1

    check()
    total = sum(outcomes.values())
    with capsys.disabled():
        print(
            f"\nfuzz (mutated Trainer objects through load_trainer_object): {total} examples, "
            f"{dict(outcomes)}"
        )
    assert total >= FUZZ_EXAMPLES
    assert outcomes["accepted"] > 0 and outcomes["rejected"] > 0
