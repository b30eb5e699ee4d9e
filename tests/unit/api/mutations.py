"""Hostile variations of real job manifests, for the fuzz test (every input ends accepted
or rejected with paths) and the parity test (``validate`` agrees with the API server).

The seeds are the jobs users start from: kubetrain's examples and sample jobs, and
upstream's own example manifests (tests/data/upstream). A mutation picks a node anywhere
in the document and deletes it, nulls it, swaps its type, puts a huge or odd number or
unicode text there, nests it deeply, renames its key (snake_case, other letter case,
unknown names) or duplicates a list item (colliding list-map keys).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from kubetrain.manifest import parse_yaml_all
from tests.conftest import EXAMPLES, REPO_ROOT

UPSTREAM = REPO_ROOT / "tests" / "data" / "upstream"
JOB_KINDS = ("PyTorchJob", "TFJob", "MPIJob", "JAXJob", "XGBoostJob")
Path_ = tuple[str | int, ...]


def _load(path: Path) -> list[dict[str, Any]]:
    docs = parse_yaml_all(path.read_text())
    return [d for d in docs if isinstance(d, dict) and d.get("kind") in JOB_KINDS]


def seed_files() -> list[Path]:
    """Every manifest the fuzzers start from."""
    files = [
        *sorted(EXAMPLES.glob("*.yaml")),
        *sorted(REPO_ROOT.glob("images/*/*job.yaml")),
        *sorted(UPSTREAM.rglob("*.yaml")),
    ]
    return [f for f in files if _load(f)]


SEEDS: list[tuple[str, dict[str, Any]]] = [
    (f"{path.relative_to(REPO_ROOT)}#{i}", doc)
    for path in seed_files()
    for i, doc in enumerate(_load(path))
]


def node_paths(doc: Any) -> list[Path_]:
    """Paths of every node below the root, in document order (iterative)."""
    out: list[Path_] = []
    pending: list[tuple[Any, Path_]] = [(doc, ())]
    while pending:
        node, path = pending.pop()
        if path:
            out.append(path)
        if isinstance(node, dict):
            pending.extend((v, (*path, k)) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            pending.extend((v, (*path, i)) for i, v in reversed(list(enumerate(node))))
    return out


def _parent(doc: Any, path: Path_) -> Any:
    node = doc
    for part in path[:-1]:
        node = node[part]
    return node


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


# Values that sit at the API server's boundaries: int32 and int64 limits, 2**53, floats it
# does not take for integers, quantities, the replica types and restart policies.
_EDGE_INTS = [0, 1, -1, 2, 1000, 1001, 2001, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**63 - 1]
_EDGE_STRINGS = [
    "",
    " ",
    "Worker",
    "worker",
    "Launcher",
    "ps",
    "ExitCode",
    "Always",
    "OnFailure",
    "1e308",
    "0.5",
    "500m",
    "16Gi",
    "1Gi\n",
    "kueue.x-k8s.io/multikueue",
    "kubeflow.org/mpi-operator",
    "someone/else",
    "pytorch",
    "tensorflow",
    "a b",
    "\u00e9t\u00e9-\u4e2d\u6587",
]
_SERVER_FLOATS = [0.5, -2.5, 3.25, 1e308, -1e300, 1e-9]


def scalars(*, for_server: bool) -> st.SearchStrategy[Any]:
    """Replacement values. ``for_server`` keeps to what a JSON client can send and what
    kubetrain is documented to judge like the server (no NaN or infinity, no lone
    surrogates, no whole floats: see the parity test); otherwise anything goes."""
    if for_server:
        text = st.text(
            st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=12
        )
        floats: st.SearchStrategy[Any] = st.sampled_from(_SERVER_FLOATS)
        ints = st.one_of(st.integers(-3, 70), st.sampled_from(_EDGE_INTS))
    else:
        text = st.text(max_size=12)
        floats = st.one_of(st.floats(), st.sampled_from([*_SERVER_FLOATS, 2.0, 1e20]))
        ints = st.one_of(
            st.integers(-3, 70), st.sampled_from([*_EDGE_INTS, 2**64, -(2**63) - 1, 10**30])
        )
    return st.one_of(
        st.none(),
        st.booleans(),
        ints,
        floats,
        text,
        st.sampled_from(_EDGE_STRINGS),
        st.sampled_from([{}, [], {"x": 1}, [1], ["a"], {"name": "x"}]),
    )


OPERATIONS = (
    "delete",
    "null",
    "replace",
    "replace",
    "nest",
    "rename",
    "duplicate",
    "add-key",
)


@st.composite
def mutated_jobs(
    draw: st.DrawFn, *, for_server: bool = False, max_mutations: int = 3
) -> dict[str, Any]:
    """A seed job with 1 to ``max_mutations`` mutations."""
    _, seed = draw(st.sampled_from(SEEDS))
    doc: dict[str, Any] = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = node_paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        mutate(draw, doc, path, draw(st.sampled_from(OPERATIONS)), for_server=for_server)
    return doc


def mutate(draw: st.DrawFn, doc: Any, path: Path_, operation: str, *, for_server: bool) -> None:
    """Apply one mutation at ``path`` (in place)."""
    parent, last = _parent(doc, path), path[-1]
    if operation == "delete":
        del parent[last]
    elif operation == "null":
        parent[last] = None
    elif operation == "replace":
        parent[last] = draw(scalars(for_server=for_server))
    elif operation == "nest":
        depth = draw(st.sampled_from([1, 2, 15, 63, 64, 65, 300]))
        value = parent[last]
        for _ in range(depth):
            value = [value] if draw(st.booleans()) else {"x": value}
        parent[last] = value
    elif operation == "rename" and isinstance(last, str):
        new = draw(
            st.sampled_from(
                [_snake(last), last.lower(), last.upper(), last + "s", last[:-1] or "x"]
            )
            | st.text(min_size=1, max_size=8)
        )
        if new not in parent:
            parent[new] = parent.pop(last)
    elif operation == "duplicate" and isinstance(parent, list) and isinstance(last, int):
        parent.append(copy.deepcopy(parent[last]))
    elif operation == "add-key" and isinstance(parent[last], dict):
        key = draw(st.sampled_from(["replicas", "restartPolicy", "name", "image", "unknownField"]))
        parent[last][key] = draw(scalars(for_server=for_server))
    elif operation in ("rename", "duplicate", "add-key"):
        parent[last] = draw(scalars(for_server=for_server))
