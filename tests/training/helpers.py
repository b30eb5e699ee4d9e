"""Running the samples and reading their logs, for the training tests."""

from __future__ import annotations

import copy
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from images.common.trainkit import FINAL_LINE, STEP_LINE
from kubetrain.manifest import parse_yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES = REPO_ROOT / "images"
#: Generous upper bound so a hung run fails instead of blocking the suite (not a timing check).
HANG_GUARD_SECONDS = 600


@dataclass(frozen=True)
class Run:
    """A finished command: exit code and combined output."""

    returncode: int
    output: str

    def losses(self) -> dict[int, float]:
        """Per-step loss from the step lines, whatever prefix a launcher put before them."""
        losses = {}
        for line in self.output.splitlines():
            start = line.find("step=")
            match = STEP_LINE.match(line[start:]) if start >= 0 else None
            if match:
                losses[int(match["step"])] = float(match["loss"])
        return losses

    def finals(self) -> dict[int, tuple[int, str]]:
        """rank -> (last step, parameter digest) from each rank's closing line."""
        finals = {}
        for line in self.output.splitlines():
            start = line.find("final rank=")
            match = FINAL_LINE.match(line[start:]) if start >= 0 else None
            if match:
                finals[int(match["rank"])] = (int(match["step"]), match["digest"])
        return finals


def run(argv: list[str], *, cwd: Path = REPO_ROOT, timeout: float = HANG_GUARD_SECONDS) -> Run:
    """Run ``argv`` to completion, output and errors together."""
    done = subprocess.run(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Run(done.returncode, done.stdout)


def kubetrain(*args: str, cwd: Path = REPO_ROOT) -> Run:
    """``kubetrain ARGS...`` with the interpreter running the tests."""
    return run([sys.executable, "-m", "kubetrain.cli", *args], cwd=cwd)


def load_manifest(path: Path) -> dict[str, Any]:
    """A job manifest as a dict."""
    loaded: dict[str, Any] = parse_yaml(path.read_text())
    return loaded


def write_manifest(obj: dict[str, Any], path: Path) -> Path:
    """Write a job manifest and return its path."""
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return path


def with_command(manifest: dict[str, Any], command: list[str]) -> dict[str, Any]:
    """A copy of ``manifest`` whose every replica's first container runs ``command``."""
    out = copy.deepcopy(manifest)
    specs_key = next(key for key in out["spec"] if key.endswith("ReplicaSpecs"))
    for spec in out["spec"][specs_key].values():
        spec["template"]["spec"]["containers"][0]["command"] = list(command)
    return out


def assert_trained(result: Run, *, world_size: int, steps: int) -> None:
    """The run succeeded, its loss fell, and every rank ended with the same parameters."""
    assert result.returncode == 0, result.output
    assert f"world_size={world_size} " in result.output, result.output
    losses = result.losses()
    assert sorted(losses) == list(range(1, steps + 1)), result.output
    first = sum(losses[s] for s in range(1, 6)) / 5
    last = sum(losses[s] for s in range(steps - 4, steps + 1)) / 5
    assert last < 0.85 * first, f"loss did not fall: first 5 steps {first:.4f}, last 5 {last:.4f}"
    finals = result.finals()
    assert sorted(finals) == list(range(world_size)), result.output
    assert {step for step, _ in finals.values()} == {steps}
    digests = {digest for _, digest in finals.values()}
    assert len(digests) == 1, f"ranks ended with different parameters: {finals}"
