"""Synthesis cost: CPU seconds of ``kubetrain synth`` as a user runs it, against
``kubectl kustomize`` of Kubeflow training-operator's standalone overlay.

Every figure is a whole new process (interpreter start-up, imports, the jsii/Node.js
runtime, rendering, writing files), measured as the user + system CPU of it and of every
process it waited for (Node.js included), on this machine:

- one stack (``--stack``, default h100-infiniband), the median of ``--repeats`` runs,
  each into a new output directory, and again into one holding that version already
  (what ``make synth`` does on a checkout whose ``dist/`` is current: compared, kept);
- ``kubectl kustomize`` of training-operator v1.9.3's ``manifests/overlays/standalone``
  (from the Go module the peer benchmark builds; the pinned kubectl), the same way;
- every stack in one process (``kubetrain synth`` with no stack named) against the sum
  of one process per stack.

One run of each comes first and is not counted: it leaves Python's bytecode cache as any
installed copy has it (``PYTHONDONTWRITEBYTECODE`` is dropped from the environment, so
the figures are the same whoever runs them). Figures to compare, never assertions.

    .venv/bin/python -m benchmarks.synth            # or: make bench-synth
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from itertools import count
from pathlib import Path

from cluster.tools import find_tools
from kubetrain.gitops.stack import load_stacks

REPO_ROOT = Path(__file__).resolve().parent.parent
KUBETRAIN = Path(sys.executable).parent / "kubetrain"


def child_cpu(args: Sequence[str], env: dict[str, str], cwd: Path) -> float:
    """User + system CPU seconds of one process run to completion (and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(list(args), env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median_cpu(
    command: Callable[[], Sequence[str]], env: dict[str, str], cwd: Path, repeats: int
) -> float:
    """The median CPU of ``repeats`` runs of ``command()``, after one uncounted run."""
    child_cpu(command(), env, cwd)
    return statistics.median(child_cpu(command(), env, cwd) for _ in range(repeats))


def standalone_overlay() -> Path:
    """training-operator's standalone overlay in the Go module cache (the peer tools'
    module pins the version)."""
    module = REPO_ROOT / "cluster" / "tools" / "training-operator"
    listed = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubeflow/training-operator"],
        cwd=module,
        env={**os.environ, "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"},
        check=True,
        capture_output=True,
        text=True,
    )
    overlay = Path(listed.stdout.strip()) / "manifests" / "overlays" / "standalone"
    if not (overlay / "kustomization.yaml").is_file():
        raise SystemExit(f"no kustomization.yaml in {overlay}: expected training-operator's")
    return overlay


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.synth", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--stack", default="h100-infiniband", help="the one-stack figure")
    parser.add_argument("--repeats", type=int, default=5, help="counted runs per figure")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats is {args.repeats}: expected at least 1")

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    stacks = sorted(load_stacks(root=REPO_ROOT))
    if args.stack not in stacks:
        parser.error(f"--stack {args.stack!r}: expected one of {', '.join(stacks)}")
    kubectl = find_tools(only=("control-plane",)).kubectl
    overlay = standalone_overlay()
    out = Path(tempfile.mkdtemp(prefix="kubetrain-synth-bench-"))
    try:
        runs = count()

        def synth(*names: str, fresh: bool = True) -> Callable[[], list[str]]:
            """``kubetrain synth`` into a new directory each run (fresh: the files are
            written), or into the same one (the version is there: compared, unchanged)."""

            def command() -> list[str]:
                where = out / (f"run-{next(runs)}" if fresh else "again")
                return [str(KUBETRAIN), "synth", *names, "--out", str(where)]

            return command

        def kustomize_command() -> list[str]:
            return [str(kubectl), "kustomize", str(overlay)]

        one = median_cpu(synth(args.stack), env, REPO_ROOT, args.repeats)
        again = median_cpu(synth(args.stack, fresh=False), env, REPO_ROOT, args.repeats)
        kustomize = median_cpu(kustomize_command, env, REPO_ROOT, args.repeats)
        every = median_cpu(synth(), env, REPO_ROOT, args.repeats)
        separate = {name: median_cpu(synth(name), env, REPO_ROOT, args.repeats) for name in stacks}
    finally:
        shutil.rmtree(out, ignore_errors=True)

    total = sum(separate.values())
    print(f"CPU seconds (user + system) of a new process, median of {args.repeats} runs")
    print(f"  kubetrain synth {args.stack:28}{one:7.2f}s")
    print(f"  the same again, version unchanged{'':11}{again:7.2f}s")
    print(f"  kubectl kustomize (training-operator v1.9.3 standalone){kustomize:5.2f}s")
    print(f"  synth / kustomize{'':27}{one / kustomize:7.2f}x")
    print(f"  every stack in one process ({len(stacks)}){'':15}{every:7.2f}s")
    for name, cpu in separate.items():
        print(f"    {name:40}{cpu:7.2f}s")
    print(f"  sum of one process per stack{'':16}{total:7.2f}s")
    print(f"  one process / sum{'':27}{every / total:7.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
