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

Inside the operator (``kubetrain.controller``) the layers are, lowest first::

    foundation  <-  model  <-  policies  <-  plugins  <-  planning  <-  runtime

- ``foundation``: the vocabulary every layer shares and that decides nothing about a job
  (reasons, conditions, pod state, ownership, the gang scheduler's objects, the
  operator's configuration and RBAC, SSH keys, rate limits, the work queue);
- ``model`` (``model``, ``decisions``): the plain values the draft, the policies and the
  plugins pass between them, and the :class:`Decision` a policy returns;
- ``policies``: one concern each (startup, restart, success, cleanup, deadlines, finish...);
- ``plugins``: one per job kind; they answer a job's success rule through
  ``policies/success`` and build children behind the gate ``policies/startup`` computed;
- ``planning`` (``draft``, ``desired``, ``planner``): a reconcile's plan, asking the
  policies in order and the plugin for the children;
- ``runtime``: the Kubernetes adapter, informers, reconciler, metrics, progress server and
  ``operator``, the process itself.

A controller module imports modules of its own layer or below. Only imports that run
count: a policy names the ``Draft`` it reads in an ``if TYPE_CHECKING:`` block, which the
type checker reads and Python never executes. And no module of ``kubetrain`` is part of
an import cycle (module-level imports, ``if TYPE_CHECKING:`` blocks aside): a cycle makes
what a module sees at import time depend on which module was imported first.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator, Mapping
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
    for node in ast.walk(ast.parse(source)):
        yield from _named(node, module)


def _named(node: ast.AST, module: str) -> Iterator[tuple[int, str]]:
    """The ``kubetrain`` modules one statement imports (none when it is no import)."""
    package = module.rsplit(".", 1)[0]
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
            return
        for alias in node.names:
            candidate = f"{base}.{alias.name}"
            yield node.lineno, candidate if _is_module(candidate) else base


def _type_checking(node: ast.stmt) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): read by the type checker only."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name == "TYPE_CHECKING"


def runtime_imports(
    source: str, module: str, *, module_level: bool = False
) -> Iterator[tuple[int, str]]:
    """The ``kubetrain`` modules ``source`` imports when it runs: ``if TYPE_CHECKING:``
    blocks aside, and with ``module_level`` only those importing the module runs (not
    the ones inside functions, which run when called)."""

    def walk(statements: Iterable[ast.AST]) -> Iterator[tuple[int, str]]:
        for node in statements:
            if isinstance(node, ast.stmt) and _type_checking(node):
                assert isinstance(node, ast.If)
                yield from walk(node.orelse)
                continue
            if module_level and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            yield from _named(node, module)
            yield from walk(ast.iter_child_nodes(node))

    yield from walk(ast.parse(source).body)


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


# -- the operator's layers ----------------------------------------------------------------

#: The layers of ``kubetrain.controller``, lowest first (see the module docs): each names
#: its modules relative to ``kubetrain.controller``, a package standing for every module in
#: it. Every module of the operator is in exactly one.
CONTROLLER_LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "foundation",
        frozenset(
            {
                "",  # the package itself
                "conditions",
                "config",
                "credentials",
                "errors",
                "gang",
                "health",
                "logs",
                "ownership",
                "podstate",
                "ratelimit",
                "rbac",
                "reasons",
                "sshkeys",
                "trim",
                "workqueue",
            }
        ),
    ),
    ("model", frozenset({"model", "decisions"})),
    ("policies", frozenset({"policies"})),
    ("plugins", frozenset({"plugins"})),
    ("planning", frozenset({"draft", "desired", "planner"})),
    (
        "runtime",
        frozenset(
            {
                "child_events",
                "cluster_state",
                "events",
                "informer",
                "job_metrics",
                "kube",
                "leader",
                "metrics",
                "operator",
                "ports",
                "reconciler",
                "runtimes",
                "status_auth",
                "status_kube",
                "status_server",
                "status_tls",
            }
        ),
    ),
)
CONTROLLER = "kubetrain.controller"


def controller_layer(module: str) -> int:
    """The index in :data:`CONTROLLER_LAYERS` of an operator module's layer."""
    relative = module.removeprefix(CONTROLLER).removeprefix(".")
    names = relative.split(".") if relative else [""]
    for size in range(len(names), 0, -1):
        candidate = ".".join(names[:size])
        for index, (_name, members) in enumerate(CONTROLLER_LAYERS):
            if candidate in members:
                return index
    raise ValueError(f"module {module} is in no layer of the operator: add it to CONTROLLER_LAYERS")


def check_controller_source(module: str, source: str) -> list[Violation]:
    """The imports of an operator module that reach above its layer (none for a module
    outside ``kubetrain.controller``)."""
    if module != CONTROLLER and not module.startswith(CONTROLLER + "."):
        return []
    layer = controller_layer(module)
    name = CONTROLLER_LAYERS[layer][0]
    return [
        Violation(module, line, imported, f"the operator's {name} layer")
        for line, imported in runtime_imports(source, module)
        if (imported == CONTROLLER or imported.startswith(CONTROLLER + "."))
        and controller_layer(imported) > layer
    ]


# -- import cycles --------------------------------------------------------------------------


def import_graph(sources: Mapping[str, str]) -> dict[str, set[str]]:
    """Module -> the modules of ``sources`` it imports at module level."""
    return {
        module: {imported for _line, imported in runtime_imports(source, module, module_level=True)}
        & sources.keys() - {module}
        for module, source in sources.items()
    }


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per group of modules that import one another,
    found by Tarjan's strongly connected components; sorted, so the report is stable."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(_cycle_in(graph, group) for group in groups)


def _cycle_in(graph: Mapping[str, Iterable[str]], group: set[str]) -> list[str]:
    """A shortest cycle through the first module of ``group`` (breadth first)."""
    start = min(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph.get(node, ())):
            if target == start:
                return [*paths[node], start]
            if target in group and target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    raise AssertionError(f"no cycle through {start}")  # a strongly connected group has one


def package_sources(package: Path = PACKAGE) -> dict[str, str]:
    """Every module of the package, by name."""
    return {
        module_name(path): path.read_text(encoding="utf-8")
        for path in sorted(package.rglob("*.py"))
    }


def main() -> int:
    sources = package_sources()
    violations = check_package()
    violations += [v for m, s in sources.items() for v in check_controller_source(m, s)]
    cycles = find_cycles(import_graph(sources))
    for violation in violations:
        print(violation, file=sys.stderr)
    for cycle in cycles:
        print(f"import cycle: {' -> '.join(cycle)}", file=sys.stderr)
    if violations or cycles:
        return 1
    print(
        f"import contract: {len(sources)} modules, no violation, the operator's "
        f"{len(CONTROLLER_LAYERS)} layers kept, no import cycle"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
