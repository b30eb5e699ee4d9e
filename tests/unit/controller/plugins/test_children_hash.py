"""The spec hash of a desired child: stable, blind to its own annotation, and computed
without touching the child."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from kubetrain.api import keys as K
from kubetrain.controller.plugins.children import spec_hash, with_hash


def child() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "job-worker-0", "annotations": {"a": "1"}, "labels": {"l": "x"}},
        "spec": {"containers": [{"name": "pytorch", "env": [{"name": "RANK", "value": "1"}]}]},
    }


def test_the_hash_is_sha256_of_the_sorted_compact_json_without_its_annotation() -> None:
    obj = child()
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    assert spec_hash(obj) == hashlib.sha256(text.encode()).hexdigest()[:16]
    stamped = with_hash(copy.deepcopy(obj))
    assert stamped["metadata"]["annotations"][K.SPEC_HASH_ANNOTATION] == spec_hash(obj)
    assert spec_hash(stamped) == spec_hash(obj)


def test_hashing_leaves_the_child_as_it_was() -> None:
    obj = with_hash(child())
    before = copy.deepcopy(obj)
    spec_hash(obj)
    assert obj == before


def test_a_child_whose_only_annotation_is_the_hash_hashes_with_empty_annotations() -> None:
    obj = child()
    obj["metadata"]["annotations"] = {K.SPEC_HASH_ANNOTATION: "0123"}
    bare = child()
    bare["metadata"]["annotations"] = {}
    assert spec_hash(obj) == spec_hash(bare)
    assert spec_hash(bare) != spec_hash(child())
