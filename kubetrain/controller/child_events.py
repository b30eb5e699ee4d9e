"""Events about a job's children, worded as upstream's operators word them, so that
``kubectl describe`` and the scripts that read it find what they expect:

- ``SuccessfulCreatePod`` "Created pod: <name>", ``SuccessfulCreateService`` "Created
  service: <name>" (and ``SuccessfulCreateConfigMap``, ``SuccessfulCreateJob`` for an
  MPIJob's ConfigMap and launcher Job);
- ``ExitedWithCode`` "Pod: <namespace>.<name> exited with code <n>", once per pod when
  it ends.

The reconcile that creates a job names every child it created, and what its startup gate
waits for, in the job's own ``<Kind>Created`` Event ("PyTorchJob j is created. Created 4
pods: ...; 4 services: ... Waiting for the Master to be Ready before creating the
Workers."): one Event instead of one per kind of child and a ``WaitingForReplicas``, so
a burst of 5,000 jobs sends two Events per job (created, running), as mpi-operator does.
A later reconcile (a restarted pod, a batch of a large job) records one Event per kind of
child it created: upstream's wording for one ("Created pod: <name>"), "Created 3 pods:
<a>, <b>, <c>" for several (at most :data:`QUOTED` names, then "and N more"). Each pod's
exit is recorded once. (The operator's Event sender has its own rate limit on top,
``--event-qps``.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from kubetrain.api.keys import STARTUP_WAITING
from kubetrain.controller import podstate
from kubetrain.controller.decisions import Event

#: How many names a creation Event quotes before "and N more".
QUOTED = 10

_NOUNS = {"Pod": "pod", "Service": "service", "ConfigMap": "config map", "Job": "job"}


def created(children: Iterable[Mapping[str, Any]]) -> list[Event]:
    """The Events for the children one reconcile created: one per kind of child."""
    return [
        Event("Normal", f"SuccessfulCreate{kind}", f"Created {_named(_NOUNS[kind], names)}")
        for kind, names in _by_kind(children).items()
    ]


def announce(
    events: Sequence[Event], children: Iterable[Mapping[str, Any]], job_created: str
) -> tuple[list[Event], list[str]]:
    """A reconcile's Events with its child creations (see the module docs): when the job's
    ``job_created`` Event is among ``events``, it names the children and takes in the
    startup gate's ``WaitingForReplicas``; else one Event per kind of child is added.
    Returns the Events and the keys of the Events taken in (to remember as sent)."""
    by_kind = _by_kind(children)
    first = next((e for e in events if e.reason == job_created), None)
    if first is None:
        return [*events, *created(children)], []
    waiting = [e for e in events if e.reason == STARTUP_WAITING]
    parts = [first.message]
    if by_kind:
        named = "; ".join(_named(_NOUNS[kind], names) for kind, names in by_kind.items())
        parts.append(f"Created {named}.")
    parts += [e.message for e in waiting]
    merged = replace(first, message=" ".join(parts))
    kept = [merged if e is first else e for e in events if e not in waiting]
    return kept, [e.key for e in waiting if e.key]


def _by_kind(children: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    by_kind: dict[str, list[str]] = {}
    for child in children:
        kind = str(child.get("kind"))
        if kind in _NOUNS:
            by_kind.setdefault(kind, []).append(str((child.get("metadata") or {}).get("name")))
    return by_kind


def _named(noun: str, names: Sequence[str]) -> str:
    if len(names) == 1:
        return f"{noun}: {names[0]}"  # upstream's own wording, after "Created "
    quoted = ", ".join(names[:QUOTED])
    rest = len(names) - QUOTED
    return f"{len(names)} {noun}s: {quoted}" + (f" and {rest} more" if rest > 0 else "")


def _exit_code(pod: Mapping[str, Any], main_container: str | None) -> int | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    ended = [cs for cs in statuses if (cs.get("state") or {}).get("terminated")]
    if not ended:
        return None
    preferred = [cs for cs in ended if cs.get("name") == main_container] or ended
    return int(preferred[0]["state"]["terminated"].get("exitCode") or 0)


def exited(
    pods: Sequence[Mapping[str, Any]], main_container: str | None, seen: frozenset[str]
) -> tuple[list[Event], frozenset[str]]:
    """The ``ExitedWithCode`` Events for pods that ended since the last look, and the uids
    of the ended pods still present (what to remember)."""
    events: list[Event] = []
    ended: set[str] = set()
    for pod in pods:
        if not (podstate.is_succeeded(pod) or podstate.is_failed(pod)):
            continue
        uid = podstate.uid(pod)
        ended.add(uid)
        if uid in seen:
            continue
        code = _exit_code(pod, main_container)
        if code is None:
            continue
        namespace = (pod.get("metadata") or {}).get("namespace")
        events.append(
            Event(
                "Normal",
                "ExitedWithCode",
                f"Pod: {namespace}.{podstate.name(pod)} exited with code {code}",
            )
        )
    return events, frozenset(ended)
