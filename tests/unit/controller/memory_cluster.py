"""An in-memory cluster behind the reconciler's two interfaces (JobCache and
ClusterWriter), recording every write in order. The informer-backed implementation is
exercised against the real API server by the integration tests."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kubetrain.controller.decisions import ChildRef, Event
from kubetrain.controller.errors import ApiError, ChildConflict
from kubetrain.controller.model import Observed
from kubetrain.controller.ownership import Holder, holder
from kubetrain.controller.ports import JobKey

KINDS = ("Pod", "Service", "ConfigMap", "Secret", "Job", "HorizontalPodAutoscaler")


class MemoryCluster:
    def __init__(self) -> None:
        self.jobs: dict[JobKey, dict[str, Any]] = {}
        self.children: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in KINDS}
        self.calls: list[tuple[str, str]] = []
        self.events: list[Event] = []
        #: kind -> error raised by the next apply/create of that kind.
        self.fail_next: dict[str, ApiError] = {}
        #: Objects the job does not control that hold names (kind -> name -> object).
        self.foreign: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in KINDS}
        self.awaited: dict[JobKey, frozenset[tuple[str, str]]] = {}
        #: TrainingRuntimes / ClusterTrainingRuntimes by (kind, namespace or "", name).
        self.runtimes: dict[JobKey, dict[str, Any]] = {}
        self._generated = 0

    def add_job(self, raw: dict[str, Any]) -> JobKey:
        key = (raw["kind"], raw["metadata"]["namespace"], raw["metadata"]["name"])
        self.jobs[key] = copy.deepcopy(raw)
        return key

    # -- JobCache --------------------------------------------------------------------

    def job(self, key: JobKey) -> dict[str, Any] | None:
        return copy.deepcopy(self.jobs.get(key))

    def observed(self, key: JobKey, uid: str, now: datetime) -> Observed:
        raw = self.jobs.get(key) or {}
        ref = (raw.get("spec") or {}).get("runtimeRef") or {}
        rkind = ref.get("kind") or "ClusterTrainingRuntime"
        rkey = (str(rkind), key[1] if rkind == "TrainingRuntime" else "", str(ref.get("name")))
        snapshot = self.children["ConfigMap"].get(f"{key[2]}-runtime-snapshot")
        trainjob = key[0] == "TrainJob"
        return Observed(
            runtime=copy.deepcopy(self.runtimes.get(rkey)) if trainjob else None,
            runtime_snapshot=dict(snapshot["data"]) if trainjob and snapshot else None,
            pods=dict(self.children["Pod"]),
            services=dict(self.children["Service"]),
            config_maps=dict(self.children["ConfigMap"]),
            secrets=dict(self.children["Secret"]),
            batch_jobs=dict(self.children["Job"]),
            autoscalers=dict(self.children["HorizontalPodAutoscaler"]),
            now=now,
        )

    def set_awaited(self, key: JobKey, refs: frozenset[tuple[str, str]]) -> None:
        self.awaited[key] = refs

    # -- ClusterWriter ---------------------------------------------------------------

    def _store(self, verb: str, obj: dict[str, Any]) -> None:
        error = self.fail_next.pop(obj["kind"], None)
        if error is not None:
            raise error
        stored = copy.deepcopy(obj)
        stored["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")
        self.children[obj["kind"]][obj["metadata"]["name"]] = stored
        self.calls.append((verb, f"{obj['kind']}/{obj['metadata']['name']}"))

    def apply(self, obj: dict[str, Any]) -> None:
        self._store("apply", obj)

    def create(self, obj: dict[str, Any]) -> bool:
        kind, meta = obj["kind"], obj["metadata"]
        existing = self.foreign[kind].get(meta["name"]) or self.children[kind].get(meta["name"])
        if existing is not None:
            verdict = holder(existing, obj)
            if verdict.holder is Holder.THIS_JOB:
                self.calls.append(("create-exists", f"{kind}/{meta['name']}"))
                return False
            self.calls.append(("conflict", f"{kind}/{meta['name']}"))
            raise ChildConflict(
                kind,
                meta["namespace"],
                meta["name"],
                verdict.description,
                predecessor=verdict.holder is Holder.PREDECESSOR,
            )
        self._store("create", obj)
        return True

    def delete(self, namespace: str, ref: ChildRef) -> None:
        self.children[ref.kind].pop(ref.name, None)
        self.calls.append(("delete", f"{ref.kind}/{ref.name}"))

    def runtime(self, key: JobKey) -> dict[str, Any] | None:
        return self.runtimes.get(key)

    def runtime_users(self, key: JobKey) -> list[Mapping[str, Any]]:
        out: list[Mapping[str, Any]] = []
        for (kind, namespace, _name), job in self.jobs.items():
            ref = (job.get("spec") or {}).get("runtimeRef") or {}
            rkind = ref.get("kind") or "ClusterTrainingRuntime"
            rns = namespace if rkind == "TrainingRuntime" else ""
            if kind == "TrainJob" and (rkind, rns, ref.get("name")) == key:
                out.append(job)
        return out

    def set_runtime_in_use(self, key: JobKey, runtime: Mapping[str, Any], in_use: bool) -> None:
        # What the JSON patch does (``runtimes.in_use_patch``, tested on its own).
        meta = self.runtimes[key].setdefault("metadata", {})
        annotations = meta.setdefault("annotations", {})
        if in_use:
            annotations["kubetrain.dev/runtime-in-use"] = "true"
        else:
            annotations.pop("kubetrain.dev/runtime-in-use", None)
        kept = meta.get("finalizers") or []
        meta["finalizers"] = [f for f in kept if f != "kubetrain.dev/runtime-in-use"]
        self.calls.append(("runtime-in-use" if in_use else "runtime-free", key[2]))

    def ungate(self, namespace: str, ref: ChildRef, gate: str) -> None:
        pod = self.children["Pod"].get(ref.name)
        if pod is None:
            return
        gates = pod.get("spec", {}).get("schedulingGates") or []
        pod["spec"]["schedulingGates"] = [g for g in gates if g.get("name") != gate]
        self.calls.append(("ungate", f"Pod/{ref.name}"))

    def write_status(self, key: JobKey, raw: Mapping[str, Any], status: dict[str, Any]) -> None:
        job = self.jobs[key]
        job["status"] = copy.deepcopy(status)
        meta = job["metadata"]
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or "1") + 1)
        self.calls.append(("status", key[2]))

    def patch_job(self, key: JobKey, ops: list[dict[str, Any]]) -> dict[str, Any]:
        """The JSON patch operations the operator sends (test, add, replace), as the API
        server applies them: all or nothing, a failed test a 409."""
        job = copy.deepcopy(self.jobs[key])
        for op in ops:
            *parents, last = [
                part.replace("~1", "/").replace("~0", "~") for part in op["path"].split("/")[1:]
            ]
            target: Any = job
            for part in parents:
                target = target[part]
            if op["op"] == "test":
                if target.get(last) != op["value"]:
                    raise ApiError(409, "Conflict", f"test of {op['path']} failed")
            elif op["op"] in ("add", "replace"):
                target[last] = copy.deepcopy(op["value"])
            else:
                raise AssertionError(f"unexpected JSON patch operation {op}")
        meta = job["metadata"]
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or "1") + 1)
        self.jobs[key] = job
        self.calls.append(("patch-job", key[2]))
        return copy.deepcopy(job)

    def delete_job(self, key: JobKey, uid: str) -> None:
        self.jobs.pop(key, None)
        self.calls.append(("delete-job", key[2]))

    def emit_event(self, raw: Mapping[str, Any], event: Event) -> None:
        self.events.append(event)
        self.calls.append(("event", event.reason))

    def state(self, key: JobKey) -> str | None:
        conditions = (self.jobs[key].get("status") or {}).get("conditions") or []
        return str(conditions[-1]["type"]) if conditions else None

    def condition(self, key: JobKey, kind: str) -> dict[str, Any] | None:
        for cond in (self.jobs[key].get("status") or {}).get("conditions") or []:
            if cond["type"] == kind:
                found: dict[str, Any] = cond
                return found
        return None
