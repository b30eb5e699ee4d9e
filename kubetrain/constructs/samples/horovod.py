"""``HorovodSample``: the Horovod sample trainer as an MPIJob (launcher runs mpirun)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import constructs

from kubetrain.constructs.mpi_job import MPIJob, MPIJobProps
from kubetrain.constructs.samples.common import SampleProps, sample_image
from kubetrain.constructs.samples.scaling import LR_ANNOTATION


@dataclass(frozen=True, kw_only=True)
class HorovodSampleProps(SampleProps):
    """Props of :class:`HorovodSample` (GPUs per worker are its MPI slots)."""

    workers: int = 2
    """Worker pods."""


class HorovodSample(constructs.Construct):
    """An MPIJob running ``images/horovod/train.py`` on every rank, as the classic
    tensorflow-benchmarks MPIJob does with its benchmark."""

    def __init__(self, scope: constructs.Construct, id: str, props: HorovodSampleProps) -> None:
        super().__init__(scope, id)
        job_props = MPIJobProps(
            image=props.image or sample_image("horovod"),
            command=("python", "-m", "images.horovod.train"),
            args=props.scaling.args(),
            name=props.name or id.lower(),
            namespace=props.namespace,
            workers=props.workers,
            gpus_per_node=props.gpus_per_node,
            profile=props.profile,
            node_pool=props.node_pool,
            placement=props.placement,
            resources=props.resources,
        )
        self.world_size = job_props.world_size
        job_props = dataclasses.replace(
            job_props, annotations={LR_ANNOTATION: props.scaling.describe(self.world_size)}
        )
        self.job = MPIJob(self, "Job", job_props)
