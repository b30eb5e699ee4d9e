"""Keep jsii's Node.js end-of-life banner out of the user's terminal.

jsii (under cdk8s) prints a large banner on every start when the machine's Node.js is
past end of life, unless ``JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION`` names the
running Node.js major version. Call :func:`quiet_jsii` before importing cdk8s.
"""

from __future__ import annotations

import os
import shutil
import subprocess

_VARIABLE = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"


def quiet_jsii() -> None:
    if os.environ.get(_VARIABLE):
        return
    node = shutil.which("node")
    if node is None:
        return  # jsii will report the missing Node.js itself
    try:
        version = subprocess.run(
            [node, "-p", "process.versions.node"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return
    major = version.split(".")[0]
    if major.isdigit():
        os.environ[_VARIABLE] = major
