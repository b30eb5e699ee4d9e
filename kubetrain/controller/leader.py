"""Leader election on a ``coordination.k8s.io/v1`` Lease, so that of several operator
replicas exactly one acts at a time.

The algorithm is client-go's: a replica takes the Lease when it is free or its holder
stopped renewing it for ``lease_duration`` seconds (measured on *this* replica's clock,
from when it last saw the Lease change, so clock skew between nodes does not matter);
the leader renews every ``retry_period`` and gives up leadership when it could not renew
for ``renew_deadline``. Writes use the Lease's resourceVersion, so two candidates never
both win. On a graceful shutdown the leader releases the Lease for a fast handover.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubetrain.controller.errors import ApiError
from kubetrain.controller.kube import LEASES, KubeApi

log = logging.getLogger("kubetrain.leader")


def _micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for Lease ``namespace/name`` as ``identity``."""

    def __init__(
        self,
        api: KubeApi,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError(
                f"lease_duration ({lease_duration}) > renew_deadline ({renew_deadline}) > "
                f"retry_period ({retry_period}) > 0 must hold"
            )
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_change = on_change
        self._leader = threading.Event()
        self.lost = threading.Event()
        self._observed: tuple[str, str] | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0

    @property
    def is_leader(self) -> bool:
        """Whether this replica holds the Lease."""
        return self._leader.is_set()

    def can_act(self) -> bool:
        """Whether this replica may write now: it holds the Lease and its last successful
        renewal was *sent* less than ``renew_deadline`` ago. Other replicas wait
        ``lease_duration`` (longer) from when they saw that renewal before taking over, so
        within this window no one else can lead. A process paused past it (SIGSTOP, a
        long GC, a frozen VM) resumes unable to write until a renewal succeeds."""
        return self.is_leader and time.monotonic() - self._last_renew < self.renew_deadline

    def wait_for_leadership(self, stop: threading.Event) -> bool:
        """Campaign until leader (True) or ``stop`` is set (False)."""
        while not stop.is_set():
            if self._try():
                return True
            stop.wait(self.retry_period)
        return False

    def keep_renewing(self, stop: threading.Event) -> None:
        """As leader: renew until ``stop``; sets ``lost`` when a renewal deadline passes."""
        while not stop.wait(self.retry_period):
            if self._try():
                continue
            if time.monotonic() - self._last_renew > self.renew_deadline:
                log.error("lost the leader lease", extra={"lease": self.name})
                self._set_leader(False)
                self.lost.set()
                return

    def release(self) -> None:
        """Give the Lease up (graceful shutdown), if held."""
        if not self.is_leader:
            return
        try:
            lease = self.api.get(LEASES, self.namespace, self.name)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = dict(lease["spec"])
                spec["holderIdentity"] = ""
                spec["leaseDurationSeconds"] = 1
                lease["spec"] = spec
                self.api.replace(lease)
        except ApiError as err:
            log.warning("could not release the lease", extra={"error": str(err)})
        self._set_leader(False)

    def _set_leader(self, value: bool) -> None:
        if value == self.is_leader:
            return
        if value:
            self._leader.set()
        else:
            self._leader.clear()
        log.info("leadership changed", extra={"leader": value, "identity": self.identity})
        if self.on_change is not None:
            self.on_change(value)

    def _spec(self, transitions: int, acquired: str | None = None) -> dict[str, Any]:
        now = _micro_time(datetime.now(UTC))
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": acquired or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _try(self) -> bool:
        """One attempt to acquire or renew; True when this replica holds the Lease."""
        sent = time.monotonic()
        try:
            lease = self.api.get(LEASES, self.namespace, self.name)
            if lease is None:
                self.api.create(
                    {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": self._spec(0),
                    }
                )
                return self._won(sent)
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            seen = (holder, str(spec.get("renewTime") or ""))
            if seen != self._observed:
                self._observed = seen
                self._observed_at = time.monotonic()
            transitions = int(spec.get("leaseTransitions") or 0)
            if holder == self.identity:
                lease["spec"] = self._spec(transitions, spec.get("acquireTime"))
                self.api.replace(lease)
                return self._won(sent)
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            expired = time.monotonic() - self._observed_at > duration
            if holder and not expired:
                self._set_leader(False)
                return False
            lease["spec"] = self._spec(transitions + 1)
            self.api.replace(lease)
            return self._won(sent)
        except ApiError as err:
            if err.status != 409:
                log.warning("lease update failed", extra={"error": str(err)})
            return False

    def _won(self, sent: float) -> bool:
        self._last_renew = sent
        self._set_leader(True)
        return True
