"""Helpers the integration tests share: server-side apply, waiting, diffs, the listening
sockets of processes."""

from __future__ import annotations

import ipaddress
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

FIELD_MANAGER = "kubetrain"
T = TypeVar("T")


def wait_for(
    observe: Callable[[], T],
    done: Callable[[T], bool],
    *,
    what: str,
    timeout: float = 60.0,
    interval: float = 0.25,
) -> T:
    """Poll ``observe()`` until ``done`` holds for its result; return that result.

    On timeout, fail with ``what`` and the last thing observed, so the report says what
    was expected and what the cluster showed instead.
    """
    deadline = time.monotonic() + timeout
    while True:
        seen = observe()
        if done(seen):
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what}; last seen: {seen!r}"
            )
        time.sleep(interval)


def wait_until_kueue_knows_the_runtime(
    dry_run_create: Callable[[], object], runtime: str, *, timeout: float = 90.0
) -> None:
    """Kueue's TrainJob webhook looks a TrainJob's runtime up in its informer cache, so a
    TrainJob created right after its runtime can be refused ("runtime '<name>' not
    found") until the watch delivers it. ``dry_run_create`` creates the TrainJob with
    ``dryRun=All``: it goes through that webhook (``sideEffects: None``) and stores
    nothing; once it is accepted, the real create will be."""

    def attempt() -> str:
        try:
            dry_run_create()
        except ApiException as err:
            if err.status == 403 and f"runtime '{runtime}' not found" in str(err.body):
                return str(err.body)
            raise
        return "accepted"

    wait_for(
        attempt,
        lambda seen: seen == "accepted",
        what=f"Kueue's TrainJob webhook to see runtime {runtime}",
        timeout=timeout,
    )


def resource_for(dyn: DynamicClient, obj: dict[str, Any]) -> Any:
    return dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])


def apply(
    dyn: DynamicClient,
    obj: dict[str, Any],
    *,
    namespace: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Server-side apply ``obj`` as field manager ``kubetrain``; return the result."""
    resource = resource_for(dyn, obj)
    kwargs: dict[str, Any] = {"field_manager": FIELD_MANAGER}
    if dry_run:
        kwargs["dry_run"] = "All"
    if resource.namespaced:
        kwargs["namespace"] = obj.get("metadata", {}).get("namespace") or namespace
        if not kwargs["namespace"]:
            raise ValueError(
                f"{obj['kind']}/{obj['metadata']['name']} is namespaced but has no namespace "
                "and none was given"
            )
    result: dict[str, Any] = resource.server_side_apply(body=obj, **kwargs).to_dict()
    return result


def read(
    dyn: DynamicClient, api_version: str, kind: str, name: str, namespace: str | None = None
) -> dict[str, Any]:
    """One object as plain JSON."""
    resource = dyn.resources.get(api_version=api_version, kind=kind)
    result: dict[str, Any] = resource.get(name=name, namespace=namespace).to_dict()
    return result


def list_objects(
    dyn: DynamicClient,
    api_version: str,
    kind: str,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
) -> list[dict[str, Any]]:
    """Objects of a kind as plain JSON."""
    resource = dyn.resources.get(api_version=api_version, kind=kind)
    items: list[dict[str, Any]] = resource.get(
        namespace=namespace, label_selector=label_selector
    ).to_dict()["items"]
    return items


def get(dyn: DynamicClient, obj: dict[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
    resource = resource_for(dyn, obj)
    ns = (obj.get("metadata", {}).get("namespace") or namespace) if resource.namespaced else None
    result: dict[str, Any] = resource.get(name=obj["metadata"]["name"], namespace=ns).to_dict()
    return result


def api_error_message(err: ApiException) -> str:
    """The human message of a Status error body (falls back to the raw body)."""
    if not err.body:
        return f"{err.status} {err.reason}"
    try:
        body = json.loads(err.body)
    except ValueError:
        return str(err.body)
    return str(body.get("message", err.body))


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """What an apply of ``obj``'s spec and metadata can change, to compare a live object
    with a dry-run re-apply: without the status and the status writers' managedFields
    entries (a controller such as the ValidatingAdmissionPolicy type checker writes them on
    its own schedule, and with them the resourceVersion), and without the managedFields'
    order and timestamps. When a status writer has written after our apply, the API server
    moves our entry and stamps it anew on an identical re-apply (kubectl shows the same);
    the fields each manager owns are still compared."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (out.get("metadata") or {}).items() if k != "resourceVersion"}
    fields = [
        {k: v for k, v in f.items() if k != "time"}
        for f in meta.get("managedFields") or []
        if f.get("subresource") != "status"
    ]
    if fields:
        meta["managedFields"] = sorted(
            fields, key=lambda f: (str(f.get("manager")), str(f.get("operation")))
        )
    out["metadata"] = meta
    return out


def diff_paths(before: Any, after: Any, path: str = "") -> Iterator[str]:
    """Every path where ``after`` differs from ``before``, with both values."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in before:
                yield f"{sub}: added {after[key]!r}"
            elif key not in after:
                yield f"{sub}: removed {before[key]!r}"
            else:
                yield from diff_paths(before[key], after[key], sub)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (b, a) in enumerate(zip(before, after, strict=True)):
            yield from diff_paths(b, a, f"{path}[{index}]")
    elif before != after:
        yield f"{path}: {before!r} -> {after!r}"


def missing_paths(wanted: Any, stored: Any, path: str = "") -> Iterator[str]:
    """Every path of ``wanted`` that ``stored`` lacks or holds with another value.

    Used to prove the API server kept every field it was sent (structural schemas prune
    unknown fields silently).
    """
    if isinstance(wanted, dict):
        if not isinstance(stored, dict):
            yield f"{path}: expected an object, stored {stored!r}"
            return
        for key, value in wanted.items():
            sub = f"{path}.{key}" if path else str(key)
            if key not in stored:
                yield f"{sub}: sent {value!r}, not stored (pruned?)"
            else:
                yield from missing_paths(value, stored[key], sub)
    elif isinstance(wanted, list):
        if not isinstance(stored, list) or len(stored) != len(wanted):
            yield f"{path}: sent {wanted!r}, stored {stored!r}"
            return
        for index, (w, s) in enumerate(zip(wanted, stored, strict=True)):
            yield from missing_paths(w, s, f"{path}[{index}]")
    elif wanted != stored and not _same_quantity(wanted, stored):
        yield f"{path}: sent {wanted!r}, stored {stored!r}"


def _same_quantity(wanted: Any, stored: Any) -> bool:
    # The API server canonicalizes quantities in built-in types ("1000m" -> "1").
    return isinstance(wanted, int | str) and isinstance(stored, str) and str(wanted) == stored


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The condition of type ``kind`` in ``obj['status']['conditions']``, if any."""
    if not obj:
        return None
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            found: dict[str, Any] = cond
            return found
    return None


def pod_dict(dyn: DynamicClient, namespace: str, name: str) -> dict[str, Any]:
    """A pod as plain camelCase JSON (what the API served), for readable assertions."""
    return read(dyn, "v1", "Pod", name, namespace)


def exists(
    dyn: DynamicClient, api_version: str, kind: str, name: str, namespace: str | None = None
) -> bool:
    try:
        read(dyn, api_version, kind, name, namespace)
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


def wait_for_established(dyn: DynamicClient, crd_name: str, *, why: str = "") -> dict[str, Any]:
    """Wait until CRD ``crd_name`` is Established (its kind is served); return it."""
    return wait_for(
        lambda: read(dyn, "apiextensions.k8s.io/v1", "CustomResourceDefinition", crd_name),
        lambda live: (condition(live, "Established") or {}).get("status") == "True",
        what=f"CRD {crd_name} to be Established{why}",
    )


def install_crds(dyn: DynamicClient) -> list[dict[str, Any]]:
    """kubetrain's CRDs (the Kubeflow v1 kinds and Trainer v2's, ``all_crds``) applied
    server-side, then each waited for until Established; returns them. The one helper
    every control plane's CRD install goes through."""
    from kubetrain.api.crds import all_crds

    crds = all_crds()
    for crd in crds:
        apply(dyn, crd)
    for crd in crds:
        wait_for_established(dyn, crd["metadata"]["name"])
    return crds


def wait_until_gone(
    dyn: DynamicClient, obj: dict[str, Any], namespace: str | None, *, timeout: float = 120.0
) -> None:
    """Wait until ``obj`` (deleted) no longer exists."""
    name = obj["metadata"]["name"]
    wait_for(
        lambda: exists(dyn, obj["apiVersion"], obj["kind"], name, namespace),
        lambda found: not found,
        what=f"{obj['kind']}/{name} to be deleted",
        timeout=timeout,
    )


def remove_applied(dyn: DynamicClient, objects: list[dict[str, Any]]) -> None:
    """Delete what a fixture applied (last first, as a chart is uninstalled) and wait until
    it is gone: a Namespace it created, left behind, would stop a later test's chart from
    installing one of the same name."""
    for obj in reversed(objects):
        namespace = obj["metadata"].get("namespace")
        try:
            resource_for(dyn, obj).delete(name=obj["metadata"]["name"], namespace=namespace)
        except ApiException as err:
            if err.status != 404:
                raise
    for obj in objects:
        wait_until_gone(dyn, obj, obj["metadata"].get("namespace"))


def listening_addresses(pids: set[int]) -> set[str]:
    """Local addresses of TCP sockets in LISTEN state owned by ``pids`` (from /proc)."""
    inodes: set[str] = set()
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    addresses: set[str] = set()
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        with open(table, encoding="ascii") as handle:
            next(handle)
            for line in handle:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state != "0A" or inode not in inodes:
                    continue
                raw = bytes.fromhex(local.split(":")[0])
                # /proc prints addresses as 32-bit words in host (little-endian) order.
                words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]
                addresses.add(str(ipaddress.ip_address(b"".join(words)[:width])))
    return addresses
