"""Progress reports in a local run: ``kubetrain run --local`` and ``kubetrain.local.train``
serve the same endpoint the operator does (:mod:`kubetrain.controller.status_server`, on
127.0.0.1 with a certificate of its own), give the trainer's processes the variables a
trainer pod gets, and print each report as it arrives::

    kubetrain: progress 42% (ETA 2m0s) loss=0.123 accuracy=0.95
    kubetrain: progress step 120, checkpoint step 120 at /ckpt/step-120.pt

The token is a random one in a file only this user can read (there is no API server to
review it); each report is checked exactly as the operator checks its body.
"""

from __future__ import annotations

import hmac
import os
import secrets
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubetrain.api import progress as P
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.kinds import TRAINJOB
from kubetrain.controller.status_auth import Verdict, bearer_token
from kubetrain.controller.status_server import ProgressEndpoint, ProgressServer
from kubetrain.controller.status_tls import ServingCertificates

HOST = "127.0.0.1"


class _MemorySecret:
    """The certificate store of one run (nothing outlives it)."""

    def __init__(self) -> None:
        self.data: dict[str, str] | None = None

    def read(self) -> tuple[dict[str, str], str] | None:
        return None if self.data is None else (dict(self.data), "1")

    def create(self, data: dict[str, str]) -> bool:
        self.data = dict(data)
        return True

    def replace(self, data: dict[str, str], resource_version: str) -> bool:
        self.data = dict(data)
        return True


class _RunToken:
    """Accepts the run's own token, for its own job only."""

    def __init__(self, token: str, namespace: str, name: str, info: KindInfo) -> None:
        self.token, self.namespace, self.name, self.info = token, namespace, name, info

    def authorize(
        self, header: str | None, namespace: str, name: str, info: KindInfo = TRAINJOB
    ) -> Verdict:
        given = bearer_token(header)
        if not given:
            return Verdict(False, "no bearer token (Authorization: Bearer <token>)")
        if not hmac.compare_digest(given, self.token):
            return Verdict(False, "not this run's token")
        if (info.kind, namespace, name) != (self.info.kind, self.namespace, self.name):
            return Verdict(False, f"this run is {self.info.kind} {self.namespace}/{self.name}")
        return Verdict(True, reporter=P.Reporter("local", os.uname().nodename))


def describe(status: Mapping[str, Any], report: P.Report | None = None) -> str:
    """One line for a report: percent, ETA and metrics, step and checkpoint, as far as it
    has them."""
    parts = []
    if "progressPercentage" in status:
        parts.append(f"{status['progressPercentage']}%")
    if "estimatedRemainingSeconds" in status:
        minutes, seconds = divmod(int(status["estimatedRemainingSeconds"]), 60)
        hours, minutes = divmod(minutes, 60)
        eta = f"{hours}h{minutes}m{seconds}s" if hours else f"{minutes}m{seconds}s"
        parts.append(f"(ETA {eta})")
    parts += [f"{m['name']}={m['value']}" for m in status.get("metrics") or []]
    if report is not None and report.step is not None:
        parts.append(f"step {report.step}")
    if report is not None and report.checkpoint is not None:
        point = report.checkpoint
        parts.append(f"checkpoint step {point['step']} at {point['location']}")
    return "progress " + (" ".join(parts) or "reported")


class LocalProgress:
    """The run's progress server; ``env`` is what its trainer processes get."""

    def __init__(
        self, namespace: str, name: str, say: Callable[[str], None], info: KindInfo = TRAINJOB
    ) -> None:
        self.say = say
        self.last: dict[str, Any] | None = None
        self.progress: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._folder = Path(tempfile.mkdtemp(prefix="kubetrain-progress-"))
        token = secrets.token_urlsafe(32)
        token_file = self._folder / P.TOKEN_FILE
        token_file.touch(mode=0o600)
        token_file.write_text(token)
        certificates = ServingCertificates(_MemorySecret(), [HOST])
        endpoint = ProgressEndpoint(_RunToken(token, namespace, name, info), self)
        self.server = ProgressServer(endpoint, certificates, address=HOST, port=0)
        self.server.start()
        material = certificates.material
        assert material is not None
        ca_file = self._folder / P.CA_FILE
        ca_file.write_text(material.ca_bundle)
        self.env = {
            P.URL_ENV: f"https://{HOST}:{self.server.port}{P.status_path(namespace, name, info)}",
            P.CA_CERT_ENV: str(ca_file),
            P.TOKEN_ENV: str(token_file),
        }

    def write_report(
        self,
        info: KindInfo,
        namespace: str,
        name: str,
        report: P.Report,
        reporter: P.Reporter,
    ) -> None:
        with self._lock:
            if report.trainer_status is not None:
                self.last = dict(report.trainer_status)
            patch = P.progress_patch(report, reporter, datetime.now(UTC))
            self.progress = {**(self.progress or {}), **patch}
        self.say(describe(report.trainer_status or {}, report))

    def read_progress(self, info: KindInfo, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return dict(self.progress) if self.progress else None

    def close(self) -> None:
        self.server.stop()
        for path in self._folder.iterdir():
            path.unlink()
        os.rmdir(self._folder)


@contextmanager
def local_progress(
    namespace: str, name: str, say: Callable[[str], None], info: KindInfo = TRAINJOB
) -> Iterator[LocalProgress]:
    """A :class:`LocalProgress` for the length of a run."""
    progress = LocalProgress(namespace, name, say, info)
    try:
        yield progress
    finally:
        progress.close()
