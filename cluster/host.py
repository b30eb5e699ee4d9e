"""What the real node changes on the host outside its own directory, and how it is undone:
the network namespace and its veth pair, cgroup directories in every cgroup v1 hierarchy,
the kernel settings the kubelet writes, the directories the kubelet and containerd create
at fixed paths, and mounts. Used by ``cluster.node``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
NETNS_DIR = Path("/run/netns")
#: The kernel settings the kubelet writes at every start (``setupKernelTunables``).
KUBELET_SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)
#: Paths the kubelet and containerd create whatever their configured directories are.
FIXED_PATHS = (
    Path("/var/lib/kubelet"),
    Path("/var/lib/kubelet/device-plugins"),
    Path("/var/log/containers"),
    Path("/var/log/pods"),
    Path("/run/containerd"),
)


class HostError(RuntimeError):
    """A host command failed."""


def run(args: Sequence[str], *, check: bool = True, input: bytes | None = None) -> str:
    """Run a command; return its stdout, or raise ``HostError`` with its output."""
    proc = subprocess.run(list(args), input=input, capture_output=True, check=False)
    if check and proc.returncode != 0:
        raise HostError(
            f"`{' '.join(args)}` exited with status {proc.returncode}, expected 0: "
            f"{proc.stderr.decode(errors='replace').strip()}"
        )
    return proc.stdout.decode(errors="replace")


def in_netns(netns: str, args: Sequence[str]) -> list[str]:
    """``args`` run inside network namespace ``netns``. nsenter, not ``ip netns exec``:
    that one remounts /sys, hiding /sys/fs/cgroup from runc."""
    return ["nsenter", f"--net={NETNS_DIR / netns}", *args]


def sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctls(names: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in names:
        with contextlib.suppress(OSError):
            out[name] = sysctl_path(name).read_text(encoding="ascii").strip()
    return out


def restore_sysctls(values: dict[str, str]) -> None:
    for name, value in values.items():
        path = sysctl_path(name)
        with contextlib.suppress(OSError):
            if path.read_text(encoding="ascii").strip() != value:
                path.write_text(value + "\n", encoding="ascii")


def record_host_state(state_file: Path) -> None:
    """Write what ``undo_host_state`` restores: the kernel settings and which fixed
    paths exist, before the node changes any of them. Kept from the first ``up``."""
    if state_file.exists():
        return
    state = {
        "sysctls": read_sysctls(KUBELET_SYSCTLS),
        "existing": [str(p) for p in FIXED_PATHS if p.exists()],
    }
    state_file.parent.mkdir(parents=True, exist_ok=True)
    state_file.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def undo_host_state(state_file: Path) -> None:
    """Restore the kernel settings and remove the fixed paths that did not exist."""
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return
    restore_sysctls(state.get("sysctls", {}))
    existing = set(state.get("existing", []))
    for path in sorted(FIXED_PATHS, key=lambda p: len(p.parts), reverse=True):
        if str(path) not in existing and path.exists():
            remove_tree(path)
    state_file.unlink()


def cgroup_hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy under /sys/fs/cgroup (v1 controllers, the named
    systemd one, and the unified one of a hybrid setup)."""
    mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    found = []
    for line in mounts:
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        mount_point = Path(fields[4])
        if fstype in ("cgroup", "cgroup2") and mount_point.parent == CGROUP_ROOT:
            found.append(mount_point)
    return sorted(set(found))


def create_cgroup_root(name: str) -> None:
    """``/<name>`` in every hierarchy; cpuset's must have CPUs and memory nodes before a
    child can take a task."""
    for hierarchy in cgroup_hierarchies():
        group = hierarchy / name
        group.mkdir(exist_ok=True)
        if (hierarchy / "cpuset.cpus").exists():
            for knob in ("cpuset.cpus", "cpuset.mems"):
                value = (hierarchy / knob).read_text(encoding="ascii").strip()
                (group / knob).write_text(value + "\n", encoding="ascii")


def cgroup_pids(name: str) -> set[int]:
    """Every process in ``/<name>`` or below, in any hierarchy."""
    pids: set[int] = set()
    for hierarchy in cgroup_hierarchies():
        # os.walk skips a directory that goes away while it looks (a container's cgroup
        # removed meanwhile); Path.rglob raised FileNotFoundError there.
        for directory, _dirs, files in os.walk(hierarchy / name):
            if "cgroup.procs" not in files:
                continue
            with contextlib.suppress(OSError):
                text = (Path(directory) / "cgroup.procs").read_text(encoding="ascii")
                pids.update(int(p) for p in text.split())
    return pids


def kill_cgroup(name: str, *, timeout: float = 15.0) -> None:
    """SIGKILL every process in ``/<name>`` until none is left."""
    deadline = time.monotonic() + timeout
    while pids := cgroup_pids(name):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise HostError(f"processes {sorted(pids)} of cgroup /{name} did not exit")
        time.sleep(0.1)


def remove_cgroup_root(name: str) -> None:
    """Remove ``/<name>`` and its children (deepest first) from every hierarchy."""
    for hierarchy in cgroup_hierarchies():
        group = hierarchy / name
        if not group.is_dir():
            continue
        children = sorted(
            (p for p in group.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
        )
        for child in [*children, group]:
            for _ in range(50):
                try:
                    child.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


def mounts_under(root: Path) -> list[Path]:
    """Mount points at or below ``root``, deepest first."""
    prefix = str(root)
    found = []
    for line in Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            found.append(Path(point))
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def unmount_all(root: Path) -> None:
    """Unmount everything at or below ``root`` (lazily: a busy mount goes at last use)."""
    for _ in range(5):
        points = mounts_under(root)
        if not points:
            return
        for point in points:
            run(["umount", "-l", str(point)], check=False)


def remove_tree(path: Path) -> None:
    """Remove a directory tree after unmounting whatever is mounted inside it."""
    unmount_all(path)
    run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def processes_with_arg(arg: str) -> list[int]:
    """Pids of processes with ``arg`` as one of their command-line arguments."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if arg.encode() in args:
            found.append(int(entry.name))
    return found


def kill_processes(pids: Iterable[int], *, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``, each of ``pids``."""
    pending = set(pids)
    for pid in pending:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pending:
        pending = {pid for pid in pending if Path(f"/proc/{pid}").exists() and not _zombie(pid)}
        if not pending:
            return
        if time.monotonic() > deadline:
            for pid in pending:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
        time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True
    return stat[stat.rindex(")") + 2 :].startswith(("Z", "X"))


def rss_bytes(pid: int) -> int:
    """Resident memory of one process (0 when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def resolve(server: str, name: str, *, timeout: float = 1.0) -> list[str]:
    """The IPv4 addresses DNS server ``server`` gives for ``name`` (A query, UDP)."""
    query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    query += (
        b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00\x00\x01\x00\x01"
    )
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.sendto(query, (server, 53))
            answer = sock.recv(4096)
        except OSError:
            return []
    if len(answer) < 12 or answer[3] & 0x0F != 0:
        return []
    count, offset = int.from_bytes(answer[6:8], "big"), len(query)
    found = []
    for _ in range(count):
        offset += 2 if answer[offset] & 0xC0 == 0xC0 else answer.index(b"\x00", offset) + 1 - offset
        rtype, length = (
            int.from_bytes(answer[offset : offset + 2], "big"),
            int.from_bytes(answer[offset + 8 : offset + 10], "big"),
        )
        offset += 10
        if rtype == 1 and length == 4:
            found.append(".".join(str(b) for b in answer[offset : offset + 4]))
        offset += length
    return found
