"""``KubeflowCrds``: the PyTorchJob, TFJob and MPIJob CRDs generated from ``kubetrain.api``."""

from __future__ import annotations

import constructs

from kubetrain.api.crds import CRD_INFOS, generate_crd
from kubetrain.constructs.objects import api_object


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
