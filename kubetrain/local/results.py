"""What :func:`kubetrain.local.train` returns or raises: each rank's exit code, duration
and log, read after the run from the status files the ranks write
(:mod:`kubetrain.local.rank_main`) and from the nodes' logs, where torchrun prefixes every
rank's line with ``[rank<N>]:``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: Lines of the failing rank's log carried by :class:`LocalTrainError`.
TAIL_LINES = 30


@dataclass(frozen=True)
class RankResult:
    """One rank of a finished run."""

    rank: int
    node_rank: int
    local_rank: int
    exit_code: int | None
    """None when the rank was stopped before its function returned (another one failed)."""
    seconds: float | None
    """How long the function ran in this rank."""
    log: Path
    """This rank's lines (stdout and stderr), without torchrun's prefix."""


@dataclass(frozen=True)
class TrainResult:
    """A finished :func:`train` run."""

    name: str
    """The TrainJob's name."""
    phase: str
    """``Complete``, ``Failed`` or ``Interrupted``."""
    reason: str
    seconds: float
    run_dir: Path
    """Where the script, its arguments, the statuses and the logs are kept."""
    ranks: list[RankResult] = field(default_factory=list)
    nodes: dict[str, int | None] = field(default_factory=dict)
    """Each node's (torchrun's) exit code, by ``node-<i>``."""
    logs: dict[str, Path] = field(default_factory=dict)
    """Each node's whole log, by ``node-<i>``."""


class LocalTrainError(RuntimeError):
    """A :func:`train` run failed: ``rank`` (None when no rank reported, e.g. a node's
    torchrun failed to start) exited with ``exit_code``; ``log_tail`` is the end of its log
    and ``result`` the whole run."""

    def __init__(
        self, message: str, *, rank: int | None, exit_code: int, log_tail: str, result: TrainResult
    ) -> None:
        super().__init__(message)
        self.rank = rank
        self.exit_code = exit_code
        self.log_tail = log_tail
        self.result = result


def collect_ranks(
    *, nodes: int, procs: int, statuses: Path, node_logs: Mapping[str, Path], log_dir: Path
) -> list[RankResult]:
    """Every rank's status (from its status file) and log (its prefixed lines of its
    node's log)."""
    lines: dict[int, list[str]] = {}
    for node_log in node_logs.values():
        for line in node_log.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.startswith("[rank"):
                continue
            label, sep, rest = line.partition("]:")
            if sep and label[5:].isdigit():
                lines.setdefault(int(label[5:]), []).append(rest)
    out = []
    for rank in range(nodes * procs):
        status_file = statuses / f"rank-{rank}.json"
        status = json.loads(status_file.read_text()) if status_file.exists() else {}
        log = log_dir / f"rank-{rank}.log"
        log.write_text("".join(f"{line}\n" for line in lines.get(rank, [])), encoding="utf-8")
        out.append(
            RankResult(
                rank=rank,
                node_rank=rank // procs,
                local_rank=rank % procs,
                exit_code=status.get("exit_code"),
                seconds=status.get("seconds"),
                log=log,
            )
        )
    return out


def _tail(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-TAIL_LINES:])


def failure(result: TrainResult, failed_node: str | None, node_code: int) -> LocalTrainError:
    """The error for a failed run: the first rank that exited non-zero (by the time its
    status was written), else the node whose exit failed the job."""
    statuses = []
    for rank in result.ranks:
        if rank.exit_code not in (None, 0):
            status = json.loads((result.run_dir / "ranks" / f"rank-{rank.rank}.json").read_text())
            statuses.append((float(status["finished_at"]), rank))
    if statuses:
        first = min(statuses, key=lambda item: item[0])[1]
        assert first.exit_code is not None
        tail = _tail(first.log)
        return LocalTrainError(
            f"TrainJob {result.name} failed: rank {first.rank} (node {first.node_rank}, "
            f"local rank {first.local_rank}) exited with code {first.exit_code}; the end of "
            f"its log ({first.log}):\n{tail}",
            rank=first.rank,
            exit_code=first.exit_code,
            log_tail=tail,
            result=result,
        )
    node_log = result.logs.get(failed_node or "")
    tail = _tail(node_log) if node_log is not None else ""
    where = failed_node or "no node"
    return LocalTrainError(
        f"TrainJob {result.name} failed: {result.reason}; no rank reported an exit code; "
        f"the end of {where}'s log ({node_log}):\n{tail}",
        rank=None,
        exit_code=node_code,
        log_tail=tail,
        result=result,
    )


__all__ = ["LocalTrainError", "RankResult", "TrainResult", "collect_ranks", "failure"]
