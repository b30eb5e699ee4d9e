"""The built images (``make images``, a prerequisite of ``make test``): what the stacks
rely on, checked by inspecting and running them with podman.

A missing image fails these tests (with the command that builds it) rather than skipping
them: the stacks deploy these tags.
"""

from __future__ import annotations

import pytest

from images import build, dockerfile, podman
from images.build import HOROVOD, IMAGES, OPERATOR, PYTORCH, TENSORFLOW, ImageSpec

IDS = [spec.folder for spec in IMAGES]
TRAINERS = [PYTORCH, HOROVOD, TENSORFLOW]
COMPILERS = ("gcc", "cc", "g++", "c++", "clang", "make", "cmake")


def config(spec: ImageSpec) -> dict[str, object]:
    try:
        return podman.config(spec.tag)
    except LookupError as missing:
        pytest.fail(f"{missing}; `make images` builds it")


def run(spec: ImageSpec, *command: str, entrypoint: str | None = None) -> str:
    config(spec)  # a missing image fails here with the way to build it
    result = podman.run(spec.tag, *command, entrypoint=entrypoint)
    assert result.returncode == 0, f"{spec.tag} {command}:\n{result.stdout}{result.stderr}"
    return result.stdout


def shell(spec: ImageSpec, script: str) -> str:
    return run(spec, "-c", script, entrypoint="/bin/sh")


@pytest.mark.parametrize("spec", IMAGES, ids=IDS)
def test_image_is_built_from_the_current_sources(spec: ImageSpec) -> None:
    # The key hashes the Dockerfile, the files it copies, its build arguments and its base
    # images: a stale image means `make images` was not run after a change.
    config(spec)
    assert build.current_key(spec) == build.expected_key(spec)


@pytest.mark.parametrize(
    ("spec", "user"),
    [
        (OPERATOR, "65532:65532"),
        (PYTORCH, "1000:1000"),
        (TENSORFLOW, "1000:1000"),
        (HOROVOD, "0:0"),
    ],
    ids=["operator", "pytorch", "tensorflow", "horovod"],
)
def test_image_runs_as_its_user(spec: ImageSpec, user: str) -> None:
    assert config(spec)["User"] == user
    uid = user.split(":")[0]
    assert shell(spec, "id -u").strip() == uid


@pytest.mark.parametrize("spec", IMAGES, ids=IDS)
def test_entrypoint_and_cmd_are_the_dockerfiles(spec: ImageSpec) -> None:
    stage = dockerfile.final_stage(spec.instructions())
    image = config(spec)
    entrypoint = dockerfile.last(stage, "ENTRYPOINT")
    cmd = dockerfile.last(stage, "CMD")
    assert (image.get("Entrypoint") or []) == (entrypoint.arguments if entrypoint else [])
    if cmd is not None:
        assert image.get("Cmd") == cmd.arguments
    expected = {
        "operator": (["kubetrain", "operator"], None),
        "pytorch": (["python", "-m", "images.pytorch.train"], None),
        "tensorflow": (["python", "-m", "images.tensorflow.train"], None),
        "horovod": ([], ["/usr/sbin/sshd", "-De"]),
    }[spec.folder]
    assert (image.get("Entrypoint") or [], image.get("Cmd") if expected[1] else None) == expected


def test_operator_image_runs_kubetrain_operator() -> None:
    out = run(OPERATOR, "--help")  # the entrypoint is `kubetrain operator`
    assert "usage: kubetrain operator" in out


def test_operator_image_runs_on_a_read_only_root() -> None:
    config(OPERATOR)
    result = podman.run(
        OPERATOR.tag,
        "--help",
        options=("--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL"),
    )
    assert result.returncode == 0, result.stderr
    assert "usage: kubetrain operator" in result.stdout


@pytest.mark.parametrize("spec", TRAINERS, ids=[s.folder for s in TRAINERS])
def test_trainer_helpers_import(spec: ImageSpec) -> None:
    modules = ["images.common.trainkit", f"images.{spec.folder}.train"]
    if spec is not TENSORFLOW:
        modules.append("images.common.torchkit")
    probe = "import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]; print('ok')"
    assert run(spec, "-c", probe, *modules, entrypoint="python").strip() == "ok"


@pytest.mark.parametrize("spec", [PYTORCH, TENSORFLOW], ids=["pytorch", "tensorflow"])
def test_trainer_image_trains_a_few_steps(spec: ImageSpec) -> None:
    out = run(spec, "--steps", "3", "--warmup-steps", "0")
    assert "final rank=0 step=3 " in out


@pytest.mark.parametrize(
    ("spec", "uid", "workdir"),
    [
        (PYTORCH, "1000", "/workspace"),
        (TENSORFLOW, "1000", "/workspace"),
        (HOROVOD, "0", "/opt/kubetrain"),
    ],
    ids=["pytorch", "tensorflow", "horovod"],
)
def test_trainer_user_can_write_its_working_directory(
    spec: ImageSpec, uid: str, workdir: str
) -> None:
    # The Kubeflow SDK's CustomTrainer writes the function it ships into the working
    # directory, as the image's user, then runs it with torchrun; `train.py` is the sample.
    out = shell(spec, "touch trainer_v2.py && test -f train.py && id -u && pwd")
    assert out.split() == [uid, workdir]


def test_horovod_image_has_mpirun_sshd_and_horovod_with_gloo_and_mpi() -> None:
    out = shell(
        HOROVOD, "command -v mpirun && test -x /usr/sbin/sshd && /usr/sbin/sshd -t && echo sshd-ok"
    )
    assert "mpirun" in out and "sshd-ok" in out
    probe = (
        "import horovod, horovod.torch as hvd; "
        "print(horovod.__version__, hvd.gloo_built(), hvd.mpi_built())"
    )
    assert run(HOROVOD, "-c", probe, entrypoint="python").split() == ["0.28.1", "True", "True"]


def test_horovod_image_trains_under_mpirun() -> None:
    out = run(
        HOROVOD,
        "mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none",
        "python", "-m", "images.horovod.train", "--steps", "3", "--warmup-steps", "0",
        entrypoint="",
    )  # fmt: skip
    assert "final rank=0 step=3 " in out


@pytest.mark.parametrize("spec", IMAGES, ids=IDS)
def test_runtime_image_has_no_compilers_or_pip_caches(spec: ImageSpec) -> None:
    found = shell(
        spec,
        f"for tool in {' '.join(COMPILERS)}; do command -v $tool; done; "
        "find / -xdev -type d \\( -path '*/.cache/pip' -o -path '/root/.cache' \\) 2>/dev/null; "
        "test -e /wheels && echo /wheels; ls -A /tmp; true",
    )
    assert found.strip() == "", f"{spec.tag} has build leftovers:\n{found}"
