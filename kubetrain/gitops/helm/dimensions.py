"""How the chart generator probes the values: the probe values, the groups of axes whose
options it renders in every combination, and the probes it finds in the renders (see
:mod:`kubetrain.gitops.helm.template`)."""

from __future__ import annotations

import re
import typing
from typing import Any

from kubetrain.controller.config import JOB_KINDS, OperatorConfig
from kubetrain.gitops.helm.probes import EachProbe, Probe, ScalarProbe, WholeProbe
from kubetrain.gitops.helm.template import Axis, Option
from kubetrain.gitops.helm.values import (
    CONFIG_VALUES,
    NAMESPACE_PROBES,
    NODE_SELECTOR_PROBE,
    PROBES,
    REPLICAS_PROBE,
    TOLERATIONS_PROBE,
    accepted_members,
    camel,
)


def _switch(path: str) -> Axis:
    """A boolean value: off, or on."""
    return Axis(path, (Option({path: False}, f"not $.Values.{path}"), Option({path: True}, None)))


def _presence(path: str, probe: Any, empty: Any) -> Axis:
    return Axis(path, (Option({path: probe}, f"$.Values.{path}"), Option({path: empty}, None)))


def dimensions() -> tuple[dict[str, Any], list[tuple[str, list[Axis]]], list[Probe]]:
    """The probe values, the groups of axes and the probes of the chart's operator."""
    kinds = [
        Axis(
            k,
            (
                Option({f"kinds.{k}": True}, f"$.Values.kinds.{k}"),
                Option({f"kinds.{k}": False}, None),
            ),
        )
        for k in JOB_KINDS
    ]
    # Kinds, namespaces, the gang scheduler and the progress server add and drop the same
    # RBAC rules and objects (the ClusterRole is there when any of them needs it), so they
    # are one group, rendered in every combination. Replicas and leader election touch
    # only the leader-election Role and its flag: a group of their own (the merge raises
    # if a change ever makes them meet), which keeps the renders at 2^kinds x 12 + 4.
    rbac = [
        *kinds,
        Axis(
            "watchNamespaces",
            (
                Option({"watchNamespaces": list(NAMESPACE_PROBES)}, "$.Values.watchNamespaces"),
                Option({"watchNamespaces": []}, None),
            ),
        ),
        Axis(
            "gangScheduler",
            tuple(
                Option({"gangScheduler": m}, f'eq $.Values.gangScheduler "{m}"')
                for m in accepted_members("gang_scheduler")
            ),
        ),
        _switch("progressServer"),
    ]
    leader = [
        Axis(
            "replicas",
            (
                Option({"replicas": 1}, "le (int $.Values.replicas) 1"),
                Option({"replicas": REPLICAS_PROBE}, None),
            ),
        ),
        _switch("leaderElect"),
    ]
    levels = typing.get_type_hints(OperatorConfig)["log_level"]
    groups: list[tuple[str, list[Axis]]] = [
        ("kinds, watchNamespaces, gangScheduler, progressServer", rbac),
        ("replicas, leaderElect", leader),
        (
            "image",
            [
                _presence("image.tag", PROBES["image.tag"], ""),
                Axis(
                    "image.digest",
                    (
                        Option({"image.digest": ""}, "not $.Values.image.digest"),
                        Option({"image.digest": PROBES["image.digest"]}, None),
                    ),
                ),
            ],
        ),
        (
            "resources",
            [
                _presence(f"resources.{n}", PROBES[f"resources.{n}"], "")
                for n in ("cpu", "memory", "cpuLimit", "memoryLimit")
            ],
        ),
        ("nodeSelector", [_presence("nodeSelector", NODE_SELECTOR_PROBE, {})]),
        ("tolerations", [_presence("tolerations", TOLERATIONS_PROBE, [])]),
        (
            "logLevel",
            [
                Axis(
                    "logLevel",
                    tuple(
                        Option({"logLevel": m.value}, f'eq $.Values.logLevel "{m.value}"')
                        for m in levels
                    ),
                )
            ],
        ),
    ]
    hints = typing.get_type_hints(OperatorConfig)
    kind_of = {camel(n): {int: "int", float: "float"}.get(hints[n], "str") for n in CONFIG_VALUES}
    probes: list[Probe] = [
        EachProbe(NAMESPACE_PROBES, "$.Values.watchNamespaces", "$ns"),
        WholeProbe(NODE_SELECTOR_PROBE, "$.Values.nodeSelector"),
        WholeProbe(TOLERATIONS_PROBE, "$.Values.tolerations"),
        ScalarProbe(str(REPLICAS_PROBE), "$.Values.replicas", "int"),
    ]
    probe_values: dict[str, Any] = {}
    for path, value in PROBES.items():
        probes.append(ScalarProbe(str(value), f"$.Values.{path}", kind_of.get(path, "str")))
        probe_values[path] = value
    return probe_values, groups, probes


def check_probes_distinct() -> None:
    """Probe texts must not contain one another (a substitution would be ambiguous)."""
    texts = [str(v) for v in PROBES.values()] + list(NAMESPACE_PROBES)
    for a in texts:
        for b in texts:
            if a != b and re.search(re.escape(a), b):
                raise ValueError(f"probe {a!r} is part of probe {b!r}")
