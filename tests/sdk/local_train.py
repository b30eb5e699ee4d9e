"""The Kubeflow SDK's own ``CustomTrainer`` (kubeflow 0.5.0) handed to
``kubetrain.local.train``, in the SDK's virtualenv: a 2-node x 2-process gloo DDP run.

Usage: ``python -m tests.sdk.local_train --python PYTHON --out-dir DIR``; the ranks run
with PYTHON (an interpreter with torch; the SDK's virtualenv has none) and write their
parameter digests to DIR. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import io
import json

from kubeflow.trainer import CustomTrainer

from kubetrain.local import train
from tests.training.local_functions import ddp_train


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", required=True)
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args()
    trainer = CustomTrainer(func=ddp_train, func_args={"out_dir": args.out_dir}, num_nodes=2)
    result = train(trainer, num_proc_per_node=2, python=args.python, out=io.StringIO())
    kind = type(trainer)
    report = {
        "trainer_class": f"{kind.__module__}.{kind.__qualname__}",
        "phase": result.phase,
        "ranks": [[r.rank, r.exit_code] for r in result.ranks],
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
