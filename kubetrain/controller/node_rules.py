"""The operator's rules for lost and unhealthy nodes (``node_health`` applies them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kubetrain.api import keys as K

#: A condition type or taint key: a name of letters, digits, '-', '_' and '.', optionally
#: prefixed with a DNS subdomain and '/'.
_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


@dataclass(frozen=True)
class NodeRules:
    """What makes a node lost or unhealthy, and what the operator may do about it (the
    operator's ``--node-lost-grace-seconds``, ``--force-delete-lost-pods``,
    ``--unhealthy-node-conditions`` and ``--unhealthy-node-taints``)."""

    grace_seconds: int = K.DEFAULT_NODE_LOST_GRACE_SECONDS
    force_delete: bool = False
    conditions: tuple[str, ...] = K.DEFAULT_UNHEALTHY_NODE_CONDITIONS
    taints: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.grace_seconds < 0:
            raise ValueError(
                f"node_lost_grace_seconds ({self.grace_seconds}) must be >= 0 (0 moves pods "
                "as soon as their node is not Ready)"
            )
        for name, values in (
            ("unhealthy_node_conditions", self.conditions),
            ("unhealthy_node_taints", self.taints),
        ):
            bad = [v for v in values if not _QUALIFIED_NAME.match(v)]
            if bad:
                raise ValueError(
                    f"{name} ({', '.join(map(repr, bad))}) must be condition types or taint "
                    "keys: a name, optionally prefixed, e.g. SysLogsXIDError or "
                    "example.com/gpu-unhealthy"
                )
