"""A proxy between one operator process and the API server, to kill the operator at an
exact step of its work and to see every request it sends.

The operator talks plain HTTP to the proxy on 127.0.0.1 (``kubeconfig_path``: a
kubeconfig naming only the proxy); the proxy forwards each request to the real API server
over TLS with the admin's client certificate, streaming watch responses as they come.
Nothing in the operator is changed or mocked: it runs its own client against a server
that answers as the API server does, and the proxy only watches and, when a one-shot
``Trap`` matches a request, runs its action (say ``OperatorProcess.kill``):

- ``before``: the request is never forwarded (the process died while sending it);
- ``after``: the request is forwarded and the API server's answer is dropped (the process
  died after the write was made, before it could act on the answer).

``log`` records every forwarded request (time, method, path, status, and when the
sender's leader fence let a write through) for the figures and for checks such as "no
write cleared after the Lease changed hands".
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import urllib3
import yaml

from kubetrain.api.keys import FENCE_CHECKED_HEADER
from kubetrain.manifest import parse_yaml

#: Hop-by-hop headers a proxy must not pass on (RFC 9110, 7.6.1), and the length, which
#: the proxy sets itself.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
)


@dataclass(frozen=True)
class Request:
    """One request as the operator sent it."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    body: bytes

    @property
    def is_write(self) -> bool:
        return self.method not in ("GET", "HEAD")

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch", [""])[0] == "true"

    def json(self) -> Any:
        """The body decoded (None when empty or not JSON)."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


@dataclass
class Trap:
    """Runs ``action`` once, on the first request ``matches`` accepts, ``before`` or
    ``after`` forwarding it (see the module docs); ``fired`` is set once it has run."""

    matches: Callable[[Request], bool]
    action: Callable[[], None]
    when: str = "after"
    fired: threading.Event = field(default_factory=threading.Event)
    #: The request that sprang it.
    request: Request | None = None


@dataclass(frozen=True)
class Logged:
    """A request the proxy forwarded: when (monotonic), what, and the answer's status."""

    at: float
    method: str
    path: str
    status: int
    #: When the sender's leader fence let the write through (its ``FENCE_CHECKED_HEADER``,
    #: the sender's CLOCK_MONOTONIC, which this process shares), or None without one.
    fence_checked: float | None = None


def _upstream(kubeconfig: Path) -> tuple[str, urllib3.PoolManager]:
    config = parse_yaml(kubeconfig.read_text(encoding="utf-8"))
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    pool = urllib3.PoolManager(
        maxsize=64,
        cert_reqs="CERT_REQUIRED",
        ca_certs=cluster["certificate-authority"],
        cert_file=user["client-certificate"],
        key_file=user["client-key"],
    )
    return str(cluster["server"]).rstrip("/"), pool


class FaultProxy:
    """See the module docs. ``start()`` serves on a free port of 127.0.0.1."""

    def __init__(self, kubeconfig: Path, workdir: Path) -> None:
        self.server_url, self._pool = _upstream(kubeconfig)
        self.kubeconfig_path = workdir / f"proxy-{id(self):x}.kubeconfig"
        self.log: list[Logged] = []
        self._traps: list[Trap] = []
        self._lock = threading.Lock()
        self._streams: set[Any] = set()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def start(self) -> FaultProxy:
        self.kubeconfig_path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "proxy", "cluster": {"server": self.url}}],
                    "users": [{"name": "proxy", "user": {}}],
                    "contexts": [
                        {"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}
                    ],
                    "current-context": "proxy",
                }
            ),
            encoding="utf-8",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            # A relay thread blocked reading a watch holds the response's read lock, so
            # closing it would wait for the API server's next event (a minute or more):
            # shut the socket first, which ends that read at once.
            sock = getattr(getattr(stream, "connection", None), "sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            stream.release_conn()
        self._pool.clear()

    def arm(self, trap: Trap) -> Trap:
        """Add a one-shot trap; returns it (wait on ``trap.fired``)."""
        with self._lock:
            self._traps.append(trap)
        return trap

    def writes(self, since: float = 0.0) -> list[Logged]:
        """Successful writes forwarded at or after ``since`` (monotonic)."""
        with self._lock:
            return [
                e for e in self.log if e.at >= since and e.method != "GET" and 200 <= e.status < 300
            ]

    # -- serving -------------------------------------------------------------------------

    def _spring(self, request: Request, when: str) -> Trap | None:
        with self._lock:
            for trap in self._traps:
                if trap.when == when and trap.matches(request):
                    trap.request = request
                    self._traps.remove(trap)
                    return trap
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return  # the proxy's own log is ``FaultProxy.log``

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                split = urlsplit(self.path)
                request = Request(
                    self.command,
                    split.path,
                    parse_qs(split.query, keep_blank_values=True),
                    body,
                )
                before = proxy._spring(request, "before")
                if before is not None:
                    before.action()
                    before.fired.set()
                    self.close_connection = True
                    return
                # The query is passed on verbatim (selectors keep their encoding).
                raw_query = split.query
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in _HOP_BY_HOP and k.lower() != "host"
                }
                try:
                    response = proxy._pool.request(
                        request.method,
                        proxy.server_url + split.path + (f"?{raw_query}" if raw_query else ""),
                        body=body or None,
                        headers=headers,
                        preload_content=False,
                        retries=False,
                        timeout=urllib3.Timeout(
                            connect=10.0, read=None if request.is_watch else 60.0
                        ),
                    )
                except urllib3.exceptions.HTTPError:
                    self.close_connection = True  # the API server is down: so is the proxy
                    return
                checked = self.headers.get(FENCE_CHECKED_HEADER)
                logged = Logged(
                    time.monotonic(),
                    request.method,
                    split.path,
                    response.status,
                    float(checked) if checked is not None else None,
                )
                with proxy._lock:
                    proxy.log.append(logged)
                after = proxy._spring(request, "after")
                if after is not None:
                    response.read()
                    response.release_conn()
                    after.action()
                    after.fired.set()
                    self.close_connection = True
                    return
                self._relay(response)

            def _relay(self, response: Any) -> None:
                self.send_response(response.status)
                for key, value in response.headers.items():
                    if key.lower() not in _HOP_BY_HOP:
                        self.send_header(key, value)
                if not response.chunked:
                    data = response.read()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    response.release_conn()
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                with proxy._lock:
                    proxy._streams.add(response)
                try:
                    for chunk in _chunks(response):
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (OSError, ValueError, AttributeError, urllib3.exceptions.HTTPError):
                    # Either side went away (``stop`` releasing a stream mid-read included).
                    self.close_connection = True
                finally:
                    with proxy._lock:
                        proxy._streams.discard(response)
                    response.release_conn()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        return Handler


def _chunks(response: Any) -> Iterator[bytes]:
    for chunk in response.read_chunked(decode_content=False):
        if chunk:
            yield chunk
