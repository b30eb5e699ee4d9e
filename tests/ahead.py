"""Slow computations started ahead of the test that reads them, in a process of their own.

Exporting a Helm chart (``kubetrain.gitops.helm``) renders the operator's construct for
every variant of its values: most of a minute of one core each. The tests that install or
template an exported chart start the export when their module (or tier) starts; it runs
on the other core while the tests before it run, most of which wait on a control plane,
and the test then takes the result (``Ahead.result()`` raises what the export raised).

The process is a new interpreter (``python -m tests.ahead``), not a fork: jsii's kernel is
a child process of the test process, which a fork must not share; the call and its
result travel pickled over its standard input and output.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

ROOT = Path(__file__).resolve().parent.parent


class AheadError(RuntimeError):
    """The process computing ahead failed; the message holds its standard error."""


class Ahead(Generic[R]):
    """``fn(*args, **kwargs)`` computing in a new process since ``Ahead`` was made (``fn``
    and its arguments must pickle: a module-level function, dataclasses)."""

    def __init__(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> None:
        self.name = getattr(fn, "__qualname__", repr(fn))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.ahead"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._future: Future[R] = Future()
        call = pickle.dumps((fn, args, kwargs))
        threading.Thread(target=self._wait, args=(call,), daemon=True).start()

    def result(self) -> R:
        """Wait for the result; raise what ``fn`` raised (``AheadError`` if the process
        itself failed)."""
        return self._future.result()

    def stop(self) -> None:
        """End the process if it still runs (its result is no longer wanted)."""
        if self._proc.poll() is None:
            self._proc.kill()

    def _wait(self, call: bytes) -> None:
        out, err = self._proc.communicate(call)
        if self._proc.returncode != 0:
            self._future.set_exception(
                AheadError(
                    f"{self.name} computed ahead exited with status {self._proc.returncode}:"
                    f"\n{err.decode(errors='replace')[-4000:]}"
                )
            )
            return
        ok, value = pickle.loads(out)
        if ok:
            self._future.set_result(value)
        else:
            self._future.set_exception(value)


def _serve() -> int:
    fn, args, kwargs = pickle.loads(sys.stdin.buffer.read())
    try:
        result: tuple[bool, Any] = (True, fn(*args, **kwargs))
    except Exception as err:  # handed to the caller, whose Future raises it
        result = (False, err)
    sys.stdout.buffer.write(pickle.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
