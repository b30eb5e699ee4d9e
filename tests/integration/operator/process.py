"""``kubetrain operator`` as a separate process, for the tests that kill it or run two."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.integration.kube import wait_for
from tests.timing import count_operator_start

#: Flags that say where the operator listens: in a pod, the pod's IP; here, 127.0.0.1.
LISTEN_FLAGS = (
    "--metrics-port",
    "--metrics-bind-address",
    "--health-port",
    "--health-bind-address",
    "--progress-port",
    "--progress-bind-address",
    "--progress-host",
)


def _thread_state(stat: Path) -> str:
    """A thread's state letter from its /proc stat line (after the parenthesised name),
    "" for a thread that has gone."""
    try:
        return stat.read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class OperatorProcess:
    """One ``python -m kubetrain.commands.operator`` process, its log in ``log_path``.

    ``kubeconfig=None`` gives it no kubeconfig at all (no flag, no ``$KUBECONFIG``): it
    must find in-cluster credentials, as in a pod. ``wrapper`` runs it under another
    command (e.g. ``unshare`` to mount a ServiceAccount volume where a pod has it);
    ``env`` adds variables. It serves on 127.0.0.1 only.
    """

    def __init__(
        self,
        kubeconfig: Path | None,
        namespace: str | None,
        log_path: Path,
        *,
        extra: tuple[str, ...] = (),
        wrapper: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.progress_port = free_port()
        self.log_path = log_path
        self.args = [
            *wrapper,
            sys.executable,
            "-m",
            "kubetrain.commands.operator",
            *([f"--kubeconfig={kubeconfig}"] if kubeconfig is not None else []),
            *([f"--namespace={namespace}"] if namespace is not None else []),
            f"--metrics-port={self.metrics_port}",
            "--metrics-bind-address=127.0.0.1",
            f"--health-port={self.health_port}",
            "--health-bind-address=127.0.0.1",
            # Trainer pods would reach it by the Service's name; here, on loopback.
            f"--progress-port={self.progress_port}",
            "--progress-bind-address=127.0.0.1",
            "--progress-host=127.0.0.1",
            "--workers=2",
            "--log-format=json",
            *extra,
        ]
        self.env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        if namespace is not None:
            self.env["POD_NAMESPACE"] = namespace
        self.env.update(env or {})
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def as_deployed(
        cls, admin_kubeconfig: Path, deployment: dict[str, Any], log_path: Path
    ) -> OperatorProcess:
        """The operator a Deployment describes, where its pods cannot run (kwok's nodes):
        the container's flags, except where it listens (127.0.0.1 here, the pod's IP in a
        pod), and as the pod's ServiceAccount, through a token from the TokenRequest API
        in a kubeconfig. Not started."""
        from kubetrain.controller.kube import KubeApi
        from tests.integration.credentials import request_token, write_token_kubeconfig

        namespace = deployment["metadata"]["namespace"]
        pod = deployment["spec"]["template"]["spec"]
        args = [a for a in pod["containers"][0]["args"] if not a.startswith(LISTEN_FLAGS)]
        admin = KubeApi.connect(str(admin_kubeconfig))
        try:
            token = request_token(admin, namespace, pod["serviceAccountName"])
        finally:
            admin.close()
        kubeconfig = write_token_kubeconfig(
            admin_kubeconfig, token, log_path.with_suffix(".kubeconfig")
        )
        return cls(kubeconfig, None, log_path, extra=tuple(args), env={"POD_NAMESPACE": namespace})

    def start(self) -> OperatorProcess:
        count_operator_start()
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=log, env=self.env)
        wait_for(self.healthy, bool, what=f"operator pid {self.proc.pid} to serve /healthz")
        return self

    def _get(self, port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except OSError:
            return 0, ""

    def healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(
                f"operator exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}"
            )
        return self._get(self.health_port, "/healthz")[0] == 200

    def ready(self) -> tuple[int, str]:
        return self._get(self.health_port, "/readyz")

    def metric(self, name: str, keep: Callable[[dict[str, str]], bool] = lambda _: True) -> float:
        """The sum of a metric's samples (0 when absent), of those whose labels ``keep``
        accepts."""
        status, text = self._get(self.metrics_port, "/metrics")
        assert status == 200, f"/metrics answered {status}"
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and not line.startswith("#"):
                head = line.rsplit(" ", 1)[0]
                if head != name and not head.startswith(name + "{"):
                    continue
                labels = dict(re.findall(r'(\w+)="([^"]*)"', head[len(name) :]))
                if keep(labels):
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def api_writes(self) -> float:
        """Writes this operator sent (``kubetrain_api_requests_total`` of the write verbs)."""
        return self.metric(
            "kubetrain_api_requests_total",
            lambda labels: labels.get("verb") in ("create", "patch", "update", "delete"),
        )

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def pause(self) -> float:
        """SIGSTOP: the process is frozen (a long GC, a stalled VM, a throttled node).
        Returns the moment (``time.monotonic``) every thread of it was seen stopped: the
        signal is delivered to running threads a little after ``kill`` returns."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        tasks = Path(f"/proc/{self.proc.pid}/task")
        wait_for(
            lambda: [_thread_state(stat) for stat in tasks.glob("*/stat")],
            lambda states: bool(states) and all(state in ("T", "t") for state in states),
            what=f"every thread of operator pid {self.proc.pid} to stop",
            timeout=10,
            interval=0.001,
        )
        return time.monotonic()

    def thread_count(self) -> int:
        """How many threads the process has now."""
        assert self.proc is not None
        return sum(1 for _ in Path(f"/proc/{self.proc.pid}/task").iterdir())

    def resume(self) -> None:
        """SIGCONT: the frozen process runs on."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: no cleanup at all, as when a node dies."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=10)

    def terminate(self) -> int:
        """SIGTERM: the graceful shutdown a Deployment rollout sends."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
