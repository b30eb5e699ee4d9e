"""The ``samples`` chart: sample training jobs, optionally bound to a GPU node pool."""

from __future__ import annotations

import dataclasses
from typing import Any

import cdk8s
import constructs

from kubetrain.constructs.job_common import NodePoolLike
from kubetrain.constructs.objects import construct_errors
from kubetrain.constructs.samples import HorovodSample, PyTorchDdpSample, TensorFlowMwmsSample
from kubetrain.gitops.stack import Samples


class SamplesChart(cdk8s.Chart):
    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        samples: Samples,
        *,
        node_pool: NodePoolLike | None = None,
    ) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        builders: list[tuple[str, Any, Any]] = [
            ("pytorch-ddp", PyTorchDdpSample, samples.pytorch),
            ("horovod", HorovodSample, samples.horovod),
            ("tensorflow-mwms", TensorFlowMwmsSample, samples.tensorflow),
        ]
        for sample_id, construct, props in builders:
            if props is None:
                continue
            if node_pool is not None:
                props = dataclasses.replace(props, node_pool=node_pool)
            with construct_errors(self, sample_id):
                construct(self, sample_id, props)
