"""The peer benchmark's figures: API requests counted from the API server's audit log,
one run's result, and the table of the medians (``benchmarks.peers`` runs the burst).

Requests are counted by user agent (the API server's metrics have no user-agent label):
an operator's own, and kube-controller-manager's on Jobs and Pods of the benchmark's
namespace, which is the work an operator that creates batch Jobs hands to the control
plane (upstream Trainer's JobSets make Jobs, whose pods kube-controller-manager's Job
controller creates; kubetrain creates its pods itself).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.operator_scale import percentile

#: kube-controller-manager's user agent: ``kube-controller-manager/<version> (<os>/<arch>)
#: kubernetes/<commit>/<controller>``.
KCM_USER_AGENT = "kube-controller-manager/"
#: The resources of kube-controller-manager's Job work (subresources included).
KCM_RESOURCES = ("jobs", "pods")
#: The fields of a run's result the table shows, with their labels (seconds unless named).
LATENCY_ROWS = (
    ("create -> first child", "first_child"),
    ("create -> all children", "all_children"),
    ("create -> Running", "running"),
)


def audit_requests(
    log: Path,
    offset: int,
    prefix: str | tuple[str, ...],
    *,
    namespace: str | None = None,
    resources: Collection[str] = (),
) -> tuple[int, dict[str, int], int]:
    """Requests whose user agent starts with ``prefix`` (or one of them) in ``log`` after
    byte ``offset``: their count (distinct audit ids), the count by call (``verb
    resource[/subresource]``, e.g. ``update pytorchjobs/status``) and the new end offset.

    ``namespace`` and ``resources`` keep only requests on objects of that namespace and
    of those resources; with either, a call is named after the client too, the user
    agent's last ``/`` part (``job-controller: create pods`` for kube-controller-manager).
    """
    prefixes = (prefix,) if isinstance(prefix, str) else prefix
    seen: dict[str, str] = {}
    with log.open("rb") as stream:
        stream.seek(offset)
        data = stream.read()
    end = offset + data.rfind(b"\n") + 1
    for line in data[: end - offset].splitlines():
        if not any(p.encode() in line for p in prefixes):
            continue
        event = json.loads(line)
        agent = str(event.get("userAgent", ""))
        if not agent.startswith(prefixes):
            continue
        ref = event.get("objectRef") or {}
        if namespace is not None and ref.get("namespace") != namespace:
            continue
        if resources and ref.get("resource") not in resources:
            continue
        call = _call(event)
        if namespace is not None or resources:
            call = f"{agent.rsplit('/', 1)[-1]}: {call}"
        seen[event["auditID"]] = call
    by_call: dict[str, int] = {}
    for call in seen.values():
        by_call[call] = by_call.get(call, 0) + 1
    return len(seen), dict(sorted(by_call.items())), end


def kcm_job_requests(log: Path, offset: int, namespace: str) -> tuple[int, dict[str, int]]:
    """kube-controller-manager's requests on Jobs and Pods of ``namespace`` after byte
    ``offset`` of ``log``: their count and their count by controller and call."""
    count, by_call, _ = audit_requests(
        log, offset, KCM_USER_AGENT, namespace=namespace, resources=KCM_RESOURCES
    )
    return count, by_call


def _call(event: dict[str, Any]) -> str:
    """``verb resource[/subresource]`` of an audit event (the verb alone without one)."""
    ref = event.get("objectRef") or {}
    resource = str(ref.get("resource") or "")
    if ref.get("subresource"):
        resource += f"/{ref['subresource']}"
    verb = str(event.get("verb"))
    return f"{verb} {resource}" if resource else verb


@dataclass
class RunResult:
    operator: str
    kind: str
    mode: str
    qps: float
    burst: int
    jobs: int
    running: int
    first_child: list[float] = field(default_factory=list)
    all_children: list[float] = field(default_factory=list)
    running_times: list[float] = field(default_factory=list)
    wall: float = 0.0
    cpu: float = 0.0
    peak_rss_mib: float = 0.0
    requests: int = 0
    requests_by_call: dict[str, int] = field(default_factory=dict)
    #: The client settings, as the table's header shows them (e.g. ``20/40``).
    settings: str = ""
    #: CPU seconds by process, for an operator of several (Trainer and JobSet).
    cpu_by_process: dict[str, float] = field(default_factory=dict)
    #: kube-controller-manager's requests on the run's Jobs and Pods (``kcm_job_requests``).
    kcm_requests: int = 0
    kcm_by_call: dict[str, int] = field(default_factory=dict)
    #: kube-controller-manager's CPU seconds over the same window as ``cpu``.
    kcm_cpu: float = 0.0
    #: Seconds from SIGTERM to the operator's exit (the longest of its processes).
    stop_seconds: float = 0.0


def _median(values: Iterator[float]) -> float:
    listed = list(values)
    return statistics.median(listed) if listed else float("nan")


def _samples(result: RunResult, key: str) -> list[float]:
    if key == "first_child":
        return result.first_child
    if key == "all_children":
        return result.all_children
    return result.running_times


def summarize(results: list[RunResult]) -> dict[str, float]:
    """Medians over the repeats of one operator, one kind, one mode."""
    summary = {
        "runs": float(len(results)),
        "running": _median(float(r.running) for r in results),
        "wall": _median(r.wall for r in results),
        "cpu": _median(r.cpu for r in results),
        "cpu_per_job_ms": _median(r.cpu / r.jobs * 1000 for r in results),
        "peak_rss_mib": _median(r.peak_rss_mib for r in results),
        "requests": _median(float(r.requests) for r in results),
        "requests_per_job": _median(r.requests / r.jobs for r in results),
        "kcm_requests": _median(float(r.kcm_requests) for r in results),
        "all_requests": _median(float(r.requests + r.kcm_requests) for r in results),
        "kcm_cpu": _median(r.kcm_cpu for r in results),
        "stop_seconds": _median(r.stop_seconds for r in results),
    }
    for _label, key in LATENCY_ROWS:
        summary[f"{key}_p50"] = _median(percentile(_samples(r, key), 50) for r in results)
        summary[f"{key}_p99"] = _median(percentile(_samples(r, key), 99) for r in results)
    return summary


def print_table(
    kind: str, jobs: int, shape: str, mode: str, ours: list[RunResult], peer: list[RunResult]
) -> None:
    a, b = summarize(ours), summarize(peer)
    name = peer[0].operator
    settings = f"kubetrain {ours[0].settings}, {name} {peer[0].settings}"
    print(
        f"\n{kind} x{jobs} ({shape}), {mode} QPS/burst ({settings}); "
        f"median of {len(ours)} + {len(peer)} interleaved runs"
    )
    print(f"  {'':40}{'kubetrain':>12}{name:>19}{'kubetrain/peer':>16}")

    def row(label: str, key: str, unit: str, digits: int) -> None:
        ratio = a[key] / b[key] if b[key] else float("nan")
        print(
            f"  {label:40}{a[key]:>11.{digits}f}{unit}{b[key]:>18.{digits}f}{unit}{ratio:>15.2f}x"
        )

    for label, key in LATENCY_ROWS:
        row(f"{label} p50", f"{key}_p50", "s", 2)
        row(f"{label} p99", f"{key}_p99", "s", 2)
    row("wall until all Running", "wall", "s", 1)
    row("operator CPU", "cpu", "s", 2)
    row("operator CPU per job", "cpu_per_job_ms", "m", 1)
    row("operator peak RSS (MiB)", "peak_rss_mib", " ", 0)
    row("API requests", "requests", " ", 0)
    row("API requests per job", "requests_per_job", " ", 1)
    row("kube-controller-manager CPU", "kcm_cpu", "s", 2)
    row("kube-controller-manager Job+Pod requests", "kcm_requests", " ", 0)
    row("API requests with kcm's", "all_requests", " ", 0)
    row("SIGTERM -> exit", "stop_seconds", "s", 2)
    if a["running"] < jobs or b["running"] < jobs:
        print(
            f"  NOTE: not every job reached Running within --timeout "
            f"(kubetrain {a['running']:.0f}, {name} {b['running']:.0f} of {jobs})"
        )
