"""``kubetrain run --local JOB.yaml``: run a job manifest on this machine as real processes
(planned by :mod:`kubetrain.local.plan`, run by :mod:`kubetrain.local.execute`).

The exit code is 0 when the job succeeded, the failed replica's exit code when it failed,
1 when the manifest cannot be read or is invalid, 124 when it ran past its deadline and 130
when interrupted.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TextIO

from kubetrain.api import JobValidationError, load_job_file
from kubetrain.local.execute import EXIT_FAILED, execute
from kubetrain.local.plan import LocalPlan, LocalRunError, plan_local_run

#: A manifest that cannot be read or is not a valid job (as ``kubetrain validate`` says).
EXIT_INVALID_MANIFEST = 1
EXIT_USAGE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``kubetrain run``."""
    parser.add_argument("manifest", metavar="JOB.yaml", help="a PyTorchJob, TFJob or MPIJob")
    parser.add_argument(
        "--local",
        action="store_true",
        help="run on this machine as real processes (the only mode so far; required)",
    )
    parser.add_argument(
        "--workdir",
        default=".",
        help="directory the replicas run in (default: the current directory)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a variable in every replica (repeatable), after the injected ones",
    )
    parser.add_argument(
        "--entrypoint",
        default="",
        help="command for containers that have none (they would run the image's entrypoint)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="fail the job after this many seconds (default: runPolicy.activeDeadlineSeconds)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print each replica's command and injected environment, start nothing",
    )


def _parse_env(pairs: Sequence[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise LocalRunError(f"--env {pair!r} must be NAME=VALUE")
        env[name] = value
    return env


def _print_plan(plan: LocalPlan, out: TextIO) -> None:
    for path, text in plan.files.items():
        out.write(f"# {path}\n{text}")
    for replica in plan.replicas:
        out.write(f"{replica.label} ({replica.container}): {shlex.join(replica.argv)}\n")
        for name, value in replica.env.items():
            out.write(f"  {name}={value}\n")


def run(args: argparse.Namespace) -> int:
    """Run ``kubetrain run``; return its exit code."""
    out = sys.stdout
    if not args.local:
        print(
            "kubetrain run: only --local is supported: it runs the job here as processes; "
            "submit to a cluster with kubectl apply -f",
            file=sys.stderr,
        )
        return EXIT_USAGE
    workdir = Path(args.workdir)
    if not workdir.is_dir():
        print(f"kubetrain run: --workdir {args.workdir} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    try:
        # Any file ends here or below, never in a traceback (see kubetrain.api.loader).
        job = load_job_file(args.manifest)
    except JobValidationError as error:
        print(error, file=sys.stderr)
        return EXIT_INVALID_MANIFEST
    except OSError as error:
        print(f"kubetrain run: cannot read {args.manifest}: {error.strerror}", file=sys.stderr)
        return EXIT_INVALID_MANIFEST

    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kubetrain-run-")))
        try:
            plan = plan_local_run(
                job,
                scratch=scratch,
                entrypoint=shlex.split(args.entrypoint),
                extra_env=_parse_env(args.env),
            )
        except LocalRunError as error:
            print(f"kubetrain run: {error}", file=sys.stderr)
            return EXIT_USAGE
        for note in plan.notes:
            out.write(f"kubetrain: note: {note}\n")
        if args.dry_run:
            _print_plan(plan, out)
            return 0
        run_policy = plan.job.spec.run_policy
        deadline = args.timeout
        if deadline is None and run_policy is not None:
            deadline = run_policy.active_deadline_seconds
        try:
            outcome = execute(plan, workdir=workdir, out=out, deadline_seconds=deadline)
        except LocalRunError as error:
            print(f"kubetrain run: {error}", file=sys.stderr)
            return EXIT_FAILED
    replicas = ", ".join(
        f"{label} {'running' if code is None else f'exit {code}'}"
        for label, code in outcome.exit_codes.items()
    )
    out.write(
        f"kubetrain: {plan.job.kind}/{plan.job.name} {outcome.phase} after "
        f"{outcome.seconds:.1f}s: {outcome.reason} ({replicas})\n"
    )
    out.flush()
    return outcome.exit_code
