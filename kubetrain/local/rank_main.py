"""What every rank of :func:`kubetrain.local.train` runs, started by torchrun as a script
(not as ``-m``, so a rank does not import kubetrain: only the standard library and the
user's function):

    rank_main.py SCRIPT ARGS_PICKLE STATUS_DIR

It runs SCRIPT (the function's source followed by the call ``name(**func_args)``, as the
Kubeflow SDK's script ends) as ``__main__``, with the keyword arguments unpickled from
ARGS_PICKLE, and writes ``STATUS_DIR/rank-<RANK>.json``: the rank, its node and local
rank, its exit code (a ``SystemExit`` code, 1 for an exception, whose traceback goes to
stderr) and how long the function ran. It exits with that code.
"""

from __future__ import annotations

import json
import os
import pickle
import runpy
import sys
import time
import traceback
from pathlib import Path

#: The name the script's call reads its keyword arguments from.
ARGS_NAME = "_kubetrain_func_args"


def _exit_code(exit: SystemExit) -> int:
    """The status Python's own exit gives a ``SystemExit`` (None: 0, text: printed, 1)."""
    if exit.code is None:
        return 0
    if isinstance(exit.code, int):
        return exit.code & 0xFF
    print(exit.code, file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    """Run one rank (see the module docs); its exit code."""
    if len(argv) != 3:
        print("usage: rank_main.py SCRIPT ARGS_PICKLE STATUS_DIR", file=sys.stderr)
        return 2
    script, args_file, status_dir = argv
    # Imports resolve as on a cluster, where the script sits in the working directory
    # (not from kubetrain's own folder, where this file is).
    sys.path[0] = os.getcwd()
    with open(args_file, "rb") as handle:
        func_args = pickle.load(handle)
    started = time.monotonic()
    try:
        runpy.run_path(script, init_globals={ARGS_NAME: func_args}, run_name="__main__")
        code = 0
    except SystemExit as exit:
        code = _exit_code(exit)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    status = {
        "rank": int(os.environ.get("RANK", "0")),
        "node_rank": int(os.environ.get("GROUP_RANK", "0")),
        "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
        "exit_code": code,
        "seconds": round(time.monotonic() - started, 3),
        "finished_at": time.time(),
    }
    target = Path(status_dir) / f"rank-{status['rank']}.json"
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(status))
    partial.replace(target)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
