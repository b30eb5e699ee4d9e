"""Where the Go tools live: the pinned versions, the cache directory names (the same in
cluster/cluster.mk and cluster/tools.py), and the error when they are not built."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from cluster import tools as cluster_tools
from cluster.node_config import NodeNetwork, corefile
from cluster.tools import (
    BINARIES,
    BUILDING_ENV,
    COREDNS_MODULE,
    KUEUE_MODULE,
    PROMETHEUS_MODULE,
    SCHEDULER_PLUGINS_MODULE,
    ToolDirs,
    Tools,
    ToolsMissingError,
    Versions,
    find_tools,
    module_digest,
    module_version,
    prometheus_release,
)
from tests.conftest import REPO_ROOT


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``KUBETRAIN_CACHE`` with no tool built in it (and no directory override)."""
    monkeypatch.setenv("KUBETRAIN_CACHE", str(tmp_path))
    monkeypatch.delenv("KUBETRAIN_CLUSTER_TOOLS_DIR", raising=False)
    monkeypatch.delenv(BUILDING_ENV, raising=False)
    return tmp_path


def test_pinned_versions_come_from_the_tool_modules() -> None:
    versions = Versions.pinned()
    assert versions.kubernetes == "v1.34.4"
    assert versions.scheduler_plugins.startswith("v0.34."), versions
    assert versions.kueue.startswith("v0.15."), versions
    assert versions.helm.startswith("v3.19."), versions
    assert versions.volcano_apis.startswith("v1.14."), versions
    assert versions.controller_gen == "v0.18.0", versions
    assert versions.training_operator.startswith("v1.9."), versions
    assert versions.mpi_operator == "v0.8.0", versions
    assert versions.trainer == "v2.3.0", versions
    assert versions.jobset == "v0.12.0", versions
    assert versions.prometheus == "v0.316.0", versions
    assert versions.prometheus_release == "3.16.0", versions
    assert versions.grafana_sdk == "v0.0.22", versions
    assert versions.metrics_server == "v0.8.0", versions


@pytest.mark.parametrize(
    ("module_version", "release"),
    [("v0.316.0", "3.16.0"), ("v0.300.1", "3.0.1"), ("v0.310.2", "3.10.2")],
    ids=["3.16.0", "3.0.1", "3.10.2"],
)
def test_prometheus_release_of_a_module_version(module_version: str, release: str) -> None:
    assert prometheus_release(module_version) == release


@pytest.mark.parametrize("module_version", ["v2.55.1", "v0.55.1", "v0.316"], ids=str)
def test_rejects_a_version_that_is_no_prometheus_3_module_version(module_version: str) -> None:
    with pytest.raises(ValueError, match=r"is not a Prometheus module version: expected v0.MNN.P"):
        prometheus_release(module_version)


def test_prometheus_module_has_no_replace_directive() -> None:
    # The reason for the pin (see its go.mod): nothing of upstream's go.mod to copy.
    go_mod = (PROMETHEUS_MODULE / "go.mod").read_text(encoding="utf-8")
    assert not [line for line in go_mod.splitlines() if line.startswith("replace")], go_mod


def test_coredns_links_every_plugin_the_node_corefile_uses() -> None:
    # cmd/coredns links only some of upstream's plugins: a directive the Corefile gains
    # must be linked too, or the node's CoreDNS fails to start ("unknown directive").
    main_go = (COREDNS_MODULE / "cmd" / "coredns" / "main.go").read_text(encoding="utf-8")
    linked = set(re.findall(r'"github.com/coredns/coredns/plugin/(\w+)"', main_go))
    text = corefile(kubeconfig=Path("/node/coredns.kubeconfig"), network=NodeNetwork())
    # A directive is a server block's first word at the block's top level.
    used, depth = set(), 0
    for line in text.splitlines():
        words = line.split()
        if words and depth == 1 and words[0] != "}":
            used.add(words[0])
        depth += line.count("{") - line.count("}")
    assert used == {"bind", "errors", "health", "ready", "kubernetes", "cache", "loop"}, used
    assert used <= linked, f"cmd/coredns does not link {sorted(used - linked)}"


def test_scheduler_plugins_is_built_against_the_pinned_kubernetes() -> None:
    # The release pins a later 1.34 patch; the replace block makes it the control plane's.
    go_mod = (SCHEDULER_PLUGINS_MODULE / "go.mod").read_text(encoding="utf-8")
    kubernetes = Versions.pinned().kubernetes
    assert f"k8s.io/kubernetes => k8s.io/kubernetes {kubernetes}" in go_mod
    assert f"k8s.io/api => k8s.io/api v0{kubernetes[2:]}" in go_mod


def test_module_version_reads_require_lines_and_skips_replacements(tmp_path: Path) -> None:
    go_mod = tmp_path / "go.mod"
    go_mod.write_text(
        "module example.com/tools\n\nrequire example.com/a v1.2.3\n\n"
        "require (\n\texample.com/b v0.4.0 // indirect\n)\n\n"
        "replace example.com/a => example.com/a v1.0.0\n",
        encoding="utf-8",
    )
    assert module_version(go_mod, "example.com/a") == "v1.2.3"
    assert module_version(go_mod, "example.com/b") == "v0.4.0"


def test_rejects_a_module_the_go_mod_does_not_require(tmp_path: Path) -> None:
    go_mod = tmp_path / "go.mod"
    go_mod.write_text("module example.com/tools\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"has no requirement on example.com/missing"):
        module_version(go_mod, "example.com/missing")


def test_module_digest_covers_go_mod_then_go_sum(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_bytes(b"module a\n")
    (tmp_path / "go.sum").write_bytes(b"example.com/a v1 h1:x=\n")
    expected = hashlib.sha256(b"module a\nexample.com/a v1 h1:x=\n").hexdigest()[:12]
    assert module_digest(tmp_path) == expected
    (tmp_path / "go.sum").write_bytes(b"example.com/a v2 h1:y=\n")
    assert module_digest(tmp_path) != expected


def test_module_digest_covers_the_modules_own_commands(tmp_path: Path) -> None:
    """Editing kubetrain's own Go program (e.g. dashboard-check) rebuilds its tool."""
    (tmp_path / "go.mod").write_bytes(b"module a\n")
    (tmp_path / "go.sum").write_bytes(b"")
    for rel, text in (("cmd/b/main.go", b"package b\n"), ("cmd/a/main.go", b"package a\n")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(text)
    expected = hashlib.sha256(b"module a\npackage a\npackage b\n").hexdigest()[:12]
    assert module_digest(tmp_path) == expected
    (tmp_path / "cmd/b/main.go").write_bytes(b"package b // changed\n")
    assert module_digest(tmp_path) != expected


def test_make_and_python_agree_on_every_tool_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("KUBETRAIN_CACHE", str(cache))
    monkeypatch.delenv("KUBETRAIN_CLUSTER_TOOLS_DIR", raising=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    printed = subprocess.run(
        ["make", "--no-print-directory", "-s", "cluster-tool-dirs"],
        cwd=REPO_ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    from_make = dict(line.split(" ", 1) for line in printed.splitlines())
    from_python = {
        tool: str(path) for tool, path in ToolDirs.for_versions(Versions.pinned()).by_tool().items()
    }
    assert from_make == from_python
    versions = Versions.pinned()
    assert from_python["kueue"] == (
        f"{cache}/cluster-tools/kueue-{versions.kueue}-{module_digest(KUEUE_MODULE)}"
    )
    assert from_python["prometheus"] == (
        f"{cache}/cluster-tools/prometheus-v0.316.0-{module_digest(PROMETHEUS_MODULE)}"
    )
    assert Path(from_python["grafana"]).name.startswith("grafana-v0.0.22-")


def test_each_binary_lives_in_its_tools_directory(tmp_path: Path) -> None:
    dirs = ToolDirs(
        control_plane=tmp_path / "cp",
        scheduler_plugins=tmp_path / "sp",
        kueue=tmp_path / "kueue",
        helm=tmp_path / "helm",
        volcano=tmp_path / "volcano",
        training_operator=tmp_path / "to",
        mpi_operator=tmp_path / "mpi",
        prometheus=tmp_path / "prom",
        grafana=tmp_path / "grafana",
        trainer=tmp_path / "trainer",
        jobset=tmp_path / "jobset",
        node=tmp_path / "node",
        coredns=tmp_path / "coredns",
        argocd=tmp_path / "argocd",
        kustomize=tmp_path / "kustomize",
        trainer_e2e=tmp_path / "trainer-e2e",
        metrics_server=tmp_path / "ms",
    )
    tools = Tools(versions=Versions.pinned(), dirs=dirs)
    assert tools.kubectl == tmp_path / "cp" / "bin" / "kubectl"
    assert tools.scheduler_plugins == tmp_path / "sp" / "bin" / "kube-scheduler-plugins"
    assert tools.kueue == tmp_path / "kueue" / "bin" / "kueue"
    assert tools.helm == tmp_path / "helm" / "bin" / "helm"
    assert tools.volcano_podgroup_crd == (
        tmp_path / "volcano" / "crds" / "scheduling.volcano.sh_podgroups.yaml"
    )
    assert {tools.path(name).parent.parent for name in BINARIES} == set(dirs.by_tool().values())
    assert tools.path("training-operator") == tmp_path / "to" / "bin" / "training-operator"
    assert tools.mpi_operator_crd == tmp_path / "mpi" / "crds" / "kubeflow.org_mpijobs.yaml"
    assert tools.prometheus == tmp_path / "prom" / "bin" / "prometheus"
    assert tools.promtool == tmp_path / "prom" / "bin" / "promtool"
    assert tools.dashboard_check == tmp_path / "grafana" / "bin" / "dashboard-check"
    assert tools.path("argocd-repo-server") == tmp_path / "argocd" / "bin" / "argocd-repo-server"
    assert (
        tools.argocd_crds[0] == tmp_path / "argocd" / "manifests" / "crds" / "application-crd.yaml"
    )
    assert tools.path("kustomize") == tmp_path / "kustomize" / "bin" / "kustomize"
    assert tools.metrics_server == tmp_path / "ms" / "bin" / "metrics-server"
    assert tools.metrics_server_manifests == tmp_path / "ms" / "manifests" / "overlays" / "release"
    assert tools.path("trainer-controller-manager") == (
        tmp_path / "trainer" / "bin" / "trainer-controller-manager"
    )
    assert tools.path("jobset-controller-manager") == (
        tmp_path / "jobset" / "bin" / "jobset-controller-manager"
    )
    assert [p.name for p in tools.trainer_crds] == [
        "trainer.kubeflow.org_clustertrainingruntimes.yaml",
        "trainer.kubeflow.org_trainingruntimes.yaml",
        "trainer.kubeflow.org_trainjobs.yaml",
    ]
    assert tools.jobset_crd == tmp_path / "jobset" / "crds" / "jobset.x-k8s.io_jobsets.yaml"
    assert tools.trainer_config == (
        tmp_path / "trainer" / "config" / "controller_manager_config.yaml"
    )


def test_rejects_an_unknown_binary() -> None:
    tools = Tools(versions=Versions.pinned(), dirs=ToolDirs.for_versions(Versions.pinned()))
    with pytest.raises(ValueError, match=r"unknown binary 'kube-router': expected one of etcd"):
        tools.path("kube-router")


def test_fails_with_what_is_missing_and_how_to_build_it(empty_cache: Path) -> None:
    with pytest.raises(ToolsMissingError) as raised:
        find_tools()
    message = str(raised.value)
    assert "Run `make cluster-tools` to build them." in message
    assert f"{empty_cache}/cluster-tools/" in message
    for expected in (
        "kube-scheduler-plugins",
        "bin/kueue",
        "bin/helm",
        "podgroups.yaml",
        "bin/prometheus",
        "bin/promtool",
        "bin/dashboard-check",
    ):
        assert expected in message
    assert "Prometheus 3.16.0 (v0.316.0), grafana-foundation-sdk v0.0.22" in message


def test_checks_only_the_tools_asked_for(empty_cache: Path) -> None:
    with pytest.raises(ToolsMissingError) as raised:
        find_tools(only=("helm",))
    message = str(raised.value)
    assert "1 file(s) missing" in message and message.count("bin/helm") == 1, message
    assert "kwokctl" not in message.split(";")[0], message
    with pytest.raises(ValueError, match=r"unknown tools kind: expected some of control-plane"):
        find_tools(only=("kind",))


def test_checks_prometheus_and_dashboard_check_alone(empty_cache: Path) -> None:
    with pytest.raises(ToolsMissingError) as raised:
        find_tools(only=("prometheus", "grafana"))
    missing = str(raised.value).split(";")[0]
    assert missing.startswith("3 file(s) missing"), missing
    assert f"{empty_cache}/cluster-tools/prometheus-v0.316.0-" in missing
    assert "bin/promtool" in missing and "bin/dashboard-check" in missing, missing
    assert "kwokctl" not in missing and "bin/helm" not in missing, missing


def test_fails_for_the_peer_operators_with_how_to_build_them(empty_cache: Path) -> None:
    with pytest.raises(ToolsMissingError) as raised:
        find_tools(only=["training-operator", "mpi-operator"])
    message = str(raised.value)
    assert "Run `make peer-tools` to build them." in message
    assert "bin/training-operator" in message and "kubeflow.org_mpijobs.yaml" in message


def test_peer_tools_missing_name_make_peer_tools_and_every_peer_version(empty_cache: Path) -> None:
    with pytest.raises(ToolsMissingError) as raised:
        find_tools(only=("trainer", "jobset"))
    message = str(raised.value)
    assert "Run `make peer-tools` to build them." in message
    for expected in (
        "bin/trainer-controller-manager",
        "trainer.kubeflow.org_trainjobs.yaml",
        "webhook/patch_validating.yaml",
        "runtimes/torch_distributed.yaml",
        "bin/jobset-controller-manager",
        "jobset.x-k8s.io_jobsets.yaml",
        "webhook/mutating-patch.yaml",
        "Trainer v2.3.0 and JobSet v0.12.0",
    ):
        assert expected in message


def test_waits_for_a_tool_the_runners_set_up_is_building(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # make test builds the Go tools beside the tests: a test that needs one not built yet
    # waits for it while the set-up says "building", instead of failing.
    status = empty_cache / "setup-go.status"
    status.write_text("building\n")
    monkeypatch.setenv(BUILDING_ENV, str(status))
    monkeypatch.setattr(cluster_tools, "BUILD_POLL_SECONDS", 0.05)
    monkeypatch.setattr(cluster_tools, "BUILD_SAY_SECONDS", 0.0)
    binary = ToolDirs.for_versions(Versions.pinned()).grafana / "bin" / "dashboard-check"

    def build() -> None:
        time.sleep(0.3)
        binary.parent.mkdir(parents=True)
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)

    builder = threading.Thread(target=build)
    builder.start()
    began = time.monotonic()
    tools = find_tools(only=("grafana",))
    builder.join()
    assert tools.dashboard_check == binary and time.monotonic() - began >= 0.3
    assert "waiting 0 s so far for grafana (1 file(s) missing)" in capsys.readouterr().err


@pytest.mark.parametrize("outcome", ["done", "failed"])
def test_stops_waiting_once_the_set_up_stopped_building(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch, outcome: str
) -> None:
    status = empty_cache / "setup-go.status"
    status.write_text("building\n")
    monkeypatch.setenv(BUILDING_ENV, str(status))
    monkeypatch.setattr(cluster_tools, "BUILD_POLL_SECONDS", 0.05)
    threading.Timer(0.2, lambda: status.write_text(f"{outcome}\n")).start()
    with pytest.raises(ToolsMissingError) as raised:
        find_tools(only=("helm",))
    failed_note = "make test's set-up, which was building them, failed" in str(raised.value)
    assert failed_note == (outcome == "failed"), raised.value
