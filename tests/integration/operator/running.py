"""The in-process operator the integration tests run, and the one they share."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.kube import KubeApi
from kubetrain.controller.operator import Operator
from tests.timing import count_operator_start


class RunningOperator:
    """An operator on a background thread; ``stop()`` shuts it down gracefully."""

    def __init__(self, config: OperatorConfig, kubeconfig: Path, **options: Any) -> None:
        self.api = KubeApi.connect(
            str(kubeconfig), qps=config.kube_api_qps, burst=config.kube_api_burst
        )
        self.operator = Operator(config, self.api, serve_http=False, **options)
        self._stop = threading.Event()
        self.exit_code: int | None = None
        self._thread = threading.Thread(target=self._run, name="operator", daemon=True)

    def _run(self) -> None:
        self.exit_code = self.operator.run(self._stop)

    def start(self) -> RunningOperator:
        count_operator_start()
        self._thread.start()
        if not self.operator.started.wait(60):
            raise AssertionError("the operator did not start within 60s")
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def stop(self) -> None:
        """Stop it (again: nothing)."""
        if self._stop.is_set() and not self._thread.is_alive():
            return
        self._stop.set()
        self._thread.join(timeout=30)
        self.api.close()
        assert not self._thread.is_alive(), "the operator did not stop within 30s"


#: The shared operator's configuration: every namespace but the system ones, and a
#: success grace of 20 s instead of the default minute (``success_grace_seconds``: how
#: long ranks still running after their job succeeded may take to exit before they are
#: deleted). 20 s still leaves a test's ranks time to exit after their master (the SDK
#: parity test exits them after three SDK calls); the tests that wait for the clean-up
#: then wait 20 s, not 60. The default itself is the unit tier's (``test_planner``) and
#: the deployed stacks' (snapshots, the real node).
SHARED_CONFIG = OperatorConfig(
    workers=2, kube_api_qps=100, kube_api_burst=200, success_grace_seconds=20
)


class SharedOperator:
    """The process's one operator for the tests that ask for ``operator``: started on
    demand, stopped before a test that does not ask for it."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.current: RunningOperator | None = None

    @classmethod
    def of(cls, session: pytest.Session) -> SharedOperator | None:
        """The session's shared operator, if a test made one."""
        return session.stash.get(SHARED_KEY, None)

    def get(self) -> RunningOperator:
        if self.current is None or not self.current.running:
            self.current = RunningOperator(SHARED_CONFIG, self.kubeconfig).start()
        return self.current

    def pause(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None


SHARED_KEY = pytest.StashKey[SharedOperator]()
