"""runtimePatches[].time, stamped as Trainer v2.3.0's TrainJob webhook stamps them: the
two RuntimePatches specs of upstream's e2e suite, step by step, on the pure rule and on
the JSON patch the operator sends."""

from __future__ import annotations

import copy
import json
from typing import Any

from kubetrain.api.trainer.patch_times import RECORD_ANNOTATION, json_patch, read_record, stamp

USER_TIME = "2026-11-27T07:00:00Z"
LATER_USER_TIME = "2026-11-27T07:30:00Z"
T1 = "2026-11-27T08:00:00Z"
T2 = "2026-11-27T08:00:01Z"


def _patch(manager: str, sa: str | None = None, time: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"manager": manager}
    if sa is not None:
        pod = {"spec": {"template": {"spec": {"serviceAccountName": sa}}}}
        out["trainingRuntimeSpec"] = {
            "template": {"spec": {"replicatedJobs": [{"name": "node", "template": pod}]}}
        }
    if time is not None:
        out["time"] = time
    return out


def _trainjob(
    patches: list[dict[str, Any]], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "e2e", "namespace": "ns", "resourceVersion": "7"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"runtimePatches": patches}}


def _apply(job: dict[str, Any], ops: list[dict[str, Any]] | None) -> dict[str, Any]:
    """What the API server makes of the operator's JSON patch (test, add, replace)."""
    out = copy.deepcopy(job)
    for op in ops or []:
        *parents, last = [p.replace("~1", "/") for p in op["path"].split("/")[1:]]
        target = out
        for part in parents:
            target = target[part]
        if op["op"] == "test":
            assert target[last] == op["value"], f"test {op['path']} failed"
        else:
            target[last] = copy.deepcopy(op["value"])
    return out


def _times(job: dict[str, Any]) -> list[str | None]:
    return [p.get("time") for p in job["spec"]["runtimePatches"]]


def test_on_create_a_given_time_is_kept_and_a_missing_one_stamped() -> None:
    """e2e: "should preserve user-provided manager fields"."""
    job = _trainjob(
        [
            _patch("test.io/manager-one", "test-sa-1", USER_TIME),
            _patch("kueue.k8s.io/manager", "sa"),
        ]
    )
    after = _apply(job, json_patch(job, T1))
    assert _times(after) == [USER_TIME, T1]
    assert [p["manager"] for p in after["spec"]["runtimePatches"]] == [
        "test.io/manager-one",
        "kueue.k8s.io/manager",
    ]
    record = read_record(after["metadata"]["annotations"])
    assert record is not None and set(record) == {"test.io/manager-one", "kueue.k8s.io/manager"}
    # Nothing left to write: seen again (even much later), it is left as it is.
    assert json_patch(after, T2) is None


def test_on_update_only_changed_and_new_patches_are_stamped() -> None:
    """e2e: "should update Time only for the changed patch on update"."""
    job = _trainjob(
        [_patch("test.io/unchanged", "keep"), _patch("test.io/will-change", "old", USER_TIME)]
    )
    created = _apply(job, json_patch(job, T1))
    assert _times(created) == [T1, USER_TIME]
    # The user changes the second patch and adds two: one without a time, one with.
    updated = copy.deepcopy(created)
    patches = updated["spec"]["runtimePatches"]
    patches[1]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"] = {
        "spec": {"template": {"spec": {"serviceAccountName": "new"}}}
    }
    patches += [
        _patch("test.io/new-no-time"),
        _patch("test.io/new-with-time", time=LATER_USER_TIME),
    ]
    after = _apply(updated, json_patch(updated, T2))
    assert _times(after) == [T1, T2, T2, LATER_USER_TIME]
    assert json_patch(after, "2026-11-27T09:00:00Z") is None


def test_a_time_changed_by_hand_on_an_unchanged_patch_is_put_back() -> None:
    """The webhook keeps the old object's time for an unchanged patch, whatever the update
    says."""
    job = _trainjob([_patch("a.io/m", "sa")])
    created = _apply(job, json_patch(job, T1))
    edited = copy.deepcopy(created)
    edited["spec"]["runtimePatches"][0]["time"] = USER_TIME
    assert _times(_apply(edited, json_patch(edited, T2))) == [T1]
    # Removed by hand: put back too.
    edited["spec"]["runtimePatches"][0].pop("time")
    assert _times(_apply(edited, json_patch(edited, T2))) == [T1]


def test_the_patch_is_conditional_and_names_the_annotation_escaped() -> None:
    job = _trainjob([_patch("a.io/m")], annotations={"team": "a"})
    ops = json_patch(job, T1)
    assert ops is not None
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    assert {
        "op": "replace",
        "path": "/spec/runtimePatches",
        "value": [_patch("a.io/m", time=T1)],
    } in ops
    assert ops[-1]["path"] == "/metadata/annotations/kubetrain.dev~1runtime-patch-times"
    (entry,) = json.loads(ops[-1]["value"]).values()
    assert entry[1] == T1 and len(entry[0]) == 16  # the content's digest, and its time
    # Without annotations, the map is made first (a JSON patch cannot add into nothing).
    bare = _trainjob([_patch("a.io/m")])
    bare_ops = json_patch(bare, T1)
    assert bare_ops is not None
    assert {"op": "add", "path": "/metadata/annotations", "value": {}} in bare_ops
    assert _apply(bare, bare_ops)["metadata"]["annotations"][RECORD_ANNOTATION]


def test_a_trainjob_without_patches_is_not_written() -> None:
    assert json_patch(_trainjob([]), T1) is None
    assert json_patch({"metadata": {"name": "x"}, "spec": {}}, T1) is None


def test_a_record_that_is_not_the_operators_reads_as_none() -> None:
    for text in ("not json", "[1, 2]", '{"m": "x"}', '{"m": [1, 2]}'):
        found = read_record({RECORD_ANNOTATION: text})
        assert not found, text
    # Then every patch is new: a given time is kept.
    job = _trainjob([_patch("a.io/m", time=USER_TIME)], annotations={RECORD_ANNOTATION: "junk"})
    assert _times(_apply(job, json_patch(job, T1))) == [USER_TIME]


def test_stamp_leaves_its_input_alone() -> None:
    patches = [_patch("a.io/m")]
    kept = copy.deepcopy(patches)
    result = stamp(patches, None, T1)
    assert patches == kept
    assert result.patches == [_patch("a.io/m", time=T1)]
