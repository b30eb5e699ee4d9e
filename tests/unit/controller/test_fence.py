"""The leader fence sits in the API client, after the rate limiter: a replica that was
deposed (frozen past its Lease, say) while a write waited for a token does not send it
when it wakes up; reads and the Lease's own renewals are never fenced.

The client points at a loopback port nobody listens on: a request that is sent fails
with a connection error (``ApiError`` status 0), one the fence stops raises ``Deposed``
and is never sent."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from kubernetes import client

from kubetrain.api.keys import FENCE_CHECKED_HEADER
from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.errors import ApiError, Deposed
from kubetrain.controller.kube import EVENTS, KubeApi
from kubetrain.controller.operator import Operator
from kubetrain.controller.ratelimit import TokenBucket

NOBODY = "http://127.0.0.1:9"  # the discard port: nothing serves it here
EVENT: dict[str, Any] = {"kind": "Event", "metadata": {"namespace": "ns", "name": "e"}}


def _api() -> KubeApi:
    return KubeApi(client.Configuration(host=NOBODY))


def test_a_write_that_waited_for_a_token_is_not_sent_once_deposed() -> None:
    api = _api()
    leading = [True]

    def fence(method: str, path: str) -> None:
        if not leading[0]:
            raise Deposed(f"{method} {path}")

    # The burst is spent; the next call waits for a token, and the replica is deposed
    # during that wait (as a SIGSTOP past the Lease would).
    api.limiter = TokenBucket(1.0, 1, sleep=lambda _: leading.__setitem__(0, False))
    api.limiter.acquire()
    api.fence = fence
    with pytest.raises(Deposed, match="POST /api/v1/namespaces/ns/events"):
        api.create(EVENT)
    assert api.writes == 0
    with pytest.raises(ApiError) as err:  # a read is sent (and fails: nobody listens)
        api.get(EVENTS, "ns", "e")
    assert err.value.status == 0


def test_the_operator_fences_every_write_but_its_own_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "kubetrain-system")
    api = _api()
    operator = Operator(
        OperatorConfig(leader_elect=True, leader_election_id="fenced"), api, serve_http=False
    )
    assert api.fence == operator.fence
    assert not operator.may_write()  # it never renewed a Lease
    with pytest.raises(Deposed, match="cannot prove it still holds the Lease"):
        api.create(EVENT)
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"namespace": "kubetrain-system", "name": "fenced"},
    }
    for renew in (api.create, api.replace):
        with pytest.raises(ApiError) as err:  # sent (nobody listens), not fenced
            renew(lease)
        assert err.value.status == 0
    other = {**lease, "metadata": {"namespace": "kubetrain-system", "name": "someone-else"}}
    with pytest.raises(Deposed):
        api.replace(other)
    assert api.writes == 2


def test_without_leader_election_nothing_is_fenced() -> None:
    api = _api()
    Operator(OperatorConfig(), api, serve_http=False)
    assert api.fence is None
    with pytest.raises(ApiError) as err:
        api.create(EVENT)
    assert err.value.status == 0


class _Recorder(BaseHTTPRequestHandler):
    """Answers every request with ``{}`` and keeps the headers it came with."""

    seen: ClassVar[list[tuple[str, dict[str, str]]]] = []

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.command, dict(self.headers.items())))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_a_fenced_write_says_when_its_fence_let_it_through() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        api = KubeApi(client.Configuration(host=f"http://127.0.0.1:{server.server_port}"))
        api.fence = lambda method, path: None
        before = time.monotonic()
        api.create(EVENT)
        after = time.monotonic()
        api.get(EVENTS, "ns", "e")
        api.fence = None
        api.create(EVENT)
    finally:
        server.shutdown()
        server.server_close()
    (write, fenced), (read, unfenced_read), (_, unfenced) = _Recorder.seen
    assert (write, read) == ("POST", "GET")
    assert before <= float(fenced[FENCE_CHECKED_HEADER]) <= after
    assert FENCE_CHECKED_HEADER not in unfenced_read
    assert FENCE_CHECKED_HEADER not in unfenced
