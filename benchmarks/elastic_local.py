"""Re-form time of an elastic PyTorchJob run locally: ``kubetrain run --local --scale``
scales the elastic sample job (``images/pytorch/pytorchjob-elastic.yaml``, gloo on the CPU)
2 -> 3 -> 2 nodes ``--runs`` times and prints, per scale, the seconds from the decision to
the re-formed group's first step (the figure run --local reports as it happens).

    python -m benchmarks.elastic_local --runs 3
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "images" / "pytorch" / "pytorchjob-elastic.yaml"
REFORMED = re.compile(r"elastic: (\d+) -> (\d+) nodes re-formed in ([0-9.]+)s")


def one_run(steps: int = 75) -> list[tuple[str, float]]:
    """(``from -> to``, seconds) of each scale of one run (``steps``: the job's)."""
    argv = [sys.executable, "-m", "kubetrain.cli", "run", "--local", str(SAMPLE)]
    argv += ["--scale", "3@step=5", "--scale", f"2@step={steps - 15}"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"run failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr}")
    return [(f"{a} -> {b}", float(s)) for a, b, s in REFORMED.findall(done.stdout)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args(argv)
    figures: dict[str, list[float]] = {}
    for _ in range(args.runs):
        for scale, seconds in one_run():
            figures.setdefault(scale, []).append(seconds)
    for scale, values in figures.items():
        shown = ", ".join(f"{v:.1f}" for v in values)
        print(f"{scale} nodes: median {statistics.median(values):.1f}s ({shown})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
