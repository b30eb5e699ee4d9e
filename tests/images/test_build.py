"""The image builder's pure parts: which files a build reads, what its key covers, the
base images a Dockerfile starts from, and that versions are written down once."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from images import base, build, dockerfile
from images.build import HOROVOD, IMAGES, OPERATOR, PYTORCH, TENSORFLOW, ImageSpec
from kubetrain import __version__

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_tags_are_the_ones_the_stacks_deploy() -> None:
    assert [spec.tag for spec in IMAGES] == [
        f"ghcr.io/kubetrain/{name}:{__version__}"
        for name in ("operator", "pytorch-trainer", "horovod-trainer", "tensorflow-trainer")
    ]


def test_every_image_comes_after_the_images_it_starts_from() -> None:
    built: set[str] = set()
    for spec in IMAGES:
        for reference in spec.base_images():
            assert reference in base.BASES or reference in built, (spec.folder, reference)
        built.add(spec.tag)


def test_horovod_starts_from_the_pytorch_trainer_and_its_default_says_so() -> None:
    assert HOROVOD.base_images() == [PYTORCH.tag]
    # Without build arguments (a plain `docker build`), the default names the same tag.
    defaults = dockerfile.global_args(HOROVOD.instructions(), {})
    assert defaults["TRAINER_IMAGE"] == PYTORCH.tag
    assert defaults["CUDA_TOOLKIT_IMAGE"] == PYTORCH.tag


def test_a_toolkit_image_argument_adds_a_base() -> None:
    spec = replace(HOROVOD, build_args={**HOROVOD.build_args, "CUDA_TOOLKIT_IMAGE": "cuda:x"})
    assert spec.base_images() == ["cuda:x", PYTORCH.tag]


def test_stage_names_are_not_base_images() -> None:
    text = "ARG B=debian:12\nFROM $B AS one\nFROM one\nFROM ${B}\n"
    assert dockerfile.base_images(dockerfile.parse(text), {}) == ["debian:12"]
    assert dockerfile.base_images(dockerfile.parse(text), {"B": "alpine"}) == ["alpine"]


def test_context_files_are_what_the_dockerfile_copies_minus_the_dockerignore() -> None:
    files = {str(path.relative_to(REPO_ROOT)) for path in build.context_files(OPERATOR)}
    assert {"pyproject.toml", "README.md", "kubetrain/__init__.py"} <= files
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in files)
    trainer = {str(path.relative_to(REPO_ROOT)) for path in build.context_files(TENSORFLOW)}
    assert "images/tensorflow/train.py" in trainer
    assert "images/common/torchkit.py" not in trainer  # not copied: not in its key


@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        ("kubetrain/__pycache__/x.pyc", True),
        ("tests/images/test_build.py", True),
        (".venv/bin/python", True),
        ("kubetrain/api/kinds.py", False),
    ],
)
def test_dockerignore_matching(path: str, ignored: bool) -> None:
    assert build.is_ignored(path, build.ignore_patterns(OPERATOR)) is ignored


def test_key_changes_with_each_input() -> None:
    ids = {"python:3.11-slim-bookworm": "a" * 64}
    key = build.build_key(TENSORFLOW, ids)
    assert build.build_key(TENSORFLOW, ids) == key
    assert build.build_key(TENSORFLOW, {"python:3.11-slim-bookworm": "b" * 64}) != key
    other_args = replace(TENSORFLOW, build_args={"TENSORFLOW_PACKAGE": "tensorflow"})
    assert build.build_key(other_args, ids) != key
    # Another image with the same base copies other files: another key.
    assert build.build_key(PYTORCH, ids) != key


def test_rejects_a_base_image_that_cannot_be_made_or_built() -> None:
    spec = ImageSpec("horovod", "x", {"TRAINER_IMAGE": "example.com/not-here:1"})
    with pytest.raises(SystemExit, match="no registry is reachable"):
        build.resolve_bases(spec, Path("/nonexistent"))


def test_base_recipe_key_follows_the_recipe() -> None:
    recipe = base.PYTHON_SLIM
    assert recipe.key() == replace(recipe).key()
    assert replace(recipe, packages=(*recipe.packages, "curl")).key() != recipe.key()
    command = recipe.command(Path("/tmp/out.tar"))
    assert command[:4] == ["mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar"]
    include = next(word for word in command if word.startswith("--include="))
    assert "python3-pip" in include.split("=", 1)[1].split(",")


def _make_variable(name: str) -> str:
    text = (REPO_ROOT / "images" / "images.mk").read_text()
    found = re.search(rf"^{name} := (\S+)$", text, re.MULTILINE)
    assert found, f"{name} is not set in images/images.mk"
    return found.group(1)


@pytest.mark.parametrize(
    ("spec", "arg", "variable"),
    [
        (PYTORCH, "TORCH_VERSION", "TORCH_VERSION"),
        (TENSORFLOW, "TENSORFLOW_VERSION", "TENSORFLOW_VERSION"),
        (HOROVOD, "HOROVOD_VERSION", "HOROVOD_VERSION"),
    ],
)
def test_image_versions_match_the_host_training_deps(
    spec: ImageSpec, arg: str, variable: str
) -> None:
    # The horovod image reuses the wheel built for the host's torch: the pins must agree.
    declared = {
        ins.arguments[0].partition("=")[0]: ins.arguments[0].partition("=")[2]
        for ins in spec.instructions()
        if ins.keyword == "ARG"
    }
    assert declared[arg] == _make_variable(variable)
