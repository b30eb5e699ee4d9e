"""The building blocks of the Trainer v2 kinds' rules (``kubetrain.api.trainer.invariants``
holds the tables; a rule is :class:`kubetrain.api.rules.Rule`, the model both API groups
share). The helpers read a wire object whatever its shape: the checks run on input the
typed models may also refuse.
"""

from __future__ import annotations

import re
from typing import Any

from kubetrain.api.crd_generator import ITEMS
from kubetrain.api.errors import FieldError, join_path
from kubetrain.api.limits import ReplicaLimits
from kubetrain.api.rules import Check
from kubetrain.api.trainer.constants import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME
from kubetrain.api.wire import as_int, at

RUNTIMES = (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)


def full_match(pattern: str, value: str) -> bool:
    # CEL's matches() is RE2: '.' stops at a newline and '$' is the end of the text.
    return re.fullmatch(pattern, value) is not None


def nodes_message(limits: ReplicaLimits) -> str:
    """The rejection message of the node limit (shared by CEL and Python)."""
    return (
        f"numNodes must be at most {limits.max_replicas_per_type} (the cluster's limit on "
        "replicas of one replica type, set in the job CRDs by the platform team)"
    )


def nodes_check(keys: tuple[str, ...], limits: ReplicaLimits) -> Check:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        count = as_int(at(obj, *keys, "numNodes"))
        if count is not None and count > limits.max_replicas_per_type:
            return [FieldError(f"{'.'.join(keys)}.numNodes", nodes_message(limits), count)]
        return []

    return check


def node_path(node: tuple[str, ...]) -> str:
    """A rule's node as the API server names fields (list items without an index)."""
    return join_path([part for part in node if part != ITEMS])
