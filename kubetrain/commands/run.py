"""``kubetrain run --local JOB.yaml``: run a job manifest on this machine as real processes
(planned by :mod:`kubetrain.local.plan`, a TrainJob with the runtime it names, found by
:mod:`kubetrain.commands.runtime_lookup`; run by :mod:`kubetrain.local.execute`).

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

from kubetrain.api import JobValidationError
from kubetrain.api import env_names as E
from kubetrain.api import keys as K
from kubetrain.api.errors import FieldError
from kubetrain.api.kinds import JOB_KINDS
from kubetrain.api.loader import Job, read_manifest
from kubetrain.api.trainer import TrainJob, load_objects_from_yaml
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.commands.runtime_lookup import find_runtime
from kubetrain.controller.policies.restart import WHOLE_NUMBER, infrastructure_limit
from kubetrain.frameworks import pytorch
from kubetrain.local.elastic import check_scale_plan, parse_scale
from kubetrain.local.execute import EXIT_FAILED, execute
from kubetrain.local.plan import LocalPlan, LocalRunError, plan_local_run
from kubetrain.local.trainjob import plan_trainjob, visible_gpus

#: A manifest that cannot be read or is not a valid job (as ``kubetrain validate`` says).
EXIT_INVALID_MANIFEST = 1
EXIT_USAGE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``kubetrain run``."""
    parser.add_argument(
        "manifest",
        metavar="JOB.yaml",
        help=(f"a {', '.join(JOB_KINDS)} or TrainJob (its runtime may follow in the same file)"),
    )
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
        "--runtime",
        action="append",
        default=[],
        metavar="RUNTIME.yaml",
        help="a file with the TrainJob's ClusterTrainingRuntime or TrainingRuntime (repeatable)",
    )
    parser.add_argument(
        "--stack",
        default=None,
        help="look for the TrainJob's runtime among what this stack renders (its version "
        "in --dist, else rendered now)",
    )
    parser.add_argument(
        "--dist",
        default="dist",
        help="where kubetrain synth writes the stacks (default: dist)",
    )
    parser.add_argument(
        "--scale",
        action="append",
        default=[],
        metavar="NODES@WHEN",
        help="scale an elastic job while it trains (repeatable, in order): NODES@step=STEP "
        "once the job logs that step, NODES@SECONDS after the start; e.g. --scale 3@step=20 "
        "--scale 2@step=40",
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


class InvalidDocuments(Exception):
    """Documents of a manifest file that are not valid, each with its errors."""

    def __init__(self, errors: list[JobValidationError]) -> None:
        super().__init__("\n".join(str(error) for error in errors))
        self.errors = errors


def _load(path: str) -> tuple[Job | TrainJob, list[RuntimeBase]]:
    """The one job of a manifest file (a v1 job or a TrainJob) and the runtimes beside it;
    :class:`InvalidDocuments` listing every document in error, JobValidationError when the
    file cannot be read or holds no job or several."""
    jobs: list[Job | TrainJob] = []
    runtimes: list[RuntimeBase] = []
    errors: list[JobValidationError] = []
    documents = list(load_objects_from_yaml(read_manifest(path), path))
    for _, result in documents:
        if isinstance(result, JobValidationError):
            errors.append(result)
        elif isinstance(result, RuntimeBase):
            runtimes.append(result)
        else:
            jobs.append(result)
    if errors:
        raise InvalidDocuments(errors)
    if len(jobs) != 1:
        raise JobValidationError(
            [
                FieldError(
                    "",
                    f"exactly one job document ({', '.join(JOB_KINDS)} or TrainJob, which "
                    f"runtimes may accompany), found {len(jobs)}",
                )
            ],
            path,
        )
    return jobs[0], runtimes


def _plan(
    args: argparse.Namespace,
    job: Job | TrainJob,
    beside: Sequence[RuntimeBase],
    *,
    scratch: Path,
    out: TextIO,
) -> LocalPlan:
    """The plan for the job; a TrainJob's with the runtime it names, found first (its
    file's other documents, ``--runtime``, ``--stack``)."""
    entrypoint = shlex.split(args.entrypoint)
    extra_env = _parse_env(args.env)
    if not isinstance(job, TrainJob):
        return plan_local_run(job, scratch=scratch, entrypoint=entrypoint, extra_env=extra_env)
    runtime, where = find_runtime(
        job,
        beside=beside,
        manifest=args.manifest,
        runtime_files=args.runtime,
        stack=args.stack,
        dist=Path(args.dist),
        root=Path.cwd(),
    )
    out.write(f"kubetrain: TrainJob/{job.name} runs {runtime.kind} {runtime.name} ({where})\n")
    plan = plan_trainjob(
        job,
        runtime,
        scratch=scratch,
        entrypoint=entrypoint,
        extra_env=extra_env,
        gpus=visible_gpus(),
        rank_prefixes=True,
    )
    resolved = plan.job
    if (
        isinstance(resolved, ResolvedTrainJob)
        and resolved.spec.framework == pytorch.POLICY.name
        and E.PET_TEE not in extra_env
    ):
        out.write(
            "kubetrain: note: torchrun copies each rank's lines with a [rank<N>]: prefix "
            "because run --local sets PET_TEE=3 (a cluster does not); --env PET_TEE=0 "
            "turns it off\n"
        )
    return plan


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
        job, runtimes = _load(args.manifest)
    except (JobValidationError, InvalidDocuments) as error:
        print(error, file=sys.stderr)
        return EXIT_INVALID_MANIFEST
    except OSError as error:
        print(f"kubetrain run: cannot read {args.manifest}: {error.strerror}", file=sys.stderr)
        return EXIT_INVALID_MANIFEST
    if not isinstance(job, TrainJob) and (runtimes or args.runtime or args.stack):
        print(
            f"kubetrain run: {job.kind}/{job.name} uses no runtime: runtimes (in the file, "
            "--runtime, --stack) are for a TrainJob",
            file=sys.stderr,
        )
        return EXIT_USAGE

    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kubetrain-run-")))
        try:
            plan = _plan(args, job, runtimes, scratch=scratch, out=out)
        except JobValidationError as error:
            # A TrainJob its runtime cannot run (what the operator would report on it).
            print(error, file=sys.stderr)
            return EXIT_INVALID_MANIFEST
        except LocalRunError as error:
            print(f"kubetrain run: {error}", file=sys.stderr)
            return EXIT_USAGE
        try:
            scale = [parse_scale(text) for text in args.scale]
            check_scale_plan(scale, plan.elastic, f"{plan.job.kind}/{plan.job.name}")
        except LocalRunError as error:
            print(f"kubetrain run: {error}", file=sys.stderr)
            return EXIT_USAGE
        for note in plan.notes:
            out.write(f"kubetrain: note: {note}\n")
        if args.dry_run:
            _print_plan(plan, out)
            return 0
        restarts, invalid = infrastructure_limit(plan.job)
        if invalid is not None:
            key = K.INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION
            print(
                f"kubetrain run: metadata.annotations[{key}]: {invalid!r}: expected {WHOLE_NUMBER}",
                file=sys.stderr,
            )
            return EXIT_USAGE
        run_policy = plan.job.run_policy
        deadline = args.timeout
        if deadline is None and run_policy is not None:
            deadline = run_policy.active_deadline_seconds
        try:
            outcome = execute(
                plan,
                workdir=workdir,
                out=out,
                deadline_seconds=deadline,
                scale=scale,
                infrastructure_restarts=restarts,
            )
        except LocalRunError as error:
            print(f"kubetrain run: {error}", file=sys.stderr)
            return EXIT_FAILED
    for rescale in outcome.rescales:
        if rescale.reformed_after is None:
            out.write(
                f"kubetrain: elastic: {rescale.from_nodes} -> {rescale.to_nodes} nodes: no "
                f"step at world_size={rescale.world_size} was seen after it\n"
            )
    replicas = ", ".join(
        f"{label} not started"
        if label in outcome.not_started
        else f"{label} removed"
        if label in outcome.removed
        else f"{label} {'running' if code is None else f'exit {code}'}"
        for label, code in outcome.exit_codes.items()
    )
    out.write(
        f"kubetrain: {plan.job.kind}/{plan.job.name} {outcome.phase} after "
        f"{outcome.seconds:.1f}s: {outcome.reason} ({replicas})\n"
    )
    out.flush()
    return outcome.exit_code
