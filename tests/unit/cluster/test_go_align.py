"""The Go tool modules built on Kubernetes' libraries stay aligned with their reference
(the control plane's module; Trainer's for kwok: ``cluster/go_align.py``), and the aligner
moves what a pin bump leaves behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.go_align import ALIGNED, EXCEPTIONS, REFERENCE, GoMod, align, main, misaligned

REFERENCE_MOD = """\
module kubetrain.dev/cluster/tools/kubernetes

go 1.24.0

require k8s.io/kubernetes v1.34.4

require (
\tgithub.com/go-logr/logr v1.4.2 // indirect
\tk8s.io/client-go v0.0.0 // indirect
\tgolang.org/x/net v0.38.0 // indirect
)

replace k8s.io/client-go => k8s.io/client-go v0.34.4
"""

TOOL_MOD = """\
// A tool built on Kubernetes' libraries.
module kubetrain.dev/cluster/tools/sometool

go 1.24.0

require sigs.k8s.io/sometool v1.0.0

require (
\tgithub.com/go-logr/logr v1.4.3 // indirect
\tgithub.com/only/here v1.0.0 // indirect
\tgolang.org/x/net v0.38.0 // indirect
\tk8s.io/client-go v0.34.2 // indirect
)

replace k8s.io/client-go => k8s.io/client-go v0.34.2
"""


def _modules(tmp_path: Path, tool_mod: str = TOOL_MOD) -> Path:
    for name, text in ((REFERENCE, REFERENCE_MOD), ("sometool", tool_mod)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "go.mod").write_text(text)
    return tmp_path


def test_every_aligned_tool_selects_the_control_planes_versions() -> None:
    """The committed go.mod files: what the cold build's sharing rests on."""
    found = {tool: misaligned(tool) for tool in ALIGNED}
    assert found == {tool: {} for tool in ALIGNED}


def test_a_reference_is_never_aligned_itself() -> None:
    """The control plane's and Trainer's modules are upstream's versions as released (the
    build checks Trainer's): they are what the others follow, never moved for sharing."""
    assert set(ALIGNED.values()) == {REFERENCE, "trainer"}
    assert not set(ALIGNED.values()) & set(ALIGNED)
    assert ALIGNED["kwok"] == "trainer"


def test_exceptions_name_modules_the_tools_and_their_reference_both_select() -> None:
    """An exception that no longer differs, or names a module one side lacks, is stale."""
    for tool, modules in EXCEPTIONS.items():
        reference = GoMod.read(Path("cluster/tools") / ALIGNED[tool] / "go.mod").selected()
        ours = GoMod.read(Path("cluster/tools") / tool / "go.mod").selected()
        for module in modules:
            assert module in ours and module in reference, (tool, module)
            assert ours[module] != reference[module], (tool, module)


def test_selected_versions_follow_replace_directives(tmp_path: Path) -> None:
    mod = GoMod.read(_modules(tmp_path) / REFERENCE / "go.mod")
    assert mod.required["k8s.io/client-go"] == "v0.0.0"
    assert mod.selected() == {
        "k8s.io/kubernetes": "v1.34.4",
        "github.com/go-logr/logr": "v1.4.2",
        "k8s.io/client-go": "v0.34.4",
        "golang.org/x/net": "v0.38.0",
    }


def test_misaligned_lists_each_shared_module_at_another_version(tmp_path: Path) -> None:
    modules = _modules(tmp_path)
    assert misaligned("sometool", modules) == {
        "github.com/go-logr/logr": ("v1.4.3", "v1.4.2"),
        "k8s.io/client-go": ("v0.34.2", "v0.34.4"),
    }


def test_align_moves_existing_replaces_and_adds_one_block(tmp_path: Path) -> None:
    modules = _modules(tmp_path)
    moved = align("sometool", modules)
    assert set(moved) == {"github.com/go-logr/logr", "k8s.io/client-go"}
    text = (modules / "sometool" / "go.mod").read_text()
    assert "replace k8s.io/client-go => k8s.io/client-go v0.34.4\n" in text
    assert text.count("replace (") == 1
    assert "\tgithub.com/go-logr/logr => github.com/go-logr/logr v1.4.2\n" in text
    assert misaligned("sometool", modules) == {}
    # Run again: nothing moves and the file stays as it is.
    assert align("sometool", modules) == {}
    assert (modules / "sometool" / "go.mod").read_text() == text


def test_align_adds_to_its_own_block_after_a_pin_moves(tmp_path: Path) -> None:
    modules = _modules(tmp_path)
    align("sometool", modules)
    go_mod = modules / "sometool" / "go.mod"
    # `go mod tidy` after a bump brings a new shared module at another version.
    go_mod.write_text(
        go_mod.read_text().replace("golang.org/x/net v0.38.0", "golang.org/x/net v0.40.0")
    )
    assert align("sometool", modules) == {"golang.org/x/net": ("v0.40.0", "v0.38.0")}
    text = go_mod.read_text()
    assert text.count("replace (") == 1
    assert "\tgolang.org/x/net => golang.org/x/net v0.38.0\n" in text
    assert misaligned("sometool", modules) == {}


def test_a_tool_follows_the_reference_it_is_given(tmp_path: Path) -> None:
    modules = _modules(tmp_path)
    (modules / "other").mkdir()
    (modules / "other" / "go.mod").write_text(
        REFERENCE_MOD.replace("golang.org/x/net v0.38.0", "golang.org/x/net v0.40.0")
    )
    assert misaligned("sometool", modules, "other")["golang.org/x/net"] == ("v0.38.0", "v0.40.0")
    align("sometool", modules, "other")
    text = (modules / "sometool" / "go.mod").read_text()
    assert "// Aligned with cluster/tools/other by\n" in text
    assert "\tgolang.org/x/net => golang.org/x/net v0.40.0\n" in text
    assert misaligned("sometool", modules, "other") == {}


def test_rejects_a_tool_that_is_not_aligned(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prometheus"]) == 2
    err = capsys.readouterr().err
    assert "not an aligned tool module: prometheus" in err
    assert "scheduler-plugins" in err
