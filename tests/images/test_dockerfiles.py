"""The Dockerfiles under images/: lint, files they copy, and that what they copy runs.

These tests read the Dockerfiles only (the built images are checked by
test_built_images.py): hadolint's rules, every COPY source present in the build context
and not excluded by the Dockerfile's .dockerignore, every module the entrypoint imports
copied, and the copied files laid out as in the image actually running.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath

import pytest

from images import dockerfile
from images.dockerfile import Instruction

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES = REPO_ROOT / "images"
NAMES = ["operator", "pytorch", "horovod", "tensorflow"]
TRAINERS = ["pytorch", "horovod", "tensorflow"]
HADOLINT = Path(sys.executable).parent / "hadolint"


def instructions(name: str) -> list[Instruction]:
    return dockerfile.parse((IMAGES / name / "Dockerfile").read_text())


def hadolint(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(HADOLINT), "--no-color", "--config", str(IMAGES / ".hadolint.yaml"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("name", NAMES)
def test_hadolint_passes(name: str) -> None:
    result = hadolint(str(IMAGES / name / "Dockerfile"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_reports_a_bad_dockerfile() -> None:
    # The lint above would pass vacuously if hadolint checked nothing.
    result = hadolint("-", stdin="FROM python:latest\nRUN pip install requests\n")
    assert result.returncode != 0
    assert "DL3007" in result.stdout and "DL3013" in result.stdout


def ignored_patterns(name: str) -> list[str]:
    path = IMAGES / name / "Dockerfile.dockerignore"
    lines = path.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def is_ignored(path: str, patterns: list[str]) -> bool:
    parts = PurePosixPath(path).parts
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(prefix, pattern) for prefix in prefixes):
            return True
        if pattern.startswith("**/") and any(fnmatch.fnmatch(part, bare) for part in parts):
            return True
    return False


@pytest.mark.parametrize("name", NAMES)
def test_every_copied_file_exists_and_is_in_the_build_context(name: str) -> None:
    patterns = ignored_patterns(name)
    assert ".venv" in patterns and ".git" in patterns, "the build context would be gigabytes"
    copies = dockerfile.context_copies(instructions(name))
    assert copies, f"{name} copies nothing"
    for copy in copies:
        for source in copy.sources:
            assert (REPO_ROOT / source).exists(), (
                f"{name}/Dockerfile:{copy.line}: {source} is missing"
            )
            assert not is_ignored(source, patterns), f"{source} is excluded by the .dockerignore"


def copied_modules(name: str) -> set[str]:
    """Python modules (dotted) the final image has under its ``PYTHONPATH``."""
    stage = dockerfile.final_stage(instructions(name))
    workdir = PurePosixPath(dockerfile.env(stage)["PYTHONPATH"])
    modules = set()
    for copy in dockerfile.context_copies(stage):
        for source in copy.sources:
            if source.endswith(".py"):
                dest = copy.destination
                if copy.into_directory:
                    dest = dest / Path(source).name
                relative = dest.relative_to(workdir).with_suffix("")
                modules.add(".".join(relative.parts).removesuffix(".__init__"))
    return modules


def imported_project_modules(module: str, seen: set[str] | None = None) -> set[str]:
    """``module`` and every ``images.*`` module it imports, transitively."""
    seen = seen if seen is not None else set()
    if module in seen:
        return seen
    seen.add(module)
    parts = module.split(".")
    path = REPO_ROOT.joinpath(*parts).with_suffix(".py")
    if not path.exists():
        path = REPO_ROOT.joinpath(*parts, "__init__.py")
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("images"):
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if alias.name.startswith("images")]
        for name in names:
            exists = (
                REPO_ROOT.joinpath(*name.split(".")).with_suffix(".py").exists()
                or REPO_ROOT.joinpath(*name.split("."), "__init__.py").exists()
            )
            if exists:
                imported_project_modules(name, seen)
    for i in range(1, len(parts)):
        seen.add(".".join(parts[:i]))  # packages on the way are imported too
    return seen


@pytest.mark.parametrize("name", TRAINERS)
def test_trainer_image_copies_every_module_its_sample_imports(name: str) -> None:
    needed = imported_project_modules(f"images.{name}.train")
    missing = needed - copied_modules(name)
    assert not missing, f"images/{name}/Dockerfile does not COPY {sorted(missing)}"


@pytest.mark.parametrize("name", ["pytorch", "tensorflow"])
def test_trainer_entrypoint_runs_the_sample_as_a_non_root_user(name: str) -> None:
    stage = dockerfile.final_stage(instructions(name))
    entrypoint = dockerfile.last(stage, "ENTRYPOINT")
    assert entrypoint is not None
    assert entrypoint.arguments == ["python", "-m", f"images.{name}.train"]
    user = dockerfile.last(stage, "USER")
    assert user is not None and user.arguments[0].split(":")[0] not in ("0", "root")


@pytest.mark.parametrize("name", TRAINERS)
def test_copied_files_run_as_laid_out_in_the_image(name: str, tmp_path: Path) -> None:
    stage = dockerfile.final_stage(instructions(name))
    dockerfile.materialize(dockerfile.context_copies(stage), REPO_ROOT, tmp_path)
    workdir = tmp_path / dockerfile.env(stage)["PYTHONPATH"].lstrip("/")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("RANK", "WORLD"))}
    env.update({"PYTHONPATH": str(workdir), "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})
    env.pop("TF_CONFIG", None)
    # Run from another directory, so only the copied files (not the repository) are importable.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            f"images.{name}.train",
            "--steps",
            "3",
            "--warmup-steps",
            "0",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "step=3 loss=" in result.stdout
    assert "final rank=0 step=3 " in result.stdout


def test_operator_image_runs_kubetrain_operator_non_root_on_a_read_only_root() -> None:
    stage = dockerfile.final_stage(instructions("operator"))
    entrypoint = dockerfile.last(stage, "ENTRYPOINT")
    assert entrypoint is not None and entrypoint.arguments == ["kubetrain", "operator"]
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "kubetrain" in scripts, "the entrypoint must be the package's console script"
    user = dockerfile.last(stage, "USER")
    assert user is not None and user.arguments[0] == "65532:65532"
    image_env = dockerfile.env(stage)
    # Nothing is written under the root filesystem: no bytecode, HOME and TMPDIR on /tmp.
    assert image_env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert image_env["HOME"] == image_env["TMPDIR"] == "/tmp"
    build = dockerfile.parse((IMAGES / "operator" / "Dockerfile").read_text())
    assert any("compileall" in ins.arguments[0] for ins in build if ins.keyword == "RUN")


def test_horovod_image_serves_ssh_for_mpijob_workers() -> None:
    stage = dockerfile.final_stage(instructions("horovod"))
    cmd = dockerfile.last(stage, "CMD")
    assert cmd is not None and cmd.arguments == ["/usr/sbin/sshd", "-De"]
    destinations = {str(copy.destination) for copy in dockerfile.context_copies(stage)}
    assert "/etc/ssh/sshd_config.d/kubetrain.conf" in destinations
    assert "/etc/ssh/ssh_config.d/kubetrain.conf" in destinations


def test_horovod_ssh_client_config_is_valid() -> None:
    # ssh -G parses the file and prints the effective settings without connecting.
    result = subprocess.run(
        ["ssh", "-G", "-F", str(IMAGES / "horovod" / "ssh_config"), "worker-0.job.ns.svc"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    settings = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    assert settings["stricthostkeychecking"] == "false"
    assert settings["userknownhostsfile"] == "/dev/null"


def test_installed_horovod_has_gloo_and_mpi_and_its_build_script_parses() -> None:
    script = IMAGES / "horovod" / "build-horovod-wheel.sh"
    assert os.access(script, os.X_OK)
    syntax = subprocess.run(
        ["bash", "-n", str(script)], capture_output=True, text=True, check=False
    )
    assert syntax.returncode == 0, syntax.stderr
    probe = (
        "import horovod, horovod.torch as hvd; "
        "print(horovod.__version__, hvd.gloo_built(), hvd.mpi_built(), hvd.nccl_built())"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    # Built here by `make training-deps` with the script: 0.28.1 with Gloo and MPI (NCCL
    # needs a CUDA toolkit: the image's HOROVOD_GPU_OPERATIONS=NCCL build argument).
    assert result.stdout.split() == ["0.28.1", "True", "True", "0"]
