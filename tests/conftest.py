"""Project-wide test settings."""

from __future__ import annotations

import os
from pathlib import Path

# jsii (under cdk8s) prints a Node.js end-of-life banner unless told the major version.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples"
