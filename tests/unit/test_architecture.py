"""The package's architecture, enforced: the import contract (``tests/layers.py``, also run
by ``make lint``), one home for the wire vocabulary (no kind, group, label or annotation
literal re-typed outside ``kubetrain/api/kinds.py`` and ``kubetrain/api/keys.py``), and
modules small enough to read."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from kubetrain.api.kinds import V1_KINDS
from tests.layers import (
    CONTROLLER_LAYERS,
    PACKAGE,
    Violation,
    check_controller_source,
    check_package,
    check_source,
    controller_layer,
    find_cycles,
    import_graph,
    main,
    package_sources,
)

#: The kinds table, the keys, and the modules of the v1 kinds (each states its own row).
GROUND_FLOOR = {
    PACKAGE / "api" / "kinds.py",
    PACKAGE / "api" / "keys.py",
    PACKAGE / "api" / "kind_info.py",
    *(Path(inspect.getfile(kind.model)) for kind in V1_KINDS),
}
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


def test_the_operator_keeps_its_layers_and_the_package_has_no_import_cycle(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sources = package_sources()
    assert [v for m, src in sources.items() for v in check_controller_source(m, src)] == []
    assert find_cycles(import_graph(sources)) == []
    assert main() == 0
    assert "no import cycle" in capsys.readouterr().out


def test_every_operator_module_is_in_one_layer() -> None:
    modules = [m for m in package_sources() if m.split(".")[:2] == ["kubetrain", "controller"]]
    layers = {m: controller_layer(m) for m in modules}  # raises for a module in none
    assert {CONTROLLER_LAYERS[i][0] for i in layers.values()} == {n for n, _ in CONTROLLER_LAYERS}
    names = [name for _layer, members in CONTROLLER_LAYERS for name in members]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    ("module", "source", "imported"),
    [
        (
            "kubetrain.controller.model",
            "from kubetrain.controller.policies.restart import evaluate",
            "kubetrain.controller.policies.restart",
        ),
        (
            "kubetrain.controller.policies.progress",
            "from kubetrain.controller.desired import decide",
            "kubetrain.controller.desired",
        ),
        (
            "kubetrain.controller.policies.cleanup",
            "from kubetrain.controller.plugins.base import JobPlugin",
            "kubetrain.controller.plugins.base",
        ),
        (
            "kubetrain.controller.plugins.mpi_plugin",
            "from kubetrain.controller import draft",
            "kubetrain.controller.draft",
        ),
        (
            "kubetrain.controller.conditions",
            "def f():\n    from kubetrain.controller.model import Observed",
            "kubetrain.controller.model",
        ),
        (
            "kubetrain.controller.draft",
            "import kubetrain.controller.reconciler",
            "kubetrain.controller.reconciler",
        ),
    ],
    ids=[
        "model-up-to-policies",
        "policy-up-to-planning",
        "policy-up-to-plugins",
        "plugin-up-to-draft",
        "foundation-up-to-model-in-a-function",
        "draft-up-to-runtime",
    ],
)
def test_rejects_an_import_above_the_operators_layer(
    module: str, source: str, imported: str
) -> None:
    (violation,) = check_controller_source(module, source)
    assert violation.imported == imported
    assert "the operator's" in str(violation)


def test_a_type_only_import_is_no_layer_violation() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from kubetrain.controller.model import Observed\n"
        "if TYPE_CHECKING:\n"
        "    from kubetrain.controller.draft import Draft\n"
    )
    assert check_controller_source("kubetrain.controller.policies.cleanup", source) == []
    assert check_controller_source("kubetrain.frameworks.mpi", "import kubetrain.api") == []


def test_finds_a_planted_import_cycle() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}) == [
        ["a", "b", "c", "a"]
    ]
    assert find_cycles({"a": {"a"}, "b": set()}) == [["a", "a"]]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_finds_a_cycle_through_module_level_imports_only() -> None:
    model, draft = "kubetrain.controller.model", "kubetrain.controller.draft"
    policy = "kubetrain.controller.policies.finish"
    planted = {
        model: "from kubetrain.controller.policies import finish\n",
        policy: "from kubetrain.controller import draft\n",
        draft: "from kubetrain.controller.model import Observed\n",
    }
    assert find_cycles(import_graph(planted)) == [[draft, model, policy, draft]]
    # The same imports read by the type checker only, or run when a function is called,
    # close no cycle.
    planted[policy] = "if TYPE_CHECKING:\n    from kubetrain.controller import draft\n"
    assert find_cycles(import_graph(planted)) == []
    planted[policy] = "def f():\n    from kubetrain.controller import draft\n"
    assert find_cycles(import_graph(planted)) == []


def test_the_wire_vocabulary_is_stated_once() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in GROUND_FLOOR:
            continue
        for number, line in _code_lines(path):
            if WIRE_LITERAL.search(line) and not ALLOWED_LINE.search(line):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert found == [], "wire literals outside the kinds table and keys:\n" + "\n".join(found)


def test_modules_stay_small() -> None:
    large = {
        str(path.relative_to(PACKAGE.parent)): count
        for path in PACKAGE.rglob("*.py")
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert large == {}, f"modules over {MAX_MODULE_LINES} lines: {large}"
