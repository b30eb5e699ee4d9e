"""The GPU node tuner: ``python -m kubetrain.node_tuner``, run by a GpuNodePool's
DaemonSet on every node of the pool, in two steps with different privileges:

- ``--phase=apply`` (an init container: root, no capabilities, no API token): writes the
  pool's sysctls through the host files mounted for exactly those sysctls, logs the
  result, and exits;
- ``--phase=check`` (the main container: non-root, no capabilities, nothing writable):
  reads the sysctls back, checks what only the node's configuration can fix (locked-memory
  limit, systemd ``RemoveIPC``, ``nvidia-peermem``), logs one line per check, and labels
  its node ``kubetrain.dev/node-tuning=ok`` or with short failure reasons
  (``memlock-limited``, ``removeipc-enabled``, ``peermem-missing``, ``sysctl-failed``)
  joined by ``.``; then sleeps and checks again.

``--phase=all`` (the default, by hand) does both. Checks take the host, proc and sys paths
as parameters, so tests run them against directories holding real files. The one API call
is a merge patch of the node's label and annotation (no read): the ServiceAccount may only
``patch`` nodes, and the pool's ValidatingAdmissionPolicy narrows that to ``kubetrain.dev/``
labels and annotations of the node its pod runs on.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kubetrain.api import keys as K

LABEL = K.NODE_TUNING_LABEL
"""Node label: ``ok`` or the failed checks' reasons joined by ``.``."""
DETAIL_ANNOTATION = K.NODE_TUNING_DETAIL_ANNOTATION
"""Node annotation: one line per check, for humans."""
OK = K.NODE_TUNING_OK

REASON_MEMLOCK = "memlock-limited"
REASON_REMOVE_IPC = "removeipc-enabled"
REASON_PEERMEM = "peermem-missing"
REASON_SYSCTL = "sysctl-failed"

DEFAULT_INTERVAL_S = 300
LABEL_VALUE_MAX = 63

log = logging.getLogger("kubetrain.node_tuner")

# systemd reads logind.conf, then drop-ins from these directories (a drop-in in /etc
# replaces one of the same name further down), in file-name order; the last
# assignment wins.
_LOGIND_MAIN = ("etc/systemd/logind.conf", "usr/lib/systemd/logind.conf")
_LOGIND_DROPIN_DIRS = (
    "etc/systemd/logind.conf.d",
    "run/systemd/logind.conf.d",
    "usr/local/lib/systemd/logind.conf.d",
    "usr/lib/systemd/logind.conf.d",
)
_SYSCTL_NAME = re.compile(r"^[a-z0-9_]+(\.[A-Za-z0-9_-]+)+$")


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check: ``reason`` is the label token when it failed."""

    check: str
    ok: bool
    detail: str
    reason: str = ""

    def line(self) -> str:
        status = "ok" if self.ok else f"FAIL ({self.reason})"
        return f"check={self.check} status={status} {self.detail}"


# --- sysctls ------------------------------------------------------------------------


def parse_sysctl(text: str) -> tuple[str, str]:
    """``name=value`` -> (name, value); raises ValueError naming what is wrong."""
    name, sep, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not _SYSCTL_NAME.match(name) or not value or "\n" in value:
        raise ValueError(
            f"sysctl ({text!r}) must be name=value with a dotted name, e.g. "
            "net.core.rmem_max=67108864"
        )
    return name, value


def _normalize(value: str) -> str:
    return " ".join(value.split())


def apply_sysctls(sysctls: Mapping[str, str], *, proc_root: Path) -> list[CheckResult]:
    """Write each sysctl under ``proc_root/sys`` unless it already has the value, then
    read it back. Writing needs root and a writable file, no capability; ``net.*``
    paths resolve in the caller's network namespace (the DaemonSet's: the host's)."""
    results = []
    for name, wanted in sorted(sysctls.items()):
        path = proc_root / "sys" / name.replace(".", "/")
        check = f"sysctl:{name}"
        try:
            current = path.read_text()
            if _normalize(current) != _normalize(wanted):
                path.write_text(wanted + "\n")
                current = path.read_text()
        except OSError as err:
            results.append(
                CheckResult(check, False, f"cannot set {name}={wanted}: {err}", REASON_SYSCTL)
            )
            continue
        if _normalize(current) == _normalize(wanted):
            results.append(CheckResult(check, True, f"{name}={_normalize(current)}"))
        else:
            results.append(
                CheckResult(
                    check,
                    False,
                    f"{name} is {_normalize(current)!r} after writing {wanted!r}",
                    REASON_SYSCTL,
                )
            )
    return results


# --- memlock ------------------------------------------------------------------------


def verify_sysctls(sysctls: Mapping[str, str], *, proc_root: Path) -> list[CheckResult]:
    """Read each sysctl back without writing it (the unprivileged check step)."""
    results = []
    for name, wanted in sorted(sysctls.items()):
        path = proc_root / "sys" / name.replace(".", "/")
        check = f"sysctl:{name}"
        try:
            current = _normalize(path.read_text())
        except OSError as err:
            results.append(CheckResult(check, False, f"cannot read {name}: {err}", REASON_SYSCTL))
            continue
        if current == _normalize(wanted):
            results.append(CheckResult(check, True, f"{name}={current}"))
        else:
            results.append(
                CheckResult(
                    check,
                    False,
                    f"{name} is {current!r}, expected {wanted!r} (the tuner's init step sets "
                    "it when its pod starts: restart the pod to set it again)",
                    REASON_SYSCTL,
                )
            )
    return results


def check_memlock(*, proc_root: Path) -> CheckResult:
    """Containers inherit the runtime's RLIMIT_MEMLOCK; RDMA needs it unlimited
    (containerd ``LimitMEMLOCK=infinity``), or NCCL silently falls back to TCP."""
    path = proc_root / "self" / "limits"
    try:
        text = path.read_text()
    except OSError as err:
        return CheckResult("memlock", False, f"cannot read {path}: {err}", REASON_MEMLOCK)
    for line in text.splitlines():
        if line.startswith("Max locked memory"):
            fields = line[len("Max locked memory") :].split()
            soft, hard = [*fields, "?", "?"][:2]
            detail = f"max locked memory soft={soft} hard={hard}"
            if soft == hard == "unlimited":
                return CheckResult("memlock", True, detail)
            return CheckResult(
                "memlock",
                False,
                f"{detail}; set LimitMEMLOCK=infinity for containerd and restart it",
                REASON_MEMLOCK,
            )
    return CheckResult("memlock", False, f"no 'Max locked memory' in {path}", REASON_MEMLOCK)


# --- systemd RemoveIPC --------------------------------------------------------------


def _logind_files(host_root: Path) -> list[Path]:
    files = [host_root / main for main in _LOGIND_MAIN if (host_root / main).is_file()][:1]
    dropins: dict[str, Path] = {}
    for directory in _LOGIND_DROPIN_DIRS:
        base = host_root / directory
        if base.is_dir():
            for path in base.glob("*.conf"):
                dropins.setdefault(path.name, path)
    return files + [dropins[name] for name in sorted(dropins)]


def _remove_ipc_setting(path: Path) -> str | None:
    """The last ``RemoveIPC=`` of the [Login] section of one file, if any."""
    value = None
    section = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        key, sep, setting = line.partition("=")
        if sep and section == "Login" and key.strip() == "RemoveIPC":
            value = setting.strip()
    return value


def check_remove_ipc(*, host_root: Path) -> CheckResult:
    """systemd-logind removes a user's SysV/POSIX IPC (NCCL's shared memory) when the
    user's last session ends unless ``RemoveIPC=no``; the default is yes."""
    value, source = "yes", "systemd default"
    try:
        for path in _logind_files(host_root):
            setting = _remove_ipc_setting(path)
            if setting is not None:
                value, source = setting, "/" + str(path.relative_to(host_root))
    except OSError as err:
        return CheckResult(
            "remove-ipc", False, f"cannot read logind config: {err}", "logind-unreadable"
        )
    if value.lower() in ("no", "false", "0", "off"):
        return CheckResult("remove-ipc", True, f"RemoveIPC={value} ({source})")
    return CheckResult(
        "remove-ipc",
        False,
        f"RemoveIPC={value} ({source}); set RemoveIPC=no in a logind.conf.d drop-in",
        REASON_REMOVE_IPC,
    )


# --- nvidia-peermem -----------------------------------------------------------------


def check_peermem(*, sys_root: Path, proc_root: Path, required: bool) -> CheckResult:
    """GPUDirect RDMA over InfiniBand/RoCE goes through the ``nvidia_peermem`` module
    (or DMA-BUF, which this check does not detect). Loaded modules are the kernel's, so a
    container's own ``/sys/module`` and ``/proc/modules`` show the host's."""
    if not required:
        return CheckResult("nvidia-peermem", True, "not required by this pool's fabric")
    if (sys_root / "module" / "nvidia_peermem").is_dir():
        return CheckResult("nvidia-peermem", True, "nvidia_peermem loaded (/sys/module)")
    modules = proc_root / "modules"
    try:
        loaded = any(line.split(" ", 1)[0] == "nvidia_peermem" for line in modules.open())
    except OSError:
        loaded = False
    if loaded:
        return CheckResult("nvidia-peermem", True, "nvidia_peermem loaded (/proc/modules)")
    return CheckResult(
        "nvidia-peermem",
        False,
        "nvidia_peermem is not loaded: GPUDirect RDMA is off (modprobe nvidia-peermem, "
        "or enable it in the GPU operator's driver settings)",
        REASON_PEERMEM,
    )


# --- all checks, label --------------------------------------------------------------


PHASES = ("all", "apply", "check")


@dataclass(frozen=True, kw_only=True)
class TunerConfig:
    """What one round of the tuner does."""

    host_root: Path = Path("/host")
    """Where the host's logind configuration is (``etc/systemd``, ``usr/lib/systemd``)."""
    proc_root: Path = Path("/proc")
    sys_root: Path = Path("/sys")
    sysctls: Mapping[str, str] | None = None
    require_peermem: bool = False
    #: ``all``: set the sysctls, then check; ``check``: only read them back.
    phase: str = "all"


def run_checks(config: TunerConfig) -> list[CheckResult]:
    """Set (phase ``all``) or read back (``check``) the sysctls and run every check; one
    result per sysctl and per check."""
    if config.phase == "check":
        results = verify_sysctls(config.sysctls or {}, proc_root=config.proc_root)
    else:
        results = apply_sysctls(config.sysctls or {}, proc_root=config.proc_root)
    results.append(check_memlock(proc_root=config.proc_root))
    results.append(check_remove_ipc(host_root=config.host_root))
    results.append(
        check_peermem(
            sys_root=config.sys_root, proc_root=config.proc_root, required=config.require_peermem
        )
    )
    return results


def label_value(results: Iterable[CheckResult]) -> str:
    """``ok``, or the distinct failure reasons in check order joined by ``.``, cut at a
    reason boundary to fit a label value (63 characters)."""
    reasons: list[str] = []
    for result in results:
        reason = result.reason or "check-failed"
        if not result.ok and reason not in reasons:
            reasons.append(reason)
    if not reasons:
        return OK
    value = reasons[0]
    for reason in reasons[1:]:
        if len(value) + 1 + len(reason) > LABEL_VALUE_MAX:
            break
        value = f"{value}.{reason}"
    return value


MERGE_PATCH = "application/merge-patch+json"


class NodeApi(Protocol):
    """The one node call the tuner makes (``kubernetes.client.CoreV1Api`` has it): its
    ServiceAccount may patch nodes and do nothing else, not even read them."""

    def patch_node(self, name: str, body: Any, *, _content_type: str | None = ...) -> Any: ...


def label_patch(results: Sequence[CheckResult]) -> dict[str, Any]:
    """The JSON merge patch that sets the label and the detail annotation."""
    detail = "; ".join(r.line() for r in results)
    return {
        "metadata": {
            "labels": {LABEL: label_value(results)},
            "annotations": {DETAIL_ANNOTATION: detail},
        }
    }


def label_node(api: NodeApi, node_name: str, results: Sequence[CheckResult]) -> None:
    """Merge-patch the label and the detail annotation onto the node, without reading it
    first. Sent every round: the API server stores nothing when they are unchanged (no
    new resourceVersion, no watch event), and a label someone removed comes back."""
    api.patch_node(node_name, label_patch(results), _content_type=MERGE_PATCH)


def _node_api() -> NodeApi:
    from kubernetes import client, config

    config.load_incluster_config()  # type: ignore[no-untyped-call]
    api: NodeApi = client.CoreV1Api()
    return api


# --- entry point --------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kubetrain.node_tuner",
        description="Apply sysctls, check memlock/RemoveIPC/nvidia-peermem, label the node.",
    )
    for name, default in (("host", "/host"), ("proc", "/proc"), ("sys", "/sys")):
        parser.add_argument(f"--{name}-root", type=Path, default=Path(default))
    parser.add_argument(
        "--sysctl",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="sysctl to apply (repeatable)",
    )
    parser.add_argument("--require-peermem", action="store_true")
    parser.add_argument(
        "--phase",
        choices=PHASES,
        default="all",
        help="apply: set the sysctls and exit (the init step, root); check: read them "
        "back, run the checks and label the node (unprivileged); all: both (default)",
    )
    parser.add_argument(
        "--interval",
        type=int,
        default=DEFAULT_INTERVAL_S,
        help=f"seconds between rounds (default {DEFAULT_INTERVAL_S})",
    )
    parser.add_argument("--once", action="store_true", help="run one round and exit")
    parser.add_argument("--no-label", action="store_true", help="only log; do not label the node")
    return parser


def main(argv: Sequence[str] | None = None, *, api: NodeApi | None = None) -> int:
    """Run rounds until SIGTERM (or one with ``--once``). Exit status with ``--once``:
    0 when every check passed, 1 otherwise."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    args = build_parser().parse_args(argv)
    try:
        sysctls = dict(parse_sysctl(s) for s in args.sysctl)
    except ValueError as err:
        log.error("node-tuner: %s", err)
        return 2
    if args.interval < 1:
        log.error("node-tuner: --interval (%s) must be >= 1", args.interval)
        return 2
    config = TunerConfig(
        host_root=args.host_root,
        proc_root=args.proc_root,
        sys_root=args.sys_root,
        sysctls=sysctls,
        require_peermem=args.require_peermem,
        phase=args.phase,
    )
    if args.phase == "apply":
        # The init step: set what needs root, report, and let the checker judge
        # (a non-zero exit here would only crash-loop the pod and hide the report).
        for result in apply_sysctls(sysctls, proc_root=args.proc_root):
            log.info("node-tuner %s", result.line())
        return 0
    node_name = os.environ.get("NODE_NAME", "")
    if not args.no_label and not node_name:
        log.error("node-tuner: NODE_NAME is not set (give it from spec.nodeName)")
        return 2
    labelled = ""
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while True:
        results = run_checks(config)
        for result in results:
            log.info("node-tuner %s", result.line())
        value = label_value(results)
        log.info("node-tuner result %s=%s", LABEL, value)
        if not args.no_label:
            try:
                if api is None:
                    api = _node_api()
                label_node(api, node_name, results)
                if value != labelled:
                    log.info("node-tuner labelled node %s %s=%s", node_name, LABEL, value)
                    labelled = value
            except Exception as err:  # report and retry next round; never crash-loop
                log.error("node-tuner cannot label node %s: %s", node_name, err)
        if args.once:
            return 0 if value == OK else 1
        if stop.wait(args.interval):
            return 0


if __name__ == "__main__":
    sys.exit(main())
