"""The package's architecture, enforced: the import contract (``[tool.importlinter]`` in
``pyproject.toml``, which ``make lint`` checks with ``lint-imports``; here the same contracts
meet planted imports, so each is shown to fail), one home for the wire vocabulary (no kind,
group, label or annotation literal re-typed outside ``kubetrain/api/kinds.py`` and
``kubetrain/api/keys.py``) and for the training environment's names
(``kubetrain/api/env_names.py``), and modules small enough to read."""

from __future__ import annotations

import copy
import functools
import inspect
import re
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter.api import read_configuration
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.layers import LayersContract
from importlinter.contracts.protected import ProtectedContract
from importlinter.domain.contract import Contract

import kubetrain
from kubetrain.api import env_names
from kubetrain.api.kinds import V1_KINDS

PACKAGE = Path(kubetrain.__file__).resolve().parent
ROOT = PACKAGE.parent

# -- the import contract ------------------------------------------------------------------

CONFIG: dict[str, Any] = read_configuration(str(ROOT / "pyproject.toml"))
CONTRACT_TYPES: dict[str, type[Contract]] = {
    "protected": ProtectedContract,
    "layers": LayersContract,
    "acyclic_siblings": AcyclicSiblingsContract,
}
#: The imports the operator's layers and the cycle contract let pass as type-only.
POLICY_NAMES_DRAFT = "kubetrain.controller.policies.** -> kubetrain.controller.draft"


@functools.cache
def _graph(*, type_checking: bool = True) -> grimp.ImportGraph:
    """The package's import graph (those under ``if TYPE_CHECKING:`` too, as lint-imports
    reads it, unless ``type_checking`` is false)."""
    return grimp.build_graph(
        "kubetrain", exclude_type_checking_imports=not type_checking, cache_dir=None
    )


def _contract(options: dict[str, Any]) -> Contract:
    return CONTRACT_TYPES[options["type"]](options["name"], CONFIG["session_options"], options)


def broken_contracts(graph: grimp.ImportGraph) -> list[str]:
    """The ids of the configured contracts ``graph`` breaks."""
    return [
        options["id"]
        for options in CONFIG["contracts_options"]
        if not _contract(options).check(copy.deepcopy(graph), verbose=False).kept
    ]


def planted(*imports: tuple[str, str]) -> grimp.ImportGraph:
    """The package's graph with ``(importer, imported)`` imports added."""
    graph = copy.deepcopy(_graph())
    for importer, imported in imports:
        graph.add_import(
            importer=importer, imported=imported, line_number=1, line_contents=f"import {imported}"
        )
    return graph


def test_the_package_keeps_its_import_contract() -> None:
    assert broken_contracts(_graph()) == []


@pytest.mark.parametrize(
    ("importer", "imported", "broken"),
    [
        ("kubetrain.api.common", "kubetrain.gitops.stack", ["gitops", "acyclic"]),
        # The operator's lower layers read the API, so this also leads them up to `kube`.
        (
            "kubetrain.api.common",
            "kubetrain.controller.kube",
            ["controller", "operator-layers", "acyclic"],
        ),
        ("kubetrain.frameworks.jax", "kubetrain.controller.reasons", ["controller", "acyclic"]),
        # The constructs render the operator's config, so this is a cycle too.
        ("kubetrain.controller.planner", "kubetrain.constructs.mpi_job", ["constructs", "acyclic"]),
        ("kubetrain.controller.planner", "kubetrain.node_tuner", ["node-tuner"]),
        ("kubetrain.constructs.mpi_job", "kubetrain.controller.plugins.registry", ["controller"]),
        ("kubetrain.gitops.render", "kubetrain.commands.synth", ["entry-points", "acyclic"]),
        ("kubetrain.gitops.render", "kubetrain.local", ["local"]),
        ("kubetrain.local.plan", "kubetrain.controller.podstate", ["controller"]),
        ("kubetrain.api", "kubetrain.frameworks", ["frameworks", "acyclic"]),
        ("kubetrain.synth", "kubetrain", ["root"]),
    ],
    ids=[
        "api-up-to-gitops",
        "api-up-to-controller",
        "frameworks-up-to-controller",
        "controller-to-generator",
        "controller-to-node-tuner",
        "constructs-to-operator-plugins",
        "gitops-up-to-commands",
        "gitops-to-local-runner",
        "local-to-controller",
        "package-init-upward",
        "synth-to-root",
    ],
)
def test_rejects_an_import_the_contract_does_not_name(
    importer: str, imported: str, broken: list[str]
) -> None:
    assert broken_contracts(planted((importer, imported))) == broken


def test_allows_the_imports_the_contract_names() -> None:
    graph = planted(
        ("kubetrain.constructs.operator", "kubetrain.controller.rbac"),
        ("kubetrain.gitops.render", "kubetrain.controller.config"),
        ("kubetrain.local.plan", "kubetrain.controller.status_server"),
        ("kubetrain.frameworks.mpi", "kubetrain.api.kinds"),
        ("kubetrain.commands.synth", "kubetrain.gitops.render"),
        ("kubetrain.controller.metrics", "kubetrain"),
    )
    assert broken_contracts(graph) == []


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("kubetrain.controller.model", "kubetrain.controller.policies.restart"),
        ("kubetrain.controller.policies.progress", "kubetrain.controller.desired"),
        ("kubetrain.controller.policies.cleanup", "kubetrain.controller.plugins.base"),
        ("kubetrain.controller.plugins.mpi_plugin", "kubetrain.controller.draft"),
        ("kubetrain.controller.conditions", "kubetrain.controller.model"),
        ("kubetrain.controller.draft", "kubetrain.controller.reconciler"),
    ],
    ids=[
        "model-up-to-policies",
        "policy-up-to-planning",
        "policy-up-to-plugins",
        "plugin-up-to-draft",
        "foundation-up-to-model",
        "draft-up-to-runtime",
    ],
)
def test_rejects_an_import_above_the_operators_layer(importer: str, imported: str) -> None:
    assert "operator-layers" in broken_contracts(planted((importer, imported)))


def test_rejects_an_operator_module_in_no_layer() -> None:
    graph = copy.deepcopy(_graph())
    graph.add_module("kubetrain.controller.unlayered")
    assert broken_contracts(graph) == ["operator-layers"]


def test_the_policies_name_the_draft_for_the_type_checker_only() -> None:
    """The one import both contracts let pass (a policy reads the Draft it is handed) is
    real, and gone from the graph Python runs."""
    assert _graph().find_matching_direct_imports(POLICY_NAMES_DRAFT)
    assert _graph(type_checking=False).find_matching_direct_imports(POLICY_NAMES_DRAFT) == []


@pytest.mark.parametrize(
    "imports",
    [
        [("kubetrain.controller.policies.restart", "kubetrain.controller.policies.failure")],
        # Importing a module of the trainer package runs its __init__, which imports the
        # modules that import the kinds table back.
        [("kubetrain.api.kinds", "kubetrain.api.trainer.constants")],
    ],
    ids=["between-modules", "through-a-package"],
)
def test_rejects_an_import_cycle(imports: list[tuple[str, str]]) -> None:
    assert broken_contracts(planted(*imports)) == ["acyclic"]


def test_an_import_inside_a_function_closes_a_cycle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``restart`` and ``batch_restart`` did: one module imports the other at module
    level, the other imports it back inside a function."""
    package = tmp_path / "cyclic_fixture"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "batch.py").write_text("from cyclic_fixture.single import evaluate\n")
    (package / "single.py").write_text(
        textwrap.dedent(
            """
            def evaluate() -> None: ...

            def decide() -> None:
                from cyclic_fixture.batch import evaluate
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("cyclic_fixture", cache_dir=None)
    (options,) = [o for o in CONFIG["contracts_options"] if o["id"] == "acyclic"]
    contract = _contract({**options, "ancestors": ["cyclic_fixture"], "ignore_imports": []})
    assert not contract.check(graph, verbose=False).kept
    (package / "single.py").write_text("def evaluate() -> None: ...\n")
    graph = grimp.build_graph("cyclic_fixture", cache_dir=None)
    assert contract.check(graph, verbose=False).kept


def module_cycles(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """Each import from a module whose imports lead back to it."""
    return sorted(
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if graph.chain_exists(importer=imported, imported=importer)
    )


def test_no_module_is_part_of_an_import_cycle() -> None:
    """The cycle contract compares a package's children, so it cannot see a module that
    imports a name its own package's ``__init__`` re-exports from it; here every module
    is held to no cycle with the imports Python runs (those in functions included)."""
    assert module_cycles(_graph(type_checking=False)) == []


def test_finds_a_cycle_through_a_package_init() -> None:
    graph = copy.deepcopy(_graph())
    graph.add_import(
        importer="kubetrain.local.plan",
        imported="kubetrain.local",
        line_number=1,
        line_contents="from kubetrain.local import execute",
    )
    assert ("kubetrain.local.plan", "kubetrain.local") in module_cycles(graph)
    assert broken_contracts(graph) == []


# -- one home for the wire vocabulary and the training environment --------------------------

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

#: The training environment's names: every one that module states, and those of the
#: families it holds even before it names them (torchrun's, Open MPI's, Intel MPI's, MPICH's,
#: the DMLC tracker's, JAX's, Paddle's, the Kubeflow SDK's progress server's).
ENV_HOME = Path(inspect.getfile(env_names))
ENV_NAMES = frozenset(
    value for name, value in vars(env_names).items() if name.isupper() and isinstance(value, str)
)
ENV_FAMILY = re.compile(r"(?:PET|OMPI_MCA|I_MPI|HYDRA|DMLC|JAX|PADDLE|KUBEFLOW_TRAINER)_\w+")
STRING_LITERAL = re.compile(r"""(["'])(\w+)\1""")
#: The frameworks' helpers that write a variable: each is handed a name from the home.
ENV_HELPER_WITH_LITERAL = re.compile(r"""\b(?:env_var|index_env)\(\s*[rbuf]*["']""")
#: Started by torchrun as a script, it imports nothing of kubetrain (its docs say why) and
#: reads what torchrun gives each process.
ENV_STANDALONE = {PACKAGE / "local" / "rank_main.py"}


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """Lines outside docstrings and comments."""
    return _code_of(path.read_text(encoding="utf-8").splitlines())


def _code_of(lines: Iterable[str]) -> list[tuple[int, str]]:
    out = []
    in_doc = False
    for number, line in enumerate(lines, 1):
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


def env_names_written(lines: Iterable[str]) -> list[tuple[int, str]]:
    """Each ``(line, name)`` where code writes a name of the training environment as a
    literal (a helper handed a literal name reads as ``env_var(...)``)."""
    found = []
    for number, line in _code_of(lines):
        found += [
            (number, match.group(2))
            for match in STRING_LITERAL.finditer(line)
            if match.group(2) in ENV_NAMES or ENV_FAMILY.fullmatch(match.group(2))
        ]
        if ENV_HELPER_WITH_LITERAL.search(line):
            found.append((number, "env_var(...)"))
    return found


def test_the_training_environment_is_named_in_one_home() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == ENV_HOME or path in ENV_STANDALONE:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        found += [f"{path.relative_to(ROOT)}:{n}: {name}" for n, name in env_names_written(lines)]
    assert found == [], "environment names outside kubetrain/api/env_names.py:\n" + "\n".join(found)


def test_finds_an_environment_name_written_again() -> None:
    source = '''
        env = [env_var("PET_NNODES", nodes), env_var(E.PET_NODE_RANK, rank)]
        env.append({"name": 'COORDINATOR_ADDRESS', "value": host})
        env.append(env_var(LOCAL_NAME, 1))
        extra = {"PET_NEW_OPTION": "1", "OMPI_MCA_btl": "^openib", "NCCL_DEBUG": "WARN"}
        message = f"{E.TF_CONFIG} is set"
        # "TF_CONFIG" in a comment is prose
        """As "TF_CONFIG" in a docstring."""
    '''
    assert env_names_written(textwrap.dedent(source).splitlines()) == [
        (2, "PET_NNODES"),
        (2, "env_var(...)"),
        (3, "COORDINATOR_ADDRESS"),
        (5, "PET_NEW_OPTION"),
        (5, "OMPI_MCA_btl"),
    ]


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
