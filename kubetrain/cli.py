"""``kubetrain``: the command line. Each subcommand lives in ``kubetrain.commands.<name>``
with ``add_parser(subparsers)`` and ``run(args) -> int``; modules are imported only
when their command runs, so ``kubetrain validate`` never starts the jsii runtime."""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

from kubetrain import __version__

# (command, module, one-line help), in the order `kubetrain --help` lists them.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("validate", "kubetrain.commands.validate", "check manifests against the typed API"),
    (
        "convert",
        "kubetrain.commands.convert",
        "rewrite older Kubeflow manifests in the served versions (or as TrainJobs)",
    ),
    ("crds", "kubetrain.commands.crds", "print the CRDs as YAML"),
    ("synth", "kubetrain.commands.synth", "render stacks into dist/<stack>/<version>/"),
    ("diff", "kubetrain.commands.diff", "object-level diff between two versions of a stack"),
    ("helm", "kubetrain.commands.helm", "export a stack as the Helm chart charts/kubetrain/"),
    ("run", "kubetrain.commands.run", "run a job manifest on this machine (--local)"),
    ("operator", "kubetrain.commands.operator", "run the operator that reconciles training jobs"),
)


def _load(module: str) -> ModuleType:
    return importlib.import_module(module)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI parser; only ``command``'s module is imported to declare its options."""
    parser = argparse.ArgumentParser(
        prog="kubetrain",
        description="Kubeflow-compatible distributed training on Kubernetes, from typed Python.",
    )
    parser.add_argument("--version", action="version", version=f"kubetrain {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module, help_text in COMMANDS:
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(_module=module)
        if name == command:
            _load(module).add_arguments(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    names = {name for name, _, _ in COMMANDS}
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command if command in names else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_module", None):
        parser.print_help(sys.stderr)
        return 2
    result: int = _load(args._module).run(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
