from __future__ import annotations

import pytest

from kubetrain.controller.policies import managed_by


@pytest.mark.parametrize(
    ("value", "ours"),
    [
        pytest.param(None, True, id="absent"),
        pytest.param("", True, id="empty"),
        pytest.param("kubetrain.dev/operator", True, id="kubetrain"),
        pytest.param("kubeflow.org/training-operator", True, id="upstream-training-operator"),
        pytest.param("kubeflow.org/mpi-operator", True, id="upstream-mpi-operator"),
        pytest.param("kueue.x-k8s.io/multikueue", False, id="multikueue"),
        pytest.param("example.com/other", False, id="other"),
    ],
)
def test_is_ours(value: str | None, ours: bool) -> None:
    raw: dict[str, object] = {
        "spec": {"runPolicy": {"managedBy": value} if value is not None else {}}
    }
    assert managed_by.is_ours(raw) is ours


def test_is_read_from_an_otherwise_invalid_job() -> None:
    raw = {"spec": {"runPolicy": {"managedBy": "example.com/other", "backoffLimit": "many"}}}
    assert not managed_by.is_ours(raw)
    assert managed_by.is_ours({"spec": "not a mapping"})
