"""Running Kubeflow's SDKs, unmodified, in their own virtualenv (``make sdk-venv``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def sdk_python() -> str:
    """The SDK virtualenv's interpreter (``KUBETRAIN_SDK_PYTHON``, set by make)."""
    python = os.environ.get("KUBETRAIN_SDK_PYTHON") or str(ROOT / ".venv-sdk/bin/python")
    if not Path(python).exists():
        raise AssertionError(f"the SDK virtualenv is missing ({python}): run `make sdk-venv`")
    return python


def run_sdk(
    module: str, *args: str, timeout: float = 120.0, env: Mapping[str, str] | None = None
) -> Any:
    """Run ``python -m tests.sdk.<module> args...`` with the SDKs (``env`` added to this
    process's environment); its JSON output."""
    done = subprocess.run(
        [sdk_python(), "-m", f"tests.sdk.{module}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise AssertionError(
            f"tests.sdk.{module} {' '.join(args)} exited with {done.returncode}: "
            f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ''}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])
