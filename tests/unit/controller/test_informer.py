"""Informer behaviour on a scripted list/watch: resume from the last resourceVersion,
re-list on 410 Gone with only the differences reported, write-through, trimming."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kubetrain.controller.errors import ApiError
from kubetrain.controller.informer import Informer, is_older, scoped
from kubetrain.controller.kube import PODS, Resource, WatchEvent
from kubetrain.controller.trim import trim_metadata_only, trim_pod


def obj(name: str, rv: str, uid: str | None = None, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid or f"uid-{name}",
            "resourceVersion": rv,
            "labels": labels,
        }
    }


class Script:
    """Answers list and watch calls from a script; the last watch stops the informer."""

    def __init__(
        self,
        lists: list[tuple[list[dict[str, Any]], str]],
        watches: list[list[WatchEvent] | ApiError],
    ) -> None:
        self.lists = lists
        self.watches = watches
        self.watched_from: list[str] = []
        self.field_selectors: list[str | None] = []
        self.informer: Informer | None = None

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> tuple[list[dict[str, Any]], str]:
        self.field_selectors.append(field_selector)
        return self.lists.pop(0)

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
        self.watched_from.append(resource_version)
        self.field_selectors.append(field_selector)
        if not self.watches:
            assert self.informer is not None
            self.informer.stop()
            return
        step = self.watches.pop(0)
        if isinstance(step, ApiError):
            raise step
        yield from step


def run(script: Script, **kwargs: Any) -> tuple[Informer, list[tuple[str, str]]]:
    seen: list[tuple[str, str]] = []
    informer = Informer(
        script,
        PODS,
        namespace="ns",
        handler=lambda kind, o: seen.append((kind, o["metadata"]["name"])),
        **kwargs,
    )
    script.informer = informer
    informer.run()
    return informer, seen


def test_resumes_from_the_last_version_and_relists_on_410() -> None:
    script = Script(
        lists=[
            ([obj("a", "1"), obj("b", "2")], "2"),
            ([obj("a", "5", v="2"), obj("c", "11")], "12"),
        ],
        watches=[
            [WatchEvent("MODIFIED", obj("a", "5", v="2")), WatchEvent("BOOKMARK", obj("", "9"))],
            [WatchEvent("ERROR", {"code": 410, "reason": "Expired", "message": "too old"})],
        ],
    )
    informer, seen = run(script)
    assert script.watched_from == ["2", "9", "12"]
    # After the re-list: b is reported gone, c new, a unchanged is not reported again.
    assert seen == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("MODIFIED", "a"),
        ("DELETED", "b"),
        ("ADDED", "c"),
    ]
    assert sorted(o["metadata"]["name"] for o in informer.items()) == ["a", "c"]
    assert informer.relists == 2 and informer.synced.is_set()


def test_a_broken_watch_resumes_without_a_relist() -> None:
    script = Script(
        lists=[([obj("a", "1")], "1")],
        watches=[
            [WatchEvent("ADDED", obj("b", "3"))],
            ApiError(0, "ProtocolError", "connection reset", "WATCH"),
            [WatchEvent("DELETED", obj("a", "4"))],
        ],
    )
    informer, seen = run(script)
    assert script.watched_from[:3] == ["1", "3", "3"]
    assert informer.relists == 1
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")]


def test_write_through_suppresses_the_echo_and_ignores_older_events() -> None:
    script = Script(
        lists=[([obj("a", "1")], "1")],
        watches=[
            [
                WatchEvent("MODIFIED", obj("a", "10")),  # the echo of our write
                WatchEvent("MODIFIED", obj("a", "8")),  # older than what we wrote
                WatchEvent("MODIFIED", obj("a", "11", v="2")),  # someone else's change
            ]
        ],
    )
    seen: list[tuple[str, str]] = []
    informer = Informer(script, PODS)

    def handler(kind: str, o: dict[str, Any]) -> None:
        seen.append((kind, o["metadata"]["resourceVersion"]))
        if o["metadata"]["resourceVersion"] == "1":
            informer.upsert(obj("a", "10"))  # our write, answered with version 10

    informer.handler = handler
    script.informer = informer
    informer.run()
    assert seen == [("ADDED", "1"), ("MODIFIED", "11")]
    current = informer.get("ns", "a")
    assert current is not None and current["metadata"]["resourceVersion"] == "11"


def test_the_echo_of_our_write_reaches_the_echo_handler_only() -> None:
    """The stall of the startup gate: the Service a job waits for was created by its own
    reconcile (write-through), so the watch event carries a version the cache holds. The
    ordinary handler must not fire for it (no spurious reconcile), but the echo handler
    must, so whoever waits for that object is woken."""
    script = Script(
        lists=[([obj("pod", "1")], "1")],
        watches=[
            [WatchEvent("ADDED", obj("svc", "10")), WatchEvent("MODIFIED", obj("svc", "12", v="2"))]
        ],
    )
    seen: list[tuple[str, str]] = []
    echoes: list[tuple[str, str]] = []

    def handler(kind: str, o: dict[str, Any]) -> None:
        seen.append((kind, o["metadata"]["name"]))
        if o["metadata"]["name"] == "pod":
            informer.upsert(obj("svc", "10"))  # our create, answered with version 10

    informer = Informer(
        script,
        PODS,
        field_selector="metadata.namespace!=kube-system",
        handler=handler,
        echo_handler=lambda kind, o: echoes.append((kind, o["metadata"]["resourceVersion"])),
    )
    script.informer = informer
    informer.run()
    assert echoes == [("ADDED", "10")]
    assert seen == [("ADDED", "pod"), ("MODIFIED", "svc")]
    assert set(script.field_selectors) == {"metadata.namespace!=kube-system"}


def test_a_version_the_transform_makes_identical_is_cached_but_not_reported() -> None:
    """kwok and the kubelet rewrite condition timestamps the pod cache drops: such a
    version changes nothing the operator reads, so it wakes no job (only whoever waits
    for that object, through the echo handler); the cache still takes its version."""
    running = _pod_status("Running", "2026-11-26T10:00:00Z")
    script = Script(
        lists=[([running], "1")],
        watches=[
            [
                WatchEvent("MODIFIED", _pod_status("Running", "2026-11-26T10:00:05Z", rv="2")),
                WatchEvent("MODIFIED", _pod_status("Succeeded", "2026-11-26T10:00:09Z", rv="3")),
            ]
        ],
    )
    echoes: list[str] = []
    informer, seen = run(
        script, transform=trim_pod, echo_handler=lambda _k, o: echoes.append(_rv_of(o))
    )
    assert seen == [("ADDED", "p"), ("MODIFIED", "p")]
    assert echoes == ["2"]
    current = informer.get("ns", "p")
    assert current is not None and current["status"]["phase"] == "Succeeded"


def _pod_status(phase: str, stamp: str, rv: str = "1") -> dict[str, Any]:
    pod = obj("p", rv)
    pod["status"] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": stamp}],
    }
    return pod


def _rv_of(o: dict[str, Any]) -> str:
    return str(o["metadata"]["resourceVersion"])


def test_mark_deleted_shows_the_object_as_being_deleted() -> None:
    informer = Informer(Script([], []), PODS)
    informer.upsert(obj("a", "1"))
    informer.mark_deleted("ns", "a", uid="another-uid")
    assert "deletionTimestamp" not in informer.get("ns", "a")["metadata"]  # type: ignore[index]
    informer.mark_deleted("ns", "a", uid="uid-a")
    assert informer.get("ns", "a")["metadata"]["deletionTimestamp"]  # type: ignore[index]


def test_the_index_follows_label_changes() -> None:
    informer = Informer(
        Script([], []), PODS, index=lambda o: (o["metadata"].get("labels") or {}).get("job")
    )
    informer.upsert(obj("a", "1", job="one"))
    informer.upsert(obj("b", "1", job="one"))
    informer.upsert(obj("a", "2", job="two"))
    assert [o["metadata"]["name"] for o in informer.by_index("one")] == ["b"]
    assert [o["metadata"]["name"] for o in informer.by_index("two")] == ["a"]


def test_trimming_keeps_what_the_policies_read_and_drops_the_rest() -> None:
    full = obj("p", "1")
    full["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    full["metadata"]["annotations"] = {"kubetrain.dev/spec-hash": "abc", "note": "x" * 1000}
    full["spec"] = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
    full["status"] = {
        "phase": "Failed",
        "hostIP": "10.0.0.1",
        "containerStatuses": [
            {
                "name": "c",
                "restartCount": 0,
                "image": "i",
                "state": {"terminated": {"exitCode": 137}},
            }
        ],
    }
    trimmed = trim_pod(full)
    assert trimmed["metadata"]["annotations"] == {"kubetrain.dev/spec-hash": "abc"}
    assert "managedFields" not in trimmed["metadata"]
    assert trimmed["spec"] == {"restartPolicy": "Never"}
    assert trimmed["status"]["containerStatuses"] == [
        {"name": "c", "restartCount": 0, "state": {"terminated": {"exitCode": 137}}}
    ]
    secret = {**obj("s", "1"), "data": {"ssh-privatekey": "c2VjcmV0"}}
    assert "data" not in trim_metadata_only(secret)


def test_pods_keep_the_conditions_the_policies_read_and_share_repeated_strings() -> None:
    def kwok_pod(name: str) -> dict[str, Any]:
        pod = obj(name, "1", **{"training.kubeflow.org/job-name": "".join(["j", "ob"])})
        pod["metadata"]["namespace"] = "".join(["team", "-a"])  # a new string each time
        pod["status"] = {
            "phase": "".join(["Run", "ning"]),
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": "2026-11-26T10:00:00Z"}
                for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady")
            ]
            + [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "c", "restartCount": 0, "lastState": {}}],
        }
        return pod

    a, b = trim_pod(kwok_pod("a")), trim_pod(kwok_pod("b"))
    assert [c["type"] for c in a["status"]["conditions"]] == ["Ready", "PodScheduled"]
    assert a["status"]["containerStatuses"] == [{"name": "c", "restartCount": 0}]
    # One copy of each repeated string across the cache's pods.
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["status"]["phase"] is b["status"]["phase"]
    label = "training.kubeflow.org/job-name"
    assert a["metadata"]["labels"][label] is b["metadata"]["labels"][label]


def test_resource_versions_compare_as_numbers() -> None:
    assert is_older("9", "10") and not is_older("10", "9")
    assert not is_older("abc", "10")


def test_an_empty_namespace_informer_is_the_one_a_write_goes_to() -> None:
    # An informer that holds nothing yet is still the namespace's: a lookup that skipped
    # it (an empty informer used to be falsy) dropped the write-through of the first
    # children created there, and the next reconcile created them again.
    own = Informer(Script([], []), PODS, namespace="ns")
    assert scoped({("Pod", "ns"): own}, "Pod", "ns") is own
    cluster_wide = Informer(Script([], []), PODS)
    assert scoped({("Pod", None): cluster_wide}, "Pod", "other") is cluster_wide
    assert scoped({("Pod", "ns"): own}, "Pod", "other") is None
    own.upsert(obj("a", "1"))
    assert own.get("ns", "a") is not None
