"""The ``samples`` chart: sample training jobs, optionally bound to a GPU node pool."""

from __future__ import annotations

import dataclasses

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
        if samples.pytorch is not None:
            props = samples.pytorch
            if node_pool is not None:
                props = dataclasses.replace(props, node_pool=node_pool)
            with construct_errors(self, "pytorch-ddp"):
                PyTorchDdpSample(self, "pytorch-ddp", props)
        if samples.horovod is not None:
            hprops = samples.horovod
            if node_pool is not None:
                hprops = dataclasses.replace(hprops, node_pool=node_pool)
            with construct_errors(self, "horovod"):
                HorovodSample(self, "horovod", hprops)
        if samples.tensorflow is not None:
            tprops = samples.tensorflow
            if node_pool is not None:
                tprops = dataclasses.replace(tprops, node_pool=node_pool)
            with construct_errors(self, "tensorflow-mwms"):
                TensorFlowMwmsSample(self, "tensorflow-mwms", tprops)
