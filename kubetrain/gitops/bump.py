"""``--bump``: move a stack to its next version, in its ``stacks/<name>.py``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from kubetrain.gitops.semver import Bump, Version
from kubetrain.gitops.stack import Stack


def stack_file(stack: Stack, package: str = "stacks") -> Path:
    """The module that defines ``stack``."""
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if name.startswith(f"{package}.") and getattr(module, "STACK", None) is stack:
            file = getattr(module, "__file__", None)
            if file:
                return Path(file)
    raise ValueError(f"cannot find the module defining stack {stack.name!r} under {package}/")


def bump_stack_file(path: Path, current: str, part: Bump) -> str:
    """Rewrite ``version="<current>"`` in ``path`` to the next version; return it."""
    new = str(Version.parse(current).bump(part))
    text = path.read_text()
    pattern = re.compile(r"""(\bversion\s*=\s*)(["'])""" + re.escape(current) + r"""\2""")
    matches = pattern.findall(text)
    if len(matches) != 1:
        raise ValueError(
            f'{path}: expected exactly one version="{current}" to bump, found {len(matches)}; '
            f'set version="{new}" by hand'
        )
    path.write_text(pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{new}{m.group(2)}", text))
    return new
