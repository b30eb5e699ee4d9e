"""``kubetrain.local.train(func, ...)``: a training function run on this machine the way
the Kubeflow SDK sends it to a cluster, on ``num_nodes`` x ``num_proc_per_node`` ranks.

The function becomes a TrainJob of a torch runtime (kubetrain's copy of upstream's
``torch-distributed`` unless ``runtime`` names another), whose trainer command is torchrun
over a script holding the function's source and the call ``func(**func_args)``. That
TrainJob is planned and run by the same code as ``kubetrain run --local`` (each node a
process with the ``PET_*`` variables the operator injects; static rendezvous on
``127.0.0.1``), so a function that runs here runs on a cluster the same way.

Unlike the SDK's ``LocalProcessBackend``: every node and process really runs (it runs
one); the current interpreter and environment are used (no fresh virtualenv, ``PATH``,
``HOME`` and the rest inherited); ``func_args`` arrive as keyword arguments (it passes
them as one positional dict); the source is written to a file by Python, never through a
shell, so ``$HOME`` and backticks in it stay as written (the SDK's unquoted heredoc
expands them); a failure raises :class:`LocalTrainError` with the failing rank's exit
code and the tail of its log.
"""

from __future__ import annotations

import inspect
import json
import pickle
import secrets
import string
import sys
import tempfile
import textwrap
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from kubetrain.api.trainer import TrainJob, load_object_file, load_trainer_object
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.local import rank_main
from kubetrain.local.execute import execute
from kubetrain.local.plan import LocalRunError
from kubetrain.local.results import LocalTrainError, RankResult, TrainResult, collect_ranks, failure
from kubetrain.local.trainjob import COMPLETE, plan_trainjob, visible_gpus

DEFAULT_NODES = 2
DEFAULT_PROCS = 2

#: kubetrain's copy of upstream's ``torch-distributed`` runtime (the image is never pulled).
DEFAULT_RUNTIME: dict[str, Any] = {
    "apiVersion": T.API_VERSION,
    "kind": T.CLUSTER_TRAINING_RUNTIME,
    "metadata": {"name": "torch-distributed", "labels": {T.FRAMEWORK_LABEL: "torch"}},
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {"labels": {T.ANCESTOR_LABEL: T.ANCESTOR_TRAINER}},
                            "spec": {
                                "template": {
                                    "spec": {"containers": [{"name": T.NODE, "image": "local"}]}
                                }
                            },
                        },
                    }
                ]
            }
        },
    },
}


@dataclass(frozen=True)
class _Call:
    func: Callable[..., Any]
    func_args: dict[str, Any]
    num_nodes: int
    num_proc_per_node: int
    env: dict[str, str]


def _pick(what: str, given: Any, from_trainer: Any, default: Any) -> Any:
    if given is not None and from_trainer is not None and given != from_trainer:
        raise ValueError(
            f"{what} is given twice, as an argument ({given!r}) and by the trainer "
            f"({from_trainer!r}): keep one"
        )
    if given is not None:
        return given
    return from_trainer if from_trainer is not None else default


def _unpack(
    func: Any,
    func_args: Mapping[str, Any] | None,
    num_nodes: int | None,
    num_proc_per_node: int | None,
    env: Mapping[str, str] | None,
) -> _Call:
    """The call to make, from a function or an SDK ``CustomTrainer`` (read by its fields:
    ``func``, ``func_args``, ``num_nodes``, ``env``; kubetrain does not import the SDK)."""
    trainer: Any = None
    if not inspect.isfunction(func) and hasattr(func, "func"):
        trainer, func = func, func.func
        packages = getattr(trainer, "packages_to_install", None)
        if packages:
            warnings.warn(
                f"packages_to_install ({', '.join(map(str, packages))}) are not installed "
                "locally: the function runs in this environment, install them here",
                stacklevel=3,
            )
    call = _Call(
        func=_shippable(func),
        func_args=dict(_pick("func_args", func_args, getattr(trainer, "func_args", None), {})),
        num_nodes=_pick("num_nodes", num_nodes, getattr(trainer, "num_nodes", None), DEFAULT_NODES),
        num_proc_per_node=num_proc_per_node if num_proc_per_node is not None else DEFAULT_PROCS,
        env=dict(_pick("env", env, getattr(trainer, "env", None), {})),
    )
    for what, value in (
        ("num_nodes", call.num_nodes),
        ("num_proc_per_node", call.num_proc_per_node),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{what} must be an integer of at least 1, got {value!r}")
    bad_env = {
        k: v for k, v in call.env.items() if not isinstance(k, str) or not isinstance(v, str)
    }
    if bad_env:
        raise TypeError(f"env must map names to strings, got {bad_env!r}")
    bad_keys = [k for k in call.func_args if not isinstance(k, str) or not k.isidentifier()]
    if bad_keys:
        raise TypeError(f"func_args keys must be argument names (keywords), got {bad_keys!r}")
    try:
        inspect.signature(call.func).bind(**call.func_args)
    except TypeError as error:
        raise TypeError(
            f"func_args {sorted(call.func_args)} do not fit "
            f"{call.func.__name__}{inspect.signature(call.func)}: {error}"
        ) from None
    return call


def _shippable(func: Any) -> Callable[..., Any]:
    """``func`` if its source can travel alone (as the SDK ships it), else TypeError."""
    if not inspect.isfunction(func):
        raise TypeError(
            f"train() takes a function defined with def, or a CustomTrainer with one in func; "
            f"got {func!r}"
        )
    if func.__name__ == "<lambda>":
        raise TypeError("a lambda cannot be shipped to the ranks: define the function with def")
    if func.__code__.co_freevars:
        raise TypeError(
            f"{func.__name__} uses variables of its enclosing function "
            f"({', '.join(func.__code__.co_freevars)}), which do not travel with its source: "
            "pass them in func_args"
        )
    return func


def _source(func: Callable[..., Any]) -> str:
    try:
        return textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as error:
        raise TypeError(
            f"the source of {func.__name__} cannot be read ({error}): define it in a file "
            "or a notebook cell"
        ) from None


def _runtime(runtime: RuntimeBase | Mapping[str, Any] | str | Path | None) -> RuntimeBase:
    if runtime is None:
        loaded: Any = load_trainer_object(DEFAULT_RUNTIME, "kubetrain's torch-distributed")
    elif isinstance(runtime, RuntimeBase):
        loaded = runtime
    elif isinstance(runtime, Mapping):
        loaded = load_trainer_object(dict(runtime), "runtime")
    else:
        loaded = load_object_file(runtime)
    if not isinstance(loaded, RuntimeBase):
        raise TypeError(
            f"runtime must be a ClusterTrainingRuntime or TrainingRuntime, got a {loaded.kind}"
        )
    policy = loaded.spec.ml_policy
    framework = policy.framework() if policy is not None else None
    if framework != "torch":
        has = f"mlPolicy {framework}" if framework else "no mlPolicy"
        raise LocalRunError(
            f"{loaded.kind} {loaded.name} has {has}; train() runs the function under "
            "torchrun, which needs a torch runtime "
            "(mlPolicy.torch): run other runtimes with kubetrain run --local TRAINJOB.yaml"
        )
    return loaded


def _job_name() -> str:
    """A name as the SDK makes one: a letter, then 11 hexadecimal digits."""
    return secrets.choice(string.ascii_lowercase) + secrets.token_hex(6)[:11]


def _write_run_files(run_dir: Path, call: _Call) -> tuple[Path, Path, Path]:
    """The script (source + keyword call), the pickled arguments and the status folder."""
    script = run_dir / f"{call.func.__name__}.py"
    # Written by Python, never through a shell: `$HOME` and backticks stay as written.
    script.write_text(
        f"{_source(call.func)}\n\n{call.func.__name__}(**{rank_main.ARGS_NAME})\n",
        encoding="utf-8",
    )
    args_file = run_dir / "func_args.pickle"
    try:
        args_file.write_bytes(pickle.dumps(call.func_args))
    except (pickle.PicklingError, TypeError, AttributeError) as error:
        raise TypeError(f"func_args cannot be pickled for the ranks: {error}") from None
    statuses = run_dir / "ranks"
    statuses.mkdir(exist_ok=True)
    return script, args_file, statuses


def train(
    func: Any,
    *,
    num_nodes: int | None = None,
    num_proc_per_node: int | None = None,
    func_args: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    runtime: RuntimeBase | Mapping[str, Any] | str | Path | None = None,
    name: str | None = None,
    workdir: str | Path | None = None,
    run_dir: str | Path | None = None,
    python: str | None = None,
    timeout: float | None = None,
    out: TextIO | None = None,
) -> TrainResult:
    """Run ``func(**func_args)`` on ``num_nodes`` x ``num_proc_per_node`` ranks here.

    ``func`` is a function (its source travels, as with the SDK: import what it uses
    inside it) or the SDK's ``CustomTrainer`` (its ``func``, ``func_args``, ``num_nodes``
    and ``env`` are used). ``num_nodes`` defaults to the trainer's, else 2;
    ``num_proc_per_node`` to 2. ``env`` is added to this process's environment, which every
    rank inherits. ``runtime`` is a torch ClusterTrainingRuntime or TrainingRuntime (an
    object, its wire dict or a YAML file; default: a copy of upstream's
    ``torch-distributed``): its ``node`` container's env applies, as on a cluster.
    ``workdir`` is where the ranks run (default: the current directory); ``run_dir`` keeps
    the script, arguments, statuses and logs (default: a new temporary directory);
    ``python`` is the interpreter of torchrun and the ranks (default: this one); ``timeout``
    fails the run after that many seconds (default: the runtime's
    ``activeDeadlineSeconds``, else none); ``out`` receives the prefixed logs (default:
    standard output).

    Returns a :class:`TrainResult`; raises :class:`LocalTrainError` when the run fails,
    ``KeyboardInterrupt`` when interrupted (every process is stopped first), TypeError or
    ValueError for bad arguments.
    """
    call = _unpack(func, func_args, num_nodes, num_proc_per_node, env)
    chosen_runtime = _runtime(runtime)
    job_name = name or _job_name()
    folder = Path(run_dir) if run_dir is not None else Path(tempfile.mkdtemp(prefix="kubetrain-"))
    folder.mkdir(parents=True, exist_ok=True)
    script, args_file, statuses = _write_run_files(folder, call)
    interpreter = python or sys.executable
    command = [
        interpreter,
        "-m",
        "torch.distributed.run",
        str(Path(rank_main.__file__).resolve()),
        str(script),
        str(args_file),
        str(statuses),
    ]
    trainer: dict[str, Any] = {
        "command": command,
        "numNodes": call.num_nodes,
        "numProcPerNode": call.num_proc_per_node,
    }
    if call.env:
        trainer["env"] = [{"name": k, "value": v} for k, v in call.env.items()]
    metadata = {"name": job_name}
    if chosen_runtime.metadata.namespace:
        metadata["namespace"] = chosen_runtime.metadata.namespace
    manifest = {
        "apiVersion": T.API_VERSION,
        "kind": T.TRAINJOB,
        "metadata": metadata,
        "spec": {
            "runtimeRef": {"name": chosen_runtime.name, "kind": chosen_runtime.kind},
            "trainer": trainer,
        },
    }
    job = load_trainer_object(manifest, f"TrainJob {job_name}")
    assert isinstance(job, TrainJob)
    (folder / "trainjob.json").write_text(json.dumps(job.to_wire(), indent=2) + "\n")
    plan = plan_trainjob(
        job,
        chosen_runtime,
        scratch=folder,
        gpus=visible_gpus(),
        rank_prefixes=True,
    )
    stream = out if out is not None else sys.stdout
    for note in plan.notes:
        stream.write(f"kubetrain: note: {note}\n")
    deadline = timeout
    if deadline is None and plan.job.run_policy is not None:
        deadline = plan.job.run_policy.active_deadline_seconds
    outcome = execute(
        plan,
        workdir=Path(workdir) if workdir is not None else Path.cwd(),
        out=stream,
        deadline_seconds=deadline,
        log_dir=folder / "logs",
    )
    result = TrainResult(
        name=job_name,
        phase=outcome.phase,
        reason=outcome.reason,
        seconds=outcome.seconds,
        run_dir=folder,
        ranks=collect_ranks(
            nodes=call.num_nodes,
            procs=call.num_proc_per_node,
            statuses=statuses,
            node_logs=outcome.logs,
            log_dir=folder / "logs",
        ),
        nodes=outcome.exit_codes,
        logs=outcome.logs,
    )
    if outcome.phase == COMPLETE:
        return result
    if outcome.phase == "Interrupted":
        raise KeyboardInterrupt(f"TrainJob {job_name} interrupted; logs in {folder}")
    raise failure(result, outcome.failed, outcome.exit_code)


__all__ = [
    "DEFAULT_RUNTIME",
    "LocalTrainError",
    "RankResult",
    "TrainResult",
    "train",
]
