"""The TrainJob ML policies kubetrain implements, in one ordered list (as upstream Trainer's
``plugins/registry.go``): each policy's facts live in its own module, which declares its
:class:`~kubetrain.frameworks.policy.TrainJobPolicy` as ``POLICY``; everything that
differs by policy (the operator's TrainJob plugin, ``kubetrain run --local``) looks it up
here. Adding a policy is its module, its test and one line in :data:`POLICIES`."""

from __future__ import annotations

from collections.abc import Mapping

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
