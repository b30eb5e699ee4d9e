"""Synthesizing one construct in a throwaway chart, for the job construct tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cdk8s
import constructs

from kubetrain.constructs.objects import manifests
from kubetrain.constructs.types import Image

TRAINER = Image("ghcr.io/kubetrain/pytorch-trainer:0.1.0")


def new_chart() -> cdk8s.Chart:
    """A throwaway chart, for a test that reads the construct it builds there."""
    return cdk8s.Chart(cdk8s.App(), "test", disable_resource_name_hashes=True)


def synth(build: Callable[[constructs.Construct], object]) -> list[dict[str, Any]]:
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "test", disable_resource_name_hashes=True)
    build(chart)
    return manifests(chart)
