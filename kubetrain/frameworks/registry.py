"""The TrainJob ML policies kubetrain implements, in one ordered list (as upstream Trainer's
``plugins/registry.go``): each policy's facts live in its own module, which declares its
:class:`~kubetrain.frameworks.policy.TrainJobPolicy` as ``POLICY``; everything that
differs by policy (the operator's TrainJob plugin, ``kubetrain run --local``) looks it up
here. Adding a policy is its module, its test and one line in :data:`POLICIES`."""

from __future__ import annotations

from collections.abc import Mapping

from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.trainer.resolve import ResolvedTrainJob, resolve
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.api.trainer.trainjob import TrainJob
from kubetrain.frameworks import jax, mpi, pytorch, tensorflow, xgboost
from kubetrain.frameworks.policy import TrainJobPolicy

#: Every ML policy, in registry order.
POLICIES: tuple[TrainJobPolicy, ...] = (
    pytorch.POLICY,
    mpi.POLICY,
    jax.POLICY,
    xgboost.POLICY,
    tensorflow.POLICY,
)

BY_NAME: Mapping[str, TrainJobPolicy] = {policy.name: policy for policy in POLICIES}


def policy_for(name: str | None) -> TrainJobPolicy | None:
    """The policy named ``name`` (a resolved TrainJob's ``spec.framework``), or None for a
    plain runtime or a policy kubetrain does not implement."""
    return BY_NAME.get(name or "")


def resolve_trainjob(trainjob: TrainJob, runtime: RuntimeBase) -> ResolvedTrainJob:
    """``trainjob`` resolved against ``runtime`` with its policy's node layout (what the
    operator and ``kubetrain run --local`` run). A runtime whose ``mlPolicy`` names a
    policy kubetrain does not implement is refused: its pods would run their command
    without what that policy sets up (upstream's Flux policy installs Flux into the node
    pods with an init container and starts the command under a Flux broker)."""
    ml_policy = runtime.spec.ml_policy
    source = ml_policy.framework() if ml_policy is not None else None
    if source is not None and source not in BY_NAME:
        where = f"{runtime.kind} {runtime.name}"
        message = (
            f"a runtime kubetrain can run: {where} has mlPolicy.{source}, and kubetrain has "
            f"no {source.capitalize()} policy (it implements {', '.join(BY_NAME)}); run such "
            "TrainJobs with upstream Trainer"
        )
        raise JobValidationError(
            [FieldError("spec.runtimeRef", message, trainjob.spec.runtime_ref.name)]
        )
    policy = policy_for(source)
    return resolve(trainjob, runtime, policy.layout if policy is not None else None)
