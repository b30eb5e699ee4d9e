"""Settings the example stacks share."""

from __future__ import annotations

from kubetrain import __version__
from kubetrain.constructs.types import Image

OPERATOR_IMAGE = Image(f"ghcr.io/kubetrain/operator:{__version__}")
NCCL_TESTS_IMAGE = Image(f"ghcr.io/kubetrain/nccl-tests:{__version__}")
