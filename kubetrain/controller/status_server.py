"""The progress server: where a job's pods report their progress (the Kubeflow SDK's
``update_trainjob_status``; upstream Trainer's ``pkg/statusserver``), for TrainJobs and,
a kubetrain extension, the Kubeflow v1 kinds (:mod:`kubetrain.api.progress`).

``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status``
(``/apis/kubeflow.org/v1/namespaces/<ns>/pytorchjobs/<name>/status`` and so on) over HTTPS
(the certificate of :mod:`~kubetrain.controller.status_tls`, re-read every
``refresh_seconds``), with a bearer token checked by
:mod:`~kubetrain.controller.status_auth`. In order, a request is refused with:

- 404 for any other path, 405 for another method on it;
- 411 without a Content-Length, 413 over ``MAX_BODY_BYTES`` (64 KiB, upstream's limit);
- 401 without a bearer token, 403 when the token is not a pod of that job;
- 429 (with Retry-After) past the job's rate (``Limits``: the SDK sends at most one
  report per 5 s per process);
- 400 for a body that is not a JSON object, 422 for a field out of the schema;
- 409 for a checkpoint whose step goes back within a gang attempt;
- 404 when the job is gone, and the API server's own 422 when it refuses the write.

Each refusal is a ``metav1.Status`` naming the problem, and writes nothing. A valid
report is written to the status subresource as field manager ``trainer-status``
(upstream's), which owns only ``status.trainerStatus`` and kubetrain's ``progress``: the
operator's own status writes never touch them. The server runs on every replica (no leader needed:
each write is one apply), through an API client of its own, unfenced and rate limited
apart from the reconcilers'. At most ``Limits.connections`` connections are served at
once; each has ``Limits.read_timeout`` seconds to send its request.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import orjson

from kubetrain.api import progress
from kubetrain.api.errors import JobValidationError
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.kinds import PYTORCH
from kubetrain.controller.errors import ApiError
from kubetrain.controller.ratelimit import TokenBucket
from kubetrain.controller.status_auth import Verdict, bearer_token
from kubetrain.controller.status_tls import ServingCertificates, ServingMaterial

log = logging.getLogger("kubetrain.progress")
#: A refused request's body is read and dropped up to this size (see ``_Handler._drain``).
DRAIN_LIMIT = 1 << 20


class Authorizer(Protocol):
    def authorize(
        self, header: str | None, namespace: str, name: str, info: KindInfo = ...
    ) -> Verdict:
        """Whether the ``Authorization`` header may report job namespace/name."""
        ...


class StatusWriter(Protocol):
    def write_report(
        self,
        info: KindInfo,
        namespace: str,
        name: str,
        report: progress.Report,
        reporter: progress.Reporter,
    ) -> None:
        """Write what the report asks (ApiError when the API server refuses)."""
        ...

    def read_progress(self, info: KindInfo, namespace: str, name: str) -> dict[str, Any] | None:
        """The job's kubetrain ``progress`` status (ApiError 404 when the job is gone)."""
        ...


@dataclass(frozen=True)
class Limits:
    """What one server accepts."""

    max_body_bytes: int = progress.MAX_BODY_BYTES
    #: Reports per second per TrainJob (all its pods together), and the burst above it.
    per_job_qps: float = 5.0
    per_job_burst: int = 20
    connections: int = 64
    read_timeout: float = 10.0


@dataclass(frozen=True)
class Reply:
    code: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def status(code: int, reason: str, message: str, **headers: str) -> Reply:
    """A ``metav1.Status`` refusal."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return Reply(code, body, dict(headers))


class ProgressEndpoint:
    """The request handling of the module docs, without sockets."""

    def __init__(
        self,
        authorizer: Authorizer,
        writer: StatusWriter,
        limits: Limits = Limits(),
        on_report: Callable[[int], None] | None = None,
    ) -> None:
        self.authorizer = authorizer
        self.writer = writer
        self.limits = limits
        self.on_report = on_report or (lambda code: None)
        self._buckets: dict[tuple[str, str, str], TokenBucket] = {}
        self._lock = threading.Lock()

    def _bucket(self, key: tuple[str, str, str]) -> TokenBucket:
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) > 10_000:
                    self._buckets.clear()  # idle TrainJobs' buckets; each refills anyway
                bucket = TokenBucket(self.limits.per_job_qps, self.limits.per_job_burst)
                self._buckets[key] = bucket
            return bucket

    def handle(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        read_body: Callable[[int], bytes],
    ) -> Reply:
        """One request; ``headers`` keyed by lower-case names."""
        reply = self._handle(method, path, headers, read_body)
        self.on_report(reply.code)
        return reply

    def _handle(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        read_body: Callable[[int], bytes],
    ) -> Reply:
        target = progress.parse_path(path)
        if target is None:
            return status(
                404,
                "NotFound",
                f"no such endpoint {path.split('?', 1)[0]!r}: POST to "
                + progress.status_path("<namespace>", "<trainjob>")
                + " (or a v1 job's, e.g. "
                + progress.status_path("<namespace>", "<name>", PYTORCH)
                + ")",
            )
        if method != "POST":
            return status(405, "MethodNotAllowed", f"{method} is not allowed: use POST")
        info, namespace, name = target
        job = f"{info.kind} {namespace}/{name}"
        length_header = headers.get("content-length")
        if length_header is None:
            return status(411, "BadRequest", "a Content-Length header is required")
        try:
            length = int(length_header)
        except ValueError:
            return status(400, "BadRequest", f"Content-Length {length_header!r} is not a number")
        if length < 0 or length > self.limits.max_body_bytes:
            return status(
                413,
                "RequestEntityTooLarge",
                f"the body is {length} bytes; at most {self.limits.max_body_bytes} are accepted",
            )
        verdict = self.authorizer.authorize(headers.get("authorization"), namespace, name, info)
        if not verdict.allowed:
            if not bearer_token(headers.get("authorization")):
                return status(401, "Unauthorized", verdict.reason)
            return status(403, "Forbidden", f"may not report {job}: {verdict.reason}")
        bucket = self._bucket((info.kind, namespace, name))
        if not bucket.try_acquire():
            retry = max(1, round(1 / self.limits.per_job_qps))
            return status(
                429,
                "TooManyRequests",
                f"{job} reports more than "
                f"{self.limits.per_job_qps:g} times a second; retry in {retry}s",
                **{"Retry-After": str(retry)},
            )
        body = read_body(length)
        try:
            wanted = progress.parse_update(body)
        except JobValidationError as err:
            code = 400 if any(not e.path for e in err.errors) else 422
            reason = "BadRequest" if code == 400 else "Invalid"
            return status(code, reason, str(err))
        if wanted.empty:
            return Reply(200, {})
        reporter = verdict.reporter or progress.Reporter("")
        try:
            if wanted.checkpoint is not None:
                refused = progress.checkpoint_refusal(
                    wanted, reporter, self.writer.read_progress(info, namespace, name)
                )
                if refused:
                    return status(409, "Conflict", f"{job}: {refused}")
            self.writer.write_report(info, namespace, name, wanted, reporter)
        except ApiError as err:
            if err.status == 404:
                return status(404, "NotFound", f"{job} not found")
            if err.status in (400, 422):
                return status(422, "Invalid", err.message)
            log.warning("progress write failed", extra={"job": job, "error": str(err)})
            return status(500, "InternalError", f"the write failed: {err.message}")
        out: dict[str, Any] = {}
        if wanted.trainer_status is not None:
            out["trainerStatus"] = wanted.trainer_status
        if wanted.step is not None or wanted.checkpoint is not None:
            out["kubetrain"] = {
                k: v
                for k, v in (("step", wanted.step), ("checkpoint", wanted.checkpoint))
                if v is not None
            }
        return Reply(200, out)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the SDK reuses one requests.Session
    server_version = "kubetrain-progress"
    sys_version = ""

    def _serve(self) -> None:
        server = self.server
        assert isinstance(server, _TlsServer)
        consumed: list[bool] = []

        def read(length: int) -> bytes:
            consumed.append(True)
            return self.rfile.read(length)

        reply = server.endpoint.handle(
            self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, read
        )
        payload = orjson.dumps(reply.body)
        if not consumed and not self._drain():
            self.close_connection = True  # a body left unread would be taken for a request
        self.send_response(reply.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def _drain(self) -> bool:
        """Read and drop the body of a refused request, so the reply is not lost: closing
        a socket with unread input resets the connection, and the client may then never
        see the reply. False when the body is too big to drain (or its length unknown)."""
        try:
            left = int(self.headers.get("Content-Length") or "")
        except ValueError:
            return False
        if not 0 <= left <= DRAIN_LIMIT:
            return False
        while left > 0:
            chunk = self.rfile.read(min(left, 1 << 16))
            if not chunk:
                return False
            left -= len(chunk)
        return True

    do_POST = do_GET = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: object) -> None:
        return  # every report would be a line; the metrics count them


class _TlsServer(ThreadingHTTPServer):
    """Accepts plain sockets and does each TLS handshake in the connection's own thread,
    with the context current at that moment (so a renewed certificate takes effect
    without a restart, and a slow handshake blocks no one)."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        endpoint: ProgressEndpoint,
        context: Callable[[], ssl.SSLContext],
        limits: Limits,
    ) -> None:
        self.endpoint = endpoint
        self.context = context
        self.limits = limits
        self.slots = threading.BoundedSemaphore(limits.connections)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: the client retries on its next report
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(self.limits.read_timeout)
        try:
            tls = self.context().wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)  # type: ignore[arg-type]
        finally:
            with contextlib.suppress(OSError):
                tls.close()


def tls_context(material: ServingMaterial) -> ssl.SSLContext:
    """A server context presenting ``material``'s certificate (TLS 1.2 and up)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory(prefix="kubetrain-tls-") as folder:
        cert, key = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
        for path, text in ((cert, material.cert_pem), (key, material.key_pem)):
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                handle.write(text)
        context.load_cert_chain(cert, key)
    return context


class ProgressServer:
    """The HTTPS server, its certificate refresh loop, on daemon threads."""

    def __init__(
        self,
        endpoint: ProgressEndpoint,
        certificates: ServingCertificates,
        *,
        address: str,
        port: int,
        limits: Limits = Limits(),
        refresh_seconds: float = 3600.0,
    ) -> None:
        self.endpoint = endpoint
        self.certificates = certificates
        self.address = (address, port)
        self.limits = limits
        self.refresh_seconds = refresh_seconds
        self._context: ssl.SSLContext | None = None
        self._serving_pem = ""
        self._stop = threading.Event()
        self.server: _TlsServer | None = None
        self._threads: list[threading.Thread] = []

    @property
    def port(self) -> int:
        """The port it listens on (once started: port 0 picks a free one)."""
        return int(self.server.server_address[1]) if self.server else self.address[1]

    def context(self) -> ssl.SSLContext:
        assert self._context is not None, "start() loads the certificate first"
        return self._context

    def reload(self) -> ServingMaterial:
        """Read (and renew when due) the certificate; serve it from the next connection."""
        material = self.certificates.refresh()
        if material.cert_pem != self._serving_pem:
            self._context = tls_context(material)
            self._serving_pem = material.cert_pem
            log.info("serving certificate loaded", extra={"not_after": str(material.not_after)})
        return material

    def start(self) -> None:
        """Load the certificate (raises when the Secret cannot be read or written), then
        listen and serve (OSError when the address is taken)."""
        self.reload()
        self.server = _TlsServer(self.address, self.endpoint, self.context, self.limits)
        self._threads = [
            threading.Thread(target=self.server.serve_forever, name="progress", daemon=True),
            threading.Thread(target=self._refresh_loop, name="progress-tls", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self.refresh_seconds):
            try:
                self.reload()
            except (ApiError, RuntimeError, OSError) as err:
                log.warning("certificate refresh failed", extra={"error": str(err)})

    def stop(self) -> None:
        self._stop.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
