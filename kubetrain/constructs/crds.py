"""``KubeflowCrds``: the PyTorchJob, TFJob and MPIJob CRDs generated from ``kubetrain.api``."""

from __future__ import annotations

from typing import Any

import cdk8s
import constructs

from kubetrain.api.crds import CRD_INFOS, generate_crd


def api_object(scope: constructs.Construct, id: str, obj: dict[str, Any]) -> cdk8s.ApiObject:
    """An ``ApiObject`` carrying a complete manifest dict.

    cdk8s' Python ``ApiObject`` takes no ``spec``; every top-level field other than
    apiVersion/kind/metadata is added as a JSON patch, which cdk8s applies at
    serialization, so nothing is dropped.
    """
    meta = obj.get("metadata", {})
    resource = cdk8s.ApiObject(
        scope,
        id,
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        metadata=cdk8s.ApiObjectMetadata(
            name=meta.get("name"),
            namespace=meta.get("namespace"),
            labels=meta.get("labels"),
            annotations=meta.get("annotations"),
        ),
    )
    for key, value in obj.items():
        if key not in ("apiVersion", "kind", "metadata"):
            resource.add_json_patch(cdk8s.JsonPatch.add(f"/{key}", value))
    return resource


class KubeflowCrds(constructs.Construct):
    """The CRDs of the enabled job kinds (all three by default).

    Child ids are the kinds (``PyTorchJob``, ``TFJob``, ``MPIJob``); object names are the
    CRD names (``pytorchjobs.kubeflow.org``).
    """

    def __init__(
        self, scope: constructs.Construct, id: str, *, kinds: tuple[str, ...] | None = None
    ) -> None:
        super().__init__(scope, id)
        known = {str(info.model.model_fields["kind"].default): info for info in CRD_INFOS}
        wanted = kinds if kinds is not None else tuple(known)
        unknown = [k for k in wanted if k not in known]
        if unknown:
            raise ValueError(
                f"kinds ({', '.join(unknown)}) not supported: use any of {', '.join(known)}"
            )
        if not wanted:
            raise ValueError("kinds (empty) must name at least one job kind")
        for kind in wanted:
            api_object(self, kind, generate_crd(known[kind]))
