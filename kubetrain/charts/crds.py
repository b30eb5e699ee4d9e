"""The ``crds`` chart: one deployable unit holding the job CRDs."""

from __future__ import annotations

import cdk8s
import constructs

from kubetrain.constructs.crds import KubeflowCrds, KubeflowCrdsProps


class CrdsChart(cdk8s.Chart):
    def __init__(
        self, scope: constructs.Construct, id: str, props: KubeflowCrdsProps | None = None
    ) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        KubeflowCrds(self, "Crds", props)
