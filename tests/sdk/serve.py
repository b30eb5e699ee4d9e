"""Serve one SDK driver's commands from one process: ``python -m tests.sdk.serve MODULE``.

Importing Kubeflow's SDKs takes seconds of CPU (the ``kubernetes`` client alone is
about 4 s on this machine), and a test makes several calls: the driver is imported once
here and each line on stdin, ``{"argv": [...]}``, runs its ``main()`` as
``python -m tests.sdk.MODULE argv...`` would, with the same environment. Each answer is
one line on stdout: ``{"code": exit status, "stdout": ..., "stderr": ...}``. The SDK
itself is called exactly as before: unmodified, as the scientist calls it.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import sys
import traceback


def main() -> None:
    module = sys.argv[1]
    driver = importlib.import_module(f"tests.sdk.{module}")
    answers = sys.stdout
    print(json.dumps({"ready": module}), file=answers, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        out, err = io.StringIO(), io.StringIO()
        code = 0
        sys.argv = [f"tests.sdk.{module}", *request["argv"]]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                driver.main()
            except SystemExit as exit_:
                code = (
                    exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                )
                if not isinstance(exit_.code, int | None):
                    err.write(f"{exit_.code}\n")
            except BaseException:
                code = 1
                err.write(traceback.format_exc())
        answer = {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
        print(json.dumps(answer), file=answers, flush=True)


if __name__ == "__main__":
    main()
