"""Running Kubeflow's SDKs, unmodified, in their own virtualenv (``make sdk-venv``)."""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def sdk_python() -> str:
    """The SDK virtualenv's interpreter (``KUBETRAIN_SDK_PYTHON``, set by make)."""
    python = os.environ.get("KUBETRAIN_SDK_PYTHON") or str(ROOT / ".venv-sdk/bin/python")
    if not Path(python).exists():
        raise AssertionError(f"the SDK virtualenv is missing ({python}): run `make sdk-venv`")
    return python


#: The drivers served by a long-lived process (``tests/sdk/serve.py``): each call would
#: otherwise import the SDK again (seconds of CPU). Others run one process per call.
SERVED = frozenset({"trainer_v2", "training_v1"})
#: Servers kept at once (one per environment: a test's scientist has their own).
KEPT_SERVERS = 2


class SdkServer:
    """``python -m tests.sdk.serve MODULE`` with ``env``: one driver, imported once."""

    def __init__(self, module: str, env: Mapping[str, str]) -> None:
        self.module = module
        self._stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 - lives as long as the server
        self.process = subprocess.Popen(
            [sdk_python(), "-m", "tests.sdk.serve", module],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # What it prints outside a call (import warnings): a file never fills up.
            stderr=self._stderr,
            text=True,
            env={**os.environ, **env},
        )
        self._ready = False

    def call(self, args: Sequence[str], timeout: float) -> tuple[int, str, str]:
        """One command: its exit status, stdout and stderr, as a process of its own."""
        deadline = time.monotonic() + timeout
        if not self._ready:
            self._read(deadline, f"the SDK driver {self.module} to import")
            self._ready = True
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"argv": list(args)}) + "\n")
        self.process.stdin.flush()
        answer = self._read(deadline, f"tests.sdk.{self.module} {' '.join(args)}")
        return int(answer["code"]), str(answer["stdout"]), str(answer["stderr"])

    def _read(self, deadline: float, what: str) -> dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select(
            [self.process.stdout], [], [], max(0.0, deadline - time.monotonic())
        )
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.close()
            late = time.monotonic() >= deadline
            self._stderr.seek(0)
            stderr = self._stderr.read()
            raise AssertionError(
                f"{what}: "
                + ("no answer before the timeout" if late else "the server ended")
                + (f"\n{stderr[-2000:]}" if stderr else "")
            )
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


_SERVERS: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], SdkServer] = OrderedDict()


def _server(module: str, env: Mapping[str, str]) -> SdkServer:
    key = (module, tuple(sorted(env.items())))
    server = _SERVERS.get(key)
    if server is None or server.process.poll() is not None:
        server = _SERVERS[key] = SdkServer(module, env)
    _SERVERS.move_to_end(key)
    while len(_SERVERS) > KEPT_SERVERS:
        _SERVERS.popitem(last=False)[1].close()
    return server


@atexit.register
def close_servers() -> None:
    while _SERVERS:
        _SERVERS.popitem()[1].close()


def run_sdk(
    module: str, *args: str, timeout: float = 120.0, env: Mapping[str, str] | None = None
) -> Any:
    """Run ``python -m tests.sdk.<module> args...`` with the SDKs (``env`` added to this
    process's environment), or the same in the module's server (``SERVED``); its JSON
    output."""
    if module in SERVED:
        code, stdout, stderr = _server(module, env or {}).call(args, timeout)
    else:
        done = subprocess.run(
            [sdk_python(), "-m", f"tests.sdk.{module}", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **(env or {})},
        )
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    if code != 0:
        sys.stderr.write(stderr)
        raise AssertionError(
            f"tests.sdk.{module} {' '.join(args)} exited with {code}: "
            f"{stderr.strip().splitlines()[-1] if stderr.strip() else ''}"
        )
    return json.loads(stdout.strip().splitlines()[-1])
