"""``/healthz`` and ``/readyz`` on the health port, ``/metrics`` on the metrics port."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import MetricsHandler


class _HealthHandler(BaseHTTPRequestHandler):
    checks: ClassVar[dict[str, Callable[[], tuple[bool, str]]]] = {}

    def do_GET(self) -> None:
        check = self.checks.get(self.path.split("?")[0])
        if check is None:
            self.send_error(404, "try /healthz or /readyz")
            return
        ok, detail = check()
        body = (detail or ("ok" if ok else "not ready")).encode() + b"\n"
        self.send_response(200 if ok else 503)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return  # probes every few seconds would flood the log


class HttpServers:
    """The two small HTTP servers, each on a daemon thread."""

    def __init__(
        self,
        *,
        health_port: int,
        metrics_port: int,
        registry: CollectorRegistry,
        healthz: Callable[[], tuple[bool, str]],
        readyz: Callable[[], tuple[bool, str]],
        health_address: str = "0.0.0.0",
        metrics_address: str = "0.0.0.0",
    ) -> None:
        handler = type(
            "HealthHandler", (_HealthHandler,), {"checks": {"/healthz": healthz, "/readyz": readyz}}
        )
        self.health = ThreadingHTTPServer((health_address, health_port), handler)
        self.metrics = ThreadingHTTPServer(
            (metrics_address, metrics_port), MetricsHandler.factory(registry)
        )
        self._threads = [
            threading.Thread(target=s.serve_forever, name=f"http-{s.server_port}", daemon=True)
            for s in (self.health, self.metrics)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        for server in (self.health, self.metrics):
            server.shutdown()
            server.server_close()
