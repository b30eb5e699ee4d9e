"""The node tuner's checks, run against directories holding real files laid out like a
host root and /proc, plus the real /proc of this machine for the memlock check."""

from __future__ import annotations

import logging
import resource
from pathlib import Path

import pytest

from kubetrain.constructs.types import check_labels
from kubetrain.node_tuner import (
    DETAIL_ANNOTATION,
    LABEL,
    REASON_MEMLOCK,
    REASON_PEERMEM,
    REASON_REMOVE_IPC,
    REASON_SYSCTL,
    CheckResult,
    TunerConfig,
    apply_sysctls,
    check_memlock,
    check_peermem,
    check_remove_ipc,
    label_patch,
    label_value,
    main,
    parse_sysctl,
    run_checks,
)

LIMITS_HEADER = "Limit                     Soft Limit           Hard Limit           Units     \n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def limits(proc: Path, soft: str, hard: str) -> None:
    write(
        proc / "self" / "limits",
        LIMITS_HEADER
        + "Max open files            1048576              1048576              files     \n"
        + f"Max locked memory         {soft:<20} {hard:<20} bytes     \n",
    )


# --- sysctls ------------------------------------------------------------------------


def test_sysctl_is_written_and_read_back(tmp_path: Path) -> None:
    path = write(tmp_path / "sys/net/core/rmem_max", "212992\n")
    (result,) = apply_sysctls({"net.core.rmem_max": "67108864"}, proc_root=tmp_path)
    assert result.ok and result.check == "sysctl:net.core.rmem_max"
    assert path.read_text() == "67108864\n"


def test_sysctl_already_set_is_left_alone(tmp_path: Path) -> None:
    path = write(tmp_path / "sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n")
    before = path.stat().st_mtime_ns
    (result,) = apply_sysctls({"net.ipv4.tcp_rmem": "4096 131072 6291456"}, proc_root=tmp_path)
    assert result.ok
    assert path.stat().st_mtime_ns == before


def test_sysctl_that_does_not_exist_fails(tmp_path: Path) -> None:
    (result,) = apply_sysctls({"net.core.no_such_knob": "1"}, proc_root=tmp_path)
    assert not result.ok and result.reason == REASON_SYSCTL
    assert "cannot set net.core.no_such_knob=1" in result.detail


def test_sysctl_that_cannot_be_written_fails(tmp_path: Path) -> None:
    (tmp_path / "sys/vm/max_map_count").mkdir(parents=True)
    (result,) = apply_sysctls({"vm.max_map_count": "1048576"}, proc_root=tmp_path)
    assert not result.ok and result.reason == REASON_SYSCTL


@pytest.mark.parametrize(
    "text", ["net.core.rmem_max", "rmem_max=1", "net.core.rmem_max=", "a b=1"], ids=repr
)
def test_rejects_malformed_sysctl(text: str) -> None:
    with pytest.raises(ValueError, match=r"sysctl \(.*\) must be name=value"):
        parse_sysctl(text)


# --- memlock ------------------------------------------------------------------------


def test_memlock_unlimited_passes(tmp_path: Path) -> None:
    limits(tmp_path, "unlimited", "unlimited")
    result = check_memlock(proc_root=tmp_path)
    assert result.ok and "soft=unlimited hard=unlimited" in result.detail


@pytest.mark.parametrize(("soft", "hard"), [("8388608", "8388608"), ("65536", "unlimited")])
def test_memlock_limited_fails(tmp_path: Path, soft: str, hard: str) -> None:
    limits(tmp_path, soft, hard)
    result = check_memlock(proc_root=tmp_path)
    assert not result.ok and result.reason == REASON_MEMLOCK
    assert f"soft={soft}" in result.detail and "LimitMEMLOCK=infinity" in result.detail


def test_memlock_without_the_limits_file_fails(tmp_path: Path) -> None:
    result = check_memlock(proc_root=tmp_path)
    assert not result.ok and result.reason == REASON_MEMLOCK


def test_memlock_reads_this_process_real_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    result = check_memlock(proc_root=Path("/proc"))
    assert result.ok == (soft == hard == resource.RLIM_INFINITY)
    if soft != resource.RLIM_INFINITY:
        assert f"soft={soft}" in result.detail


# --- RemoveIPC ----------------------------------------------------------------------


def test_remove_ipc_defaults_to_yes(tmp_path: Path) -> None:
    result = check_remove_ipc(host_root=tmp_path)
    assert not result.ok and result.reason == REASON_REMOVE_IPC
    assert "systemd default" in result.detail


def test_remove_ipc_commented_out_is_still_yes(tmp_path: Path) -> None:
    write(tmp_path / "etc/systemd/logind.conf", "[Login]\n#RemoveIPC=no\n")
    assert not check_remove_ipc(host_root=tmp_path).ok


def test_remove_ipc_no_in_logind_conf_passes(tmp_path: Path) -> None:
    write(tmp_path / "etc/systemd/logind.conf", "[Login]\nKillUserProcesses=no\nRemoveIPC=no\n")
    result = check_remove_ipc(host_root=tmp_path)
    assert result.ok and "(/etc/systemd/logind.conf)" in result.detail


def test_remove_ipc_drop_in_wins_over_logind_conf(tmp_path: Path) -> None:
    write(tmp_path / "etc/systemd/logind.conf", "[Login]\nRemoveIPC=yes\n")
    write(tmp_path / "etc/systemd/logind.conf.d/90-kubetrain.conf", "[Login]\nRemoveIPC=no\n")
    result = check_remove_ipc(host_root=tmp_path)
    assert result.ok and "90-kubetrain.conf" in result.detail


def test_remove_ipc_later_drop_in_wins(tmp_path: Path) -> None:
    write(tmp_path / "usr/lib/systemd/logind.conf.d/10-a.conf", "[Login]\nRemoveIPC=no\n")
    write(tmp_path / "etc/systemd/logind.conf.d/20-b.conf", "[Login]\nRemoveIPC=yes\n")
    assert not check_remove_ipc(host_root=tmp_path).ok


def test_remove_ipc_etc_drop_in_masks_the_same_name_in_usr_lib(tmp_path: Path) -> None:
    write(tmp_path / "usr/lib/systemd/logind.conf.d/50-x.conf", "[Login]\nRemoveIPC=yes\n")
    write(tmp_path / "etc/systemd/logind.conf.d/50-x.conf", "[Login]\nRemoveIPC=false\n")
    assert check_remove_ipc(host_root=tmp_path).ok


def test_remove_ipc_outside_the_login_section_is_ignored(tmp_path: Path) -> None:
    write(tmp_path / "etc/systemd/logind.conf", "[Other]\nRemoveIPC=no\n")
    assert not check_remove_ipc(host_root=tmp_path).ok


# --- nvidia-peermem ------------------------------------------------------------------


def peermem(root: Path, *, required: bool = True) -> CheckResult:
    return check_peermem(sys_root=root / "sys", proc_root=root / "proc", required=required)


def test_peermem_not_required_passes(tmp_path: Path) -> None:
    assert peermem(tmp_path, required=False).ok


def test_peermem_in_sys_module_passes(tmp_path: Path) -> None:
    (tmp_path / "sys/module/nvidia_peermem").mkdir(parents=True)
    assert peermem(tmp_path).ok


def test_peermem_in_proc_modules_passes(tmp_path: Path) -> None:
    write(
        tmp_path / "proc/modules",
        "nvidia_uvm 1540096 0 - Live 0x0 (PO)\nnvidia_peermem 16384 0 - Live 0x0 (PO)\n",
    )
    assert peermem(tmp_path).ok


def test_peermem_missing_fails(tmp_path: Path) -> None:
    write(tmp_path / "proc/modules", "nvidia 54833152 1 nvidia_uvm, Live 0x0 (PO)\n")
    result = peermem(tmp_path)
    assert not result.ok and result.reason == REASON_PEERMEM


# --- label ----------------------------------------------------------------------------


def test_label_is_ok_when_every_check_passes() -> None:
    assert label_value([CheckResult("memlock", True, "")]) == "ok"


def test_label_lists_distinct_reasons_in_check_order() -> None:
    results = [
        CheckResult("sysctl:a.b", False, "", REASON_SYSCTL),
        CheckResult("sysctl:a.c", False, "", REASON_SYSCTL),
        CheckResult("memlock", False, "", REASON_MEMLOCK),
        CheckResult("remove-ipc", True, ""),
        CheckResult("nvidia-peermem", False, "", REASON_PEERMEM),
    ]
    value = label_value(results)
    assert value == "sysctl-failed.memlock-limited.peermem-missing"
    check_labels("label", {LABEL: value})


def test_label_value_stays_a_valid_label_with_every_failure() -> None:
    reasons = [REASON_SYSCTL, REASON_MEMLOCK, REASON_REMOVE_IPC, REASON_PEERMEM, "x" * 20]
    value = label_value(CheckResult(r, False, "", r) for r in reasons)
    assert len(value) <= 63
    assert value.startswith("sysctl-failed.memlock-limited.removeipc-enabled")
    check_labels("label", {LABEL: value})


def test_label_patch_sets_only_the_label_and_the_detail_annotation() -> None:
    results = [
        CheckResult("memlock", False, "soft=8 hard=8", REASON_MEMLOCK),
        CheckResult("remove-ipc", True, "RemoveIPC=no"),
    ]
    # A merge patch of these two keys: the tuner never reads the node first.
    assert label_patch(results) == {
        "metadata": {
            "labels": {LABEL: "memlock-limited"},
            "annotations": {
                DETAIL_ANNOTATION: "check=memlock status=FAIL (memlock-limited) soft=8 hard=8; "
                "check=remove-ipc status=ok RemoveIPC=no"
            },
        }
    }


# --- a whole round ----------------------------------------------------------------------


def healthy_host(root: Path) -> tuple[Path, Path]:
    """A host root with logind's configuration, and a proc and sys (siblings of proc) as
    the checker's own would show them."""
    host, proc = root / "host", root / "proc"
    write(host / "etc/systemd/logind.conf.d/kubetrain.conf", "[Login]\nRemoveIPC=no\n")
    (root / "sys/module/nvidia_peermem").mkdir(parents=True)
    limits(proc, "unlimited", "unlimited")
    write(proc / "sys/net/core/rmem_max", "212992\n")
    return host, proc


def test_run_checks_reports_one_result_per_sysctl_and_check(tmp_path: Path) -> None:
    host, proc = healthy_host(tmp_path)
    results = run_checks(
        TunerConfig(
            host_root=host,
            proc_root=proc,
            sys_root=tmp_path / "sys",
            sysctls={"net.core.rmem_max": "67108864"},
            require_peermem=True,
        )
    )
    assert [r.check for r in results] == [
        "sysctl:net.core.rmem_max",
        "memlock",
        "remove-ipc",
        "nvidia-peermem",
    ]
    assert all(r.ok for r in results)


def test_main_once_logs_one_line_per_check_and_exits_0_when_healthy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    host, proc = healthy_host(tmp_path)
    argv = [
        f"--host-root={host}",
        f"--proc-root={proc}",
        f"--sys-root={tmp_path / 'sys'}",
        "--sysctl=net.core.rmem_max=67108864",
        "--require-peermem",
        "--once",
        "--no-label",
    ]
    with caplog.at_level(logging.INFO, logger="kubetrain.node_tuner"):
        assert main(argv) == 0
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split()[1] for line in lines[:4]] == [
        "check=sysctl:net.core.rmem_max",
        "check=memlock",
        "check=remove-ipc",
        "check=nvidia-peermem",
    ]
    assert all("status=ok" in line for line in lines[:4])
    assert lines[4] == f"node-tuner result {LABEL}=ok"
    assert (proc / "sys/net/core/rmem_max").read_text() == "67108864\n"


def test_main_once_exits_1_and_reports_the_reason_when_memlock_is_limited(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    host, proc = healthy_host(tmp_path)
    limits(proc, "8388608", "8388608")
    with caplog.at_level(logging.INFO, logger="kubetrain.node_tuner"):
        code = main([f"--host-root={host}", f"--proc-root={proc}", "--once", "--no-label"])
    assert code == 1
    assert f"node-tuner result {LABEL}=memlock-limited" in caplog.messages


def test_rejects_bad_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["--sysctl=oops", "--once", "--no-label"]) == 2
    assert main(["--interval=0", "--once", "--no-label"]) == 2
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main([f"--host-root={tmp_path}", "--once"]) == 2
