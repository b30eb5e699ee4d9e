"""``HeldApiObject`` (the CRDs' payload kept on the Python side) serializes exactly as an
``ApiObject`` built by ``api_object`` does, through every cdk8s path."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import cdk8s

from kubetrain.api.crds import all_crds
from kubetrain.constructs import KubeflowCrds
from kubetrain.constructs.objects import HeldApiObject, api_object, manifests
from kubetrain.manifest import parse_yaml_all


def _crd() -> dict[str, Any]:
    return all_crds()[0]


def _chart(tmp_path: Path) -> tuple[cdk8s.App, cdk8s.Chart]:
    app = cdk8s.App(outdir=str(tmp_path))
    return app, cdk8s.Chart(app, "c", labels={"team": "ml"}, namespace="training")


def test_same_object_as_through_patches(tmp_path: Path) -> None:
    _, chart = _chart(tmp_path)
    held = HeldApiObject(chart, "held", _crd())
    patched = api_object(chart, "patched", _crd())
    assert held.to_json() == patched.to_json()
    assert held.to_json()["spec"] == _crd()["spec"]
    assert held.to_json()["metadata"]["labels"]["team"] == "ml"


def test_node_side_synth_writes_the_whole_object(tmp_path: Path) -> None:
    app, chart = _chart(tmp_path)
    HeldApiObject(chart, "held", _crd())
    app.synth()
    (written,) = parse_yaml_all((tmp_path / "c.k8s.yaml").read_text())
    assert written["spec"] == _crd()["spec"]
    assert chart.to_json()[0]["spec"] == _crd()["spec"]


def test_metadata_and_patches_added_later_apply(tmp_path: Path) -> None:
    _, chart = _chart(tmp_path)
    held = HeldApiObject(chart, "held", _crd())
    held.metadata.add_annotation("argocd.argoproj.io/sync-wave", "0")
    held.add_json_patch(cdk8s.JsonPatch.replace("/spec/scope", "Cluster"))
    out = held.to_json()
    assert out["metadata"]["annotations"] == {"argocd.argoproj.io/sync-wave": "0"}
    assert out["spec"]["scope"] == "Cluster"
    assert _crd()["spec"]["scope"] == "Namespaced"


def test_what_to_json_returns_is_a_copy(tmp_path: Path) -> None:
    _, chart = _chart(tmp_path)
    crd = _crd()
    held = HeldApiObject(chart, "held", crd)
    expected = copy.deepcopy(crd["spec"])
    held.to_json()["spec"]["names"]["kind"] = "Changed"
    crd["spec"]["group"] = "changed.example.com"
    assert held.to_json()["spec"] == expected


def test_the_crds_construct_holds_its_schemas(tmp_path: Path) -> None:
    _, chart = _chart(tmp_path)
    crds = KubeflowCrds(chart, "crds")
    held = [c for c in crds.node.children if isinstance(c, HeldApiObject)]
    assert len(held) == len(crds.node.children) > 0
    assert all(m["spec"]["versions"] for m in manifests(crds))


def test_metadata_beyond_cdk8s_props_is_kept(tmp_path: Path) -> None:
    app, chart = _chart(tmp_path)
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "finalizers": ["example.com/keep"]},
        "data": {"a": "b"},
    }
    held = HeldApiObject(chart, "held", cm)
    assert held.to_json()["metadata"]["finalizers"] == ["example.com/keep"]
    assert held.to_json()["metadata"]["name"] == "x"
    app.synth()
    (written,) = parse_yaml_all((tmp_path / "c.k8s.yaml").read_text())
    assert written["metadata"]["finalizers"] == ["example.com/keep"]
