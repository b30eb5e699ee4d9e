"""Snapshot of every generated CRD (the Kubeflow v1 kinds and Trainer v2's): any change to
the wire schema shows up in review."""

from __future__ import annotations

import pytest

from kubetrain.api import all_crds
from kubetrain.manifest import dump
from tests.snapshot import assert_snapshot

CRDS = {c["metadata"]["name"]: c for c in all_crds()}


@pytest.mark.parametrize("name", CRDS)
def test_crd_matches_snapshot(name: str) -> None:
    assert_snapshot(f"crds/{name}.yaml", dump(CRDS[name]))
