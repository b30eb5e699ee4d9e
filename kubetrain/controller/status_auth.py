"""Who may report a job's progress: a pod that job controls, proven by the projected
ServiceAccount token the operator gives its containers.

A bearer token is accepted for job ``ns/name`` of a kind when all of these hold:

1. The API server's TokenReview authenticates it for the audience
   ``trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status`` (upstream's
   audience for a TrainJob; ``kubeflow.org/v1/namespaces/<ns>/pytorchjobs/<name>/status``
   and so on for the v1 kinds, so a token minted for job A is refused for job B), which
   also checks its signature, its expiry and that the pod it is bound to still exists
   with that uid.
2. It is a ServiceAccount token of namespace ``ns`` bound to a pod (TokenReview's
   ``authentication.kubernetes.io/pod-name`` and ``pod-uid`` extras).
3. That pod, read from the API, has the same uid and is controlled by the job (its
   controller ownerReference; an MPIJob's launcher pod through its batch Job, which the
   MPIJob controls), so a pod of another job, or a pod that merely requested a token
   with job A's audience, is refused.

An accepted verdict names the reporter: the pod, its node and its gang attempt.

Upstream checks 1 and the namespace; 3 is kubetrain's addition. Verdicts are cached per
(token, TrainJob) for ``ACCEPT_TTL`` seconds (never past the token's own expiry) and
refusals for ``REFUSE_TTL``, so a pod reporting every few seconds costs one TokenReview
and one pod read a minute.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from kubetrain.api import keys as K
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.kinds import TRAINJOB
from kubetrain.api.progress import Reporter, token_audience
from kubetrain.controller.ownership import controller_of

POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
ACCEPT_TTL = 60.0
REFUSE_TTL = 10.0
CACHE_SIZE = 4096


class AuthApi(Protocol):
    """The two reads the check needs (``KubeAuthApi`` in the operator)."""

    def review_token(self, token: str, audience: str) -> Mapping[str, Any]:
        """The TokenReview's ``status``."""
        ...

    def pod(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    def batch_job(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True)
class Verdict:
    """Whether the caller may write the job's progress, and why not; who it is."""

    allowed: bool
    reason: str = ""
    reporter: Reporter | None = None


def bearer_token(header: str | None) -> str:
    """The credential of an ``Authorization: Bearer <token>`` header ('' when there is
    not exactly one; the scheme is matched case-insensitively)."""
    parts = (header or "").split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return ""
    return parts[1]


def _expiry(token: str) -> float | None:
    """The ``exp`` claim (seconds since the epoch) of an already reviewed JWT."""
    try:
        payload = token.split(".")[1]
        claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        exp = claims.get("exp")
        return float(exp) if isinstance(exp, int | float) else None
    except (IndexError, ValueError, orjson.JSONDecodeError):
        return None


class TokenAuthorizer:
    """The check in the module docs, with its cache."""

    def __init__(
        self,
        api: AuthApi,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.clock = clock
        self.wall_clock = wall_clock
        self._cache: OrderedDict[tuple[str, str, str, str], tuple[Verdict, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.reviews = 0

    def authorize(
        self, header: str | None, namespace: str, name: str, info: KindInfo = TRAINJOB
    ) -> Verdict:
        token = bearer_token(header)
        if not token:
            return Verdict(False, "no bearer token (Authorization: Bearer <token>)")
        key = (hashlib.sha256(token.encode()).hexdigest(), info.kind, namespace, name)
        now = self.clock()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached[1] > now:
                self._cache.move_to_end(key)
                return cached[0]
        verdict = self._check(token, namespace, name, info)
        ttl = ACCEPT_TTL if verdict.allowed else REFUSE_TTL
        expiry = _expiry(token)
        if expiry is not None:
            ttl = min(ttl, expiry - self.wall_clock())
        with self._lock:
            self._cache[key] = (verdict, now + max(0.0, ttl))
            self._cache.move_to_end(key)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return verdict

    def _check(self, token: str, namespace: str, name: str, info: KindInfo) -> Verdict:
        audience = token_audience(namespace, name, info)
        self.reviews += 1
        status = self.api.review_token(token, audience)
        if not status.get("authenticated"):
            error = status.get("error") or "not authenticated"
            return Verdict(False, f"the token is not valid for audience {audience}: {error}")
        if audience not in (status.get("audiences") or []):
            return Verdict(False, f"the token is not for audience {audience}")
        user = status.get("user") or {}
        username = str(user.get("username") or "")
        if not username.startswith(f"system:serviceaccount:{namespace}:"):
            return Verdict(
                False,
                f"{username or 'the caller'} is not a ServiceAccount of namespace {namespace}",
            )
        extra = user.get("extra") or {}
        pod_names = extra.get(POD_NAME_EXTRA) or []
        pod_uids = extra.get(POD_UID_EXTRA) or []
        if len(pod_names) != 1 or len(pod_uids) != 1:
            return Verdict(False, "the token is not bound to a pod (use a projected token)")
        pod = self.api.pod(namespace, pod_names[0])
        if pod is None or (pod.get("metadata") or {}).get("uid") != pod_uids[0]:
            return Verdict(False, f"pod {namespace}/{pod_names[0]} no longer exists")
        if not self._controlled(pod, namespace, name, info):
            return Verdict(
                False,
                f"pod {namespace}/{pod_names[0]} is not a pod of {info.kind} {namespace}/{name}",
            )
        spec = pod.get("spec") or {}
        labels = (pod.get("metadata") or {}).get("labels") or {}
        try:
            attempt = max(0, int(labels.get(K.ATTEMPT_LABEL, "0")))
        except ValueError:
            attempt = 0
        return Verdict(True, reporter=Reporter(pod_names[0], spec.get("nodeName") or "", attempt))

    def _controlled(
        self, pod: Mapping[str, Any], namespace: str, name: str, info: KindInfo
    ) -> bool:
        """Whether the job controls the pod (an MPI launcher's through its batch Job)."""
        owner = controller_of(pod) or {}
        if owner.get("kind") == info.kind and owner.get("name") == name:
            return True
        if owner.get("kind") != "Job" or owner.get("apiVersion") != "batch/v1":
            return False
        launcher = self.api.batch_job(namespace, str(owner.get("name") or ""))
        if launcher is None or (launcher.get("metadata") or {}).get("uid") != owner.get("uid"):
            return False
        above = controller_of(launcher) or {}
        return above.get("kind") == info.kind and above.get("name") == name
