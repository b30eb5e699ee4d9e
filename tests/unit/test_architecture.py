"""The package's architecture, enforced: the import contract (``tests/layers.py``, also run
by ``make lint``), one home for the wire vocabulary (no kind, group, label or annotation
literal re-typed outside ``kubetrain/api/kinds.py`` and ``kubetrain/api/keys.py``), and
modules small enough to read, and the generator's packages free of import cycles."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.layers import PACKAGE, Violation, check_package, check_source, import_graph

GROUND_FLOOR = {PACKAGE / "api" / "kinds.py", PACKAGE / "api" / "keys.py"}
#: The wire vocabulary: groups and label/annotation key prefixes of Kubeflow, kubetrain,
#: Istio and NVIDIA, CRD plurals, and the job kinds as string literals.
WIRE_LITERAL = re.compile(
    r"""["'][^"'\n]*(?:kubeflow\.org|kubetrain\.dev/|sidecar\.istio\.io|nvidia\.com/gpu)"""
    r"""|["'](?:pytorchjobs|tfjobs|mpijobs|PyTorchJob|TFJob|MPIJob)["']"""
)
#: Where a literal is the definition itself: the typed models pin their apiVersion/kind
#: as pydantic ``Literal`` types, and ``__all__`` lists exported class names.
ALLOWED_LINE = re.compile(r"Literal\[|^\s*\"[A-Za-z]+\",\s*$")
MAX_MODULE_LINES = 450


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """Lines outside docstrings and comments."""
    out = []
    in_doc = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        quotes = stripped.count('"""')
        if in_doc:
            in_doc = quotes % 2 == 0
            continue
        if stripped.startswith('"""'):
            in_doc = quotes == 1
            continue
        if stripped.startswith("#"):
            continue
        out.append((number, line.split("  #")[0]))
    return out


def test_the_package_keeps_its_import_contract() -> None:
    assert check_package() == []


@pytest.mark.parametrize(
    ("module", "source", "imported"),
    [
        ("kubetrain.api.models", "from kubetrain.gitops import stack", "kubetrain.gitops.stack"),
        ("kubetrain.api.models", "import kubetrain.controller.kube", "kubetrain.controller.kube"),
        (
            "kubetrain.frameworks.jax",
            "from kubetrain.controller import reasons",
            "kubetrain.controller.reasons",
        ),
        (
            "kubetrain.controller.planner",
            "from kubetrain.constructs.mpi_job import MPIJob",
            "kubetrain.constructs.mpi_job",
        ),
        ("kubetrain.controller.planner", "from ..gitops import render", "kubetrain.gitops.render"),
        (
            "kubetrain.constructs.mpi_job",
            "from kubetrain.controller.plugins import registry",
            "kubetrain.controller.plugins.registry",
        ),
        (
            "kubetrain.gitops.render",
            "from kubetrain.commands import synth",
            "kubetrain.commands.synth",
        ),
        (
            "kubetrain.local.plan",
            "from kubetrain.controller import podstate",
            "kubetrain.controller.podstate",
        ),
    ],
    ids=[
        "api-up-to-gitops",
        "api-up-to-controller",
        "frameworks-up-to-controller",
        "controller-to-generator",
        "relative-import-upward",
        "constructs-to-operator-plugins",
        "gitops-up-to-commands",
        "local-to-controller",
    ],
)
def test_rejects_an_upward_import(module: str, source: str, imported: str) -> None:
    (violation,) = check_source(module, source)
    assert isinstance(violation, Violation)
    assert violation.imported == imported
    assert f"{module}:1 imports {imported}" in str(violation)


def test_allows_the_imports_the_contract_names() -> None:
    assert (
        check_source("kubetrain.constructs.operator", "from kubetrain.controller import rbac") == []
    )
    assert check_source("kubetrain.frameworks.mpi", "from kubetrain.api.kinds import MPI") == []
    assert check_source("kubetrain.commands.synth", "from kubetrain.gitops import render") == []


def test_the_wire_vocabulary_is_stated_once() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in GROUND_FLOOR:
            continue
        for number, line in _code_lines(path):
            if WIRE_LITERAL.search(line) and not ALLOWED_LINE.search(line):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert found == [], "wire literals outside kubetrain/api/{kinds,keys}.py:\n" + "\n".join(found)


def test_modules_stay_small() -> None:
    large = {
        str(path.relative_to(PACKAGE.parent)): count
        for path in PACKAGE.rglob("*.py")
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert large == {}, f"modules over {MAX_MODULE_LINES} lines: {large}"


def _cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """An import path from ``start`` back to itself, if there is one."""
    paths = [[start]]
    seen: set[str] = set()
    while paths:
        path = paths.pop()
        for imported in sorted(graph.get(path[-1], ())):
            if imported == start:
                return [*path, start]
            if imported not in seen:
                seen.add(imported)
                paths.append([*path, imported])
    return None


@pytest.mark.parametrize("part", ["kubetrain.constructs", "kubetrain.gitops"])
def test_the_generator_has_no_import_cycle(part: str) -> None:
    """A module that needs the one importing it takes what it needs as values instead
    (the NCCL fabric modules return fields that ``profile.py`` builds the profile from; the
    operator's access constructs take their inputs as props, not the operator)."""
    graph = import_graph()
    cycles = [
        " -> ".join(cycle)
        for module in sorted(graph)
        if module.startswith(part) and (cycle := _cycle_through(graph, module))
    ]
    assert cycles == []


def test_finds_an_import_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle_through(graph, "a") == ["a", "b", "c", "a"]
    assert _cycle_through(graph, "d") is None
