"""``HorovodSample``: the Horovod sample trainer as an MPIJob (launcher runs mpirun)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import constructs

from kubetrain import __version__
from kubetrain.constructs.job_common import NcclProfileLike, NodePoolLike, Placement
from kubetrain.constructs.mpi_job import MPIJob, MPIJobProps
from kubetrain.constructs.samples.scaling import LR_ANNOTATION, LinearScaling
from kubetrain.constructs.types import Image, Resources


def default_image() -> Image:
    return Image(f"ghcr.io/kubetrain/horovod-trainer:{__version__}")


@dataclass(frozen=True, kw_only=True)
class HorovodSampleProps:
    """Props of :class:`HorovodSample`."""

    workers: int = 2
    """Worker pods."""
    gpus_per_node: int = 0
    """GPUs (and MPI slots) per worker. 0: one CPU rank per worker."""
    image: Image = field(default_factory=default_image)
    """Trainer image (OpenMPI, sshd, Horovod). Default: kubetrain's of this version."""
    scaling: LinearScaling = field(default_factory=LinearScaling)
    """Learning rate, batch and steps; the rate is scaled by the number of ranks."""
    name: str | None = None
    """Job name. Default: the construct id, lowercased."""
    namespace: str = "default"
    """Namespace of the job."""
    profile: NcclProfileLike | None = None
    """NCCL profile. Default: none, or the node pool's."""
    node_pool: NodePoolLike | None = None
    """GPU node pool to run on. Default: none."""
    placement: Placement = Placement.ANY
    """Same-block placement of the workers."""
    resources: Resources = field(default_factory=Resources)
    """CPU/memory per worker."""


class HorovodSample(constructs.Construct):
    """An MPIJob running ``images/horovod/train.py`` on every rank, as the classic
    tensorflow-benchmarks MPIJob does with its benchmark."""

    def __init__(self, scope: constructs.Construct, id: str, props: HorovodSampleProps) -> None:
        super().__init__(scope, id)
        job_props = MPIJobProps(
            image=props.image,
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
