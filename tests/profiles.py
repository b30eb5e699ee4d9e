"""The cluster profiles: one table of the control planes the test suite starts.

A profile is a recipe for one local control plane (``cluster.local.LocalCluster``) and
what runs beside it. Each test belongs to at most one profile, read from the fixtures it
uses (``FIXTURE_PROFILES``); ``make test`` runs each profile's tests in a pytest process
of its own (``tests/tiers.py``), so a profile's control plane lives exactly as long as
its tests and at most two are alive at once.

Profiles were merged where the tests allow it: gang scheduling runs on Kueue's control
plane, whose scheduler already is scheduler-plugins' (Coscheduling). The others stay
apart for a stated reason (``Profile.why``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the runner imports this table with nothing but the standard library
    from cluster.local import Scheduler


@dataclass(frozen=True, kw_only=True)
class Profile:
    """How one control plane of the suite is started."""

    name: str
    #: What its tests need that another profile's control plane cannot give them.
    why: str
    scheduler: Scheduler = "kube"
    real_node: bool = False
    metrics: bool = False
    #: The Go tools its control plane runs (``cluster.tools.TOOL_NAMES``): the ones
    #: checked before it starts.
    tools: tuple[str, ...] = ("control-plane",)


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="main",
            why="the API server, the CRDs and the operator's tests; kube-scheduler",
        ),
        Profile(
            name="kueue",
            why=(
                "the real Kueue, whose webhooks fail closed on every Job and pod outside "
                "kube-system, and the coscheduling scheduler (gang scheduling, with and "
                "without Kueue)"
            ),
            scheduler="coscheduling",
            tools=("control-plane", "scheduler-plugins", "kueue"),
        ),
        Profile(
            name="metrics",
            why=(
                "metrics-server and short HPA settings: the fake nodes change address and "
                "kube-controller-manager runs with other flags"
            ),
            metrics=True,
            tools=("control-plane", "metrics-server"),
        ),
        Profile(
            name="realnode",
            why=(
                "one real node (kubelet, containerd) running the built images; the real "
                "Kueue for the hang test's preemption, its webhooks removed after it"
            ),
            real_node=True,
            tools=("control-plane", "node", "coredns", "kueue"),
        ),
        Profile(
            name="argocd",
            why=(
                "Argo CD delivers, upgrades and deletes the stack on a real node: the "
                "cluster's global state changes, so the control plane is disposed of "
                "after, never cleaned (minutes of deleting real pods)"
            ),
            real_node=True,
            tools=("control-plane", "node", "coredns", "argocd", "kustomize"),
        ),
        Profile(
            name="faults",
            why="its tests stop the control plane and kill and freeze operators against it",
        ),
    )
}

#: The session fixture that starts each profile's control plane.
FIXTURE_PROFILES: dict[str, str] = {
    "local_cluster": "main",
    "kueue_cluster": "kueue",
    "coscheduling_cluster": "kueue",
    "metrics_cluster": "metrics",
    "real_node_cluster": "realnode",
    "argocd_cluster": "argocd",
    "faults_cluster": "faults",
}

#: The profile of a test that starts no control plane.
NO_CLUSTER = "none"


def profile_of(fixturenames: Iterable[str]) -> str:
    """The profile of a test that uses these fixtures (``NO_CLUSTER`` if none); a test
    may use one profile only."""
    found = {FIXTURE_PROFILES[name] for name in fixturenames if name in FIXTURE_PROFILES}
    if len(found) > 1:
        raise ValueError(
            f"a test uses the control planes of profiles {', '.join(sorted(found))}: a test "
            "runs in one profile's process; split it or use one profile's fixtures"
        )
    return found.pop() if found else NO_CLUSTER
