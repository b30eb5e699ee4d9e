"""Events about a job's children, worded as upstream's operators word them, so that
``kubectl describe`` and the scripts that read it find what they expect:

- ``SuccessfulCreatePod`` "Created pod: <name>", ``SuccessfulCreateService`` "Created
  service: <name>" (and ``SuccessfulCreateConfigMap``, ``SuccessfulCreateJob`` for an
  MPIJob's ConfigMap and launcher Job);
- ``ExitedWithCode`` "Pod: <namespace>.<name> exited with code <n>", once per pod when
  it ends.

One reconcile records one Event per kind of child it created, naming them: upstream's
wording for one ("Created pod: <name>"), "Created 3 pods: <a>, <b>, <c>" for several (at
most :data:`QUOTED` names, then "and N more"), so a 1,000-pod job's creation is one Event,
not a backlog that lags behind the work. Each pod's exit is recorded once. (The
operator's Event sender has its own rate limit on top, ``--event-qps``.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubetrain.controller import podstate
from kubetrain.controller.decisions import Event

#: How many names a creation Event quotes before "and N more".
QUOTED = 10

_NOUNS = {"Pod": "pod", "Service": "service", "ConfigMap": "config map", "Job": "job"}


def created(children: Iterable[Mapping[str, Any]]) -> list[Event]:
    """The Events for the children one reconcile created: one per kind of child."""
    by_kind: dict[str, list[str]] = {}
    for child in children:
        kind = str(child.get("kind"))
        if kind in _NOUNS:
            by_kind.setdefault(kind, []).append(str((child.get("metadata") or {}).get("name")))
    return [
        Event("Normal", f"SuccessfulCreate{kind}", _created_message(_NOUNS[kind], names))
        for kind, names in by_kind.items()
    ]


def _created_message(noun: str, names: Sequence[str]) -> str:
    if len(names) == 1:
        return f"Created {noun}: {names[0]}"  # upstream's own wording
    quoted = ", ".join(names[:QUOTED])
    rest = len(names) - QUOTED
    return f"Created {len(names)} {noun}s: {quoted}" + (f" and {rest} more" if rest > 0 else "")


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
