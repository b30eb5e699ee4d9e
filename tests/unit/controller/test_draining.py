"""A stopping operator's API client: requests on its own rate limit end instead of
waiting for a token."""

from __future__ import annotations

import threading
import time

from kubernetes import client as k8s

from kubetrain.controller.errors import ApiError
from kubetrain.controller.kube import KubeApi


def test_a_draining_client_refuses_instead_of_waiting_for_a_token() -> None:
    """A stopping operator: reconciles waiting on the client's rate limit end at once
    (SIGTERM to exit took 5.7 s at the default 20 QPS before); other limiters still send."""
    configuration = k8s.Configuration()
    configuration.host = "https://127.0.0.1:1"  # nothing listens: no request may be sent
    api = KubeApi(configuration, qps=0.001, burst=1)
    api.limiter.acquire()  # the burst is spent: the next request would wait ~1,000 s
    threading.Timer(0.2, api.draining.set).start()
    began = time.monotonic()
    try:
        api.request("GET", "/api/v1/namespaces/x/pods/p")
    except ApiError as err:
        assert err.reason == "Draining"
    else:
        raise AssertionError("a draining client sent a request")
    assert time.monotonic() - began < 2
    api.close()
