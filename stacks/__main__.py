"""The cdk8s app: ``cdk8s synth`` runs ``python -m stacks``, which renders every stack into
``$CDK8S_OUTDIR`` (``dist`` when run by hand) exactly as ``kubetrain synth`` does."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kubetrain.cli import main

if __name__ == "__main__":
    out = os.environ.get("CDK8S_OUTDIR", "dist")
    root = Path(__file__).resolve().parent.parent
    sys.exit(main(["synth", "--out", out, "--root", str(root), *sys.argv[1:]]))
