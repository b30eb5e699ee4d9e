"""The import contract of the ``kubetrain`` package, checked by walking every module's
imports (``make lint`` runs ``python -m tests.layers``; a unit test runs it too).

Layers import downward only::

    api  <-  frameworks  <-  controller | local | constructs  <-  gitops  <-  commands  <-  cli

- ``api`` (the typed models, kinds table and wire keys) imports nothing of kubetrain's;
- ``frameworks`` imports only ``api``;
- ``controller`` (the operator) and ``local`` (``kubetrain run --local``) import ``api`` and
  ``frameworks``, never the generator (``constructs``, ``gitops``) or the commands;
- ``constructs`` import ``api``, ``frameworks``, and of the operator only the modules that
  define what its manifests render: its configuration and its RBAC rules;
- nothing but ``commands`` (and the command line itself) imports ``gitops`` or ``commands``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "kubetrain"

#: For each part of the package, the parts it may import (itself is always allowed).
#: ``kubetrain`` itself is the package root (its ``__version__``).
ALLOWED: dict[str, frozenset[str]] = {
    "kubetrain": frozenset(),
    "kubetrain.api": frozenset(),
    "kubetrain._jsii": frozenset(),
    "kubetrain.manifest": frozenset(),
    "kubetrain.frameworks": frozenset({"kubetrain.api"}),
    "kubetrain.node_tuner": frozenset({"kubetrain.api"}),
    "kubetrain.controller": frozenset({"kubetrain", "kubetrain.api", "kubetrain.frameworks"}),
    "kubetrain.local": frozenset(
        {
            "kubetrain.api",
            "kubetrain.frameworks",
            # The operator's progress server, which a local run serves too.
            "kubetrain.controller.status_auth",
            "kubetrain.controller.status_server",
            "kubetrain.controller.status_tls",
        }
    ),
    "kubetrain.constructs": frozenset(
        {
            "kubetrain",
            "kubetrain._jsii",
            "kubetrain.api",
            "kubetrain.frameworks",
            "kubetrain.manifest",
            "kubetrain.node_tuner",
            # What the operator's manifests render, and nothing else of the operator.
            "kubetrain.controller.config",
            "kubetrain.controller.rbac",
        }
    ),
    "kubetrain.gitops": frozenset(
        {
            "kubetrain",
            "kubetrain._jsii",
            "kubetrain.api",
            "kubetrain.frameworks",
            "kubetrain.constructs",
            "kubetrain.manifest",
            "kubetrain.controller.config",
        }
    ),
    "kubetrain.synth": frozenset({"kubetrain.gitops"}),
    "kubetrain.commands": frozenset(
        {
            "kubetrain",
            "kubetrain._jsii",
            "kubetrain.api",
            "kubetrain.frameworks",
            "kubetrain.controller",
            "kubetrain.local",
            "kubetrain.constructs",
            "kubetrain.gitops",
            "kubetrain.manifest",
        }
    ),
    "kubetrain.cli": frozenset({"kubetrain"}),
}


@dataclass(frozen=True)
class Violation:
    module: str
    line: int
    imported: str
    part: str

    def __str__(self) -> str:
        return (
            f"{self.module}:{self.line} imports {self.imported}, which {self.part} may not "
            "import (see tests/layers.py for the contract)"
        )


def part_of(module: str) -> str:
    """The part of the package a module belongs to (its row in :data:`ALLOWED`)."""
    names = module.split(".")
    for size in range(len(names), 0, -1):
        candidate = ".".join(names[:size])
        if candidate in ALLOWED:
            return candidate
    raise ValueError(f"module {module} is in no part of the import contract: add it to ALLOWED")


def _allowed(part: str, imported: str) -> bool:
    if imported == part or imported.startswith(part + "."):
        return True
    for allowed in ALLOWED[part]:
        # ``kubetrain`` alone allows the package root (``__version__``), not its parts.
        if imported == allowed or (allowed != "kubetrain" and imported.startswith(allowed + ".")):
            return True
    return False


def imports_of(source: str, module: str) -> Iterator[tuple[int, str]]:
    """Every ``kubetrain`` module ``source`` imports (``from kubetrain import x`` counts as
    importing ``kubetrain.x`` when ``x`` is a module, else ``kubetrain``)."""
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "kubetrain":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            if base.split(".")[0] != "kubetrain":
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield node.lineno, candidate if _is_module(candidate) else base


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def check_source(module: str, source: str) -> list[Violation]:
    """The contract violations of one module's source."""
    part = part_of(module)
    return [
        Violation(module, line, imported, part)
        for line, imported in imports_of(source, module)
        if not _allowed(part, imported)
    ]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def check_package(package: Path = PACKAGE) -> list[Violation]:
    """Every violation in the package."""
    found: list[Violation] = []
    for path in sorted(package.rglob("*.py")):
        found += check_source(module_name(path), path.read_text(encoding="utf-8"))
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Every module of the package and the ``kubetrain`` modules it imports."""
    graph: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        module = module_name(path)
        graph[module] = {imported for _, imported in imports_of(path.read_text("utf-8"), module)}
    return graph


def main() -> int:
    violations = check_package()
    for violation in violations:
        print(violation, file=sys.stderr)
    if violations:
        return 1
    print(f"import contract: {sum(1 for _ in PACKAGE.rglob('*.py'))} modules, no violation")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
