"""The one module that talks to the Kubernetes API.

A thin JSON client on the official ``kubernetes`` package's configuration and connection
pool: list, watch, get, server-side apply (field manager ``kubetrain``), create, delete
and update, on plain dicts. It skips the generated model classes on purpose: the operator
reads camelCase JSON and keeps only the fields it needs, which keeps CPU and memory low.
Requests (not watches) are rate limited here (``--kube-api-qps``/``--kube-api-burst``;
Events: ``--event-qps``); while ``draining`` (the operator stops), they fail, not wait.

Credentials come only from the official client's loaders (``load_incluster_config``,
``load_kube_config``): client certificates are in the pool's TLS settings, and each
request asks the configuration for its auth headers (``auth_settings()``), which runs the
loaders' refresh hooks (a ServiceAccount token rotated on disk, exec plugins' tokens). A
401 runs the loader again at once (at most every few seconds) and retries once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import orjson
import urllib3
from kubernetes import client

from kubetrain import __version__
from kubetrain.api.keys import FENCE_CHECKED_HEADER
from kubetrain.api.kinds import CLUSTER_TRAINING_RUNTIME, OPERATOR_KINDS, TRAINING_RUNTIME
from kubetrain.controller.credentials import auth_headers, credential_loader
from kubetrain.controller.errors import ApiError
from kubetrain.controller.gang import BACKENDS
from kubetrain.controller.ratelimit import TokenBucket

log = logging.getLogger("kubetrain.kube")

FIELD_MANAGER = "kubetrain"
USER_AGENT = f"kubetrain-operator/{__version__}"
_META_ONLY = "application/json;as=PartialObjectMetadata{list};g=meta.k8s.io;v=v1,application/json"


#: The Kubernetes verb of each HTTP method (a GET of a collection is ``list``).
_VERBS = {"GET": "get", "POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}


@dataclass(frozen=True)
class Resource:
    """An API resource: where it lives and what it is called."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``group/version``, or ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str = ""
    ) -> str:
        """The request path for a collection, an object or its subresource."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        return base + "".join(f"/{part}" for part in (self.plural, name, subresource) if part)


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
EVENTS = Resource("", "v1", "events", "Event")
BATCH_JOBS = Resource("batch", "v1", "jobs", "Job")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
AUTOSCALERS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
JOB_RESOURCES: Mapping[str, Resource] = {
    kind: Resource(info.group, info.version, info.plural, kind)
    for kind, info in OPERATOR_KINDS.items()
}
#: The runtimes TrainJobs reference (a ClusterTrainingRuntime is cluster-scoped).
RUNTIME_RESOURCES: Mapping[str, Resource] = {
    info.kind: Resource(info.group, info.version, info.plural, info.kind, info.namespaced)
    for info in (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)
}
_CHILDREN = (PODS, SERVICES, CONFIG_MAPS, SECRETS, BATCH_JOBS, AUTOSCALERS)
CHILD_RESOURCES: Mapping[str, Resource] = {r.kind: r for r in _CHILDREN}
#: The gang schedulers' PodGroups (one kind name, two API groups), by apiVersion.
POD_GROUP_RESOURCES: Mapping[str, Resource] = {
    b.api_version: Resource(b.group, b.version, "podgroups", "PodGroup") for b in BACKENDS.values()
}
_OTHER_RESOURCES: Mapping[str, Resource] = {r.kind: r for r in (EVENTS, LEASES)}


def _selectors(label: str | None, field: str | None) -> dict[str, str]:
    """The selector query parameters given."""
    return {k: v for k, v in (("labelSelector", label), ("fieldSelector", field)) if v}


def resource_of(obj: Mapping[str, Any]) -> Resource:
    """The resource of an object by its kind (jobs, children, events, leases)."""
    kind = obj.get("kind")
    if kind == "PodGroup" and obj.get("apiVersion") in POD_GROUP_RESOURCES:
        return POD_GROUP_RESOURCES[str(obj["apiVersion"])]
    for table in (JOB_RESOURCES, CHILD_RESOURCES, RUNTIME_RESOURCES, _OTHER_RESOURCES):
        if kind in table:
            return table[str(kind)]
    raise ValueError(f"kind {kind!r} is not one the operator manages")


@dataclass(frozen=True)
class WatchEvent:
    """One watch event: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, and its object."""

    type: str
    object: dict[str, Any]


class KubeApi:
    """JSON calls to the API server described by a ``kubernetes`` client configuration."""

    def __init__(
        self,
        configuration: client.Configuration,
        *,
        qps: float = 20.0,
        burst: int = 40,
        pool_size: int = 32,
        reload: Callable[[], client.Configuration] | None = None,
    ) -> None:
        configuration.connection_pool_maxsize = pool_size
        self._configuration = configuration
        self._rest = client.rest.RESTClientObject(configuration)
        self._host = configuration.host.rstrip("/")
        self._reload = reload
        self._reload_lock = threading.Lock()
        self._reloaded_at = float("-inf")
        self.draining = threading.Event()
        self.limiter = TokenBucket(qps, burst, sleep=self.draining.wait)
        #: Sent on every request (benchmarks set their own: the audit log tells them apart).
        self.user_agent = USER_AGENT
        self.requests = 0
        #: Writes (POST, PATCH, PUT, DELETE) sent, for the fencing tests and metrics.
        self.writes = 0
        #: Requests by (Kubernetes verb, HTTP status code or 'error'), watches included:
        #: ``kubetrain_api_requests_total``.
        self.by_call: dict[tuple[str, str], int] = {}
        self._count_lock = threading.Lock()
        #: Called with (method, path) before each write is sent, after the rate limiter;
        #: raises to stop it (the operator's leader fence: ``Operator.fence``).
        self.fence: Callable[[str, str], None] | None = None

    @classmethod
    def connect(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        qps: float = 20.0,
        burst: int = 40,
        pool_size: int = 32,
    ) -> KubeApi:
        """Credentials as the official client loads them: the kubeconfig given (or
        ``$KUBECONFIG`` / ``~/.kube/config`` with only a context), else in-cluster (the
        pod's ServiceAccount token and CA, ``KUBERNETES_SERVICE_HOST``/``PORT``), else
        the default kubeconfig. Raises ``config.ConfigException`` when none is usable."""
        load = credential_loader(kubeconfig, context)
        return cls(load(), qps=qps, burst=burst, pool_size=pool_size, reload=load)

    def count_call(self, verb: str, code: str) -> None:
        with self._count_lock:
            self.by_call[(verb, code)] = self.by_call.get((verb, code), 0) + 1

    def calls(self) -> dict[tuple[str, str], int]:
        with self._count_lock:
            return dict(self.by_call)

    def close(self) -> None:
        """Close the connection pool."""
        self._rest.close()

    # -- low level ----------------------------------------------------------------------

    def _headers(self, accept: str = "application/json", content_type: str = "") -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": self.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        headers.update(auth_headers(self._configuration))
        return headers

    def reload_credentials(self, *, min_interval: float = 5.0) -> bool:
        """Run the credential loader again (after a 401: the token may have rotated).
        At most once every ``min_interval`` seconds; True when it reloaded."""
        if self._reload is None:
            return False
        with self._reload_lock:
            if time.monotonic() - self._reloaded_at < min_interval:
                return False
            self._reloaded_at = time.monotonic()
            try:
                fresh = self._reload()
            except Exception as err:  # the loader's own exceptions vary by source
                log.warning("could not reload credentials", extra={"error": str(err)})
                return False
            # Headers are read per request; the pool keeps its TLS settings (a client
            # certificate does not rotate under a running process).
            self._configuration.api_key = dict(fresh.api_key)
            self._configuration.api_key_prefix = dict(fresh.api_key_prefix)
            self._configuration.refresh_api_key_hook = fresh.refresh_api_key_hook
            log.info("reloaded credentials after a 401")
            return True

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout: float = 30.0,
        verb: str = "",
        limiter: TokenBucket | None = None,
    ) -> dict[str, Any]:
        """One call rate-limited by ``limiter`` (default: the client's); the decoded JSON
        body, or ApiError. A 401 reloads the credentials and retries once. ``verb`` names
        it for the metrics (default: from the method, GET being ``get``)."""
        verb = verb or _VERBS.get(method, method.lower())
        url = self._host + path + (f"?{urlencode(query)}" if query else "")
        data = orjson.dumps(body) if body is not None else None
        call = f"{method} {path}"
        for attempt in (1, 2):
            (limiter or self.limiter).acquire()
            if limiter is None and self.draining.is_set():
                raise ApiError(0, "Draining", "the operator is stopping", call)
            headers = self._headers(accept, content_type if data is not None else "")
            if method != "GET":
                if self.fence is not None:
                    self.fence(method, path)
                    headers[FENCE_CHECKED_HEADER] = f"{time.monotonic():.6f}"
                self.writes += 1
            self.requests += 1
            try:
                response = self._rest.pool_manager.request(
                    method,
                    url,
                    body=data,
                    headers=headers,
                    timeout=urllib3.Timeout(connect=10.0, read=timeout),
                    preload_content=True,
                    retries=False,
                )
            except urllib3.exceptions.HTTPError as err:
                self.count_call(verb, "error")
                raise ApiError(0, type(err).__name__, str(err), call) from err
            self.count_call(verb, str(response.status))
            if response.status == 401 and attempt == 1 and self.reload_credentials():
                continue
            break
        if not 200 <= response.status < 300:
            raise ApiError.from_body(response.status, response.data, call)
        result: dict[str, Any] = orjson.loads(response.data or b"{}")
        return result

    # -- reads ---------------------------------------------------------------------------

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> tuple[list[dict[str, Any]], str]:
        """Every object (following ``continue`` pages) and the list's resourceVersion."""
        items: list[dict[str, Any]] = []
        query = {"limit": "500", **_selectors(label_selector, field_selector)}
        accept = _META_ONLY.format(list="List") if metadata_only else "application/json"
        while True:
            page = self.request(
                "GET",
                resource.path(namespace),
                query=query,
                accept=accept,
                timeout=60.0,
                verb="list",
            )
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion", ""))
            query["continue"] = str(token)

    def watch(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
        timeout_seconds: int = 300,
        on_open: Any = None,
    ) -> Iterator[WatchEvent]:
        """Stream events after ``resource_version`` until the server ends the watch.

        ``on_open(response)`` receives the streaming response so another thread can
        shut it down. An expired version arrives as an ERROR event with code 410.
        """
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
            **_selectors(label_selector, field_selector),
        }
        url = self._host + resource.path(namespace) + f"?{urlencode(query)}"
        accept = _META_ONLY.format(list="") if metadata_only else "application/json"
        call = f"WATCH {resource.path(namespace)}"
        try:
            response = self._rest.pool_manager.request(
                "GET",
                url,
                headers=self._headers(accept),
                timeout=urllib3.Timeout(connect=10.0, read=timeout_seconds + 30.0),
                preload_content=False,
                retries=False,
            )
        except urllib3.exceptions.HTTPError as err:
            self.count_call("watch", "error")
            raise ApiError(0, type(err).__name__, str(err), call) from err
        self.count_call("watch", str(response.status))
        try:
            if response.status != 200:
                if response.status == 401:
                    self.reload_credentials()  # the informer's retry uses the new token
                raise ApiError.from_body(response.status, response.read(), call)
            if on_open is not None:
                on_open(response)
            buffer = b""
            for chunk in response.stream(65536):
                # Every complete line of the chunk at once (one event per line).
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        doc = orjson.loads(line)
                        yield WatchEvent(str(doc.get("type")), doc.get("object") or {})
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as err:
            raise ApiError(0, type(err).__name__, str(err), call) from err
        finally:
            response.release_conn()

    def get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        """One object, or None when it does not exist."""
        try:
            return self.request("GET", resource.path(namespace, name))
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    # -- writes --------------------------------------------------------------------------

    def apply(
        self, obj: Mapping[str, Any], *, subresource: str = "", resource: Resource | None = None
    ) -> dict[str, Any]:
        """Server-side apply ``obj`` as field manager ``kubetrain`` (force: kubetrain owns
        its children). A ``metadata.resourceVersion`` in ``obj`` is a precondition.
        ``resource`` is needed only for kinds the operator does not manage."""
        resource = resource or resource_of(obj)
        meta = obj["metadata"]
        return self.request(
            "PATCH",
            resource.path(meta.get("namespace"), meta["name"], subresource),
            query={"fieldManager": FIELD_MANAGER, "force": "true"},
            body=obj,
            content_type="application/apply-patch+yaml",
        )

    def create(
        self,
        obj: Mapping[str, Any],
        *,
        resource: Resource | None = None,
        limiter: TokenBucket | None = None,
    ) -> dict[str, Any]:
        """POST ``obj`` (field manager ``kubetrain``); 409 when it exists."""
        path = (resource or resource_of(obj)).path(obj["metadata"].get("namespace"))
        query = {"fieldManager": FIELD_MANAGER}
        return self.request("POST", path, query=query, body=obj, limiter=limiter)

    def json_patch(
        self, resource: Resource, namespace: str | None, name: str, ops: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """A JSON patch (RFC 6902): ``test`` operations make it a precondition."""
        return self.request(
            "PATCH",
            resource.path(namespace, name),
            query={"fieldManager": FIELD_MANAGER},
            body=ops,
            content_type="application/json-patch+json",
        )

    def replace(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """PUT (optimistic concurrency on ``metadata.resourceVersion``)."""
        resource = resource_of(obj)
        meta = obj["metadata"]
        return self.request(
            "PUT",
            resource.path(meta.get("namespace"), meta["name"]),
            query={"fieldManager": FIELD_MANAGER},
            body=obj,
        )

    def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        propagation: str = "Background",
        grace: int | None = None,
    ) -> bool:
        """Delete (only the object with ``uid``; with ``grace`` seconds when given, 0: at
        once); False when already gone."""
        body: dict[str, Any] = {"kind": "DeleteOptions", "propagationPolicy": propagation}
        body.update(apiVersion="v1", **({} if grace is None else {"gracePeriodSeconds": grace}))
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.request("DELETE", resource.path(namespace, name), body=body)
        except ApiError as err:
            if err.status == 404:
                return False
            if err.status == 409 and uid:
                return False  # a newer object of that name: not ours to delete
            raise
        return True
