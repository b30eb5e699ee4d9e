"""The ``operator`` chart: the TrainingOperator and its RBAC."""

from __future__ import annotations

import cdk8s
import constructs

from kubetrain.constructs.objects import construct_errors
from kubetrain.constructs.operator import TrainingOperator, TrainingOperatorProps


class OperatorChart(cdk8s.Chart):
    def __init__(self, scope: constructs.Construct, id: str, props: TrainingOperatorProps) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        with construct_errors(self, "Operator"):
            self.operator = TrainingOperator(self, "Operator", props)
