"""Props every sample job shares."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubetrain import __version__
from kubetrain.constructs.job_common import NcclProfileLike, NodePoolLike, Placement
from kubetrain.constructs.samples.scaling import LinearScaling
from kubetrain.constructs.types import Image, Resources


def sample_image(trainer: str) -> Image:
    """kubetrain's image for a sample trainer, at this version."""
    return Image(f"ghcr.io/kubetrain/{trainer}-trainer:{__version__}")


@dataclass(frozen=True, kw_only=True)
class SampleProps:
    """What every sample takes besides its size."""

    gpus_per_node: int = 0
    """GPUs (and processes or MPI slots) per pod. 0: one CPU process per pod (gloo)."""
    image: Image | None = None
    """Trainer image. Default: kubetrain's image for this sample, at this version."""
    scaling: LinearScaling = field(default_factory=LinearScaling)
    """Learning rate, batch and steps; the rate is scaled by the world size."""
    name: str | None = None
    """Job name. Default: the construct id, lowercased."""
    namespace: str = "default"
    """Namespace of the job."""
    profile: NcclProfileLike | None = None
    """NCCL profile. Default: none, or the node pool's."""
    node_pool: NodePoolLike | None = None
    """GPU node pool to run on. Default: none."""
    placement: Placement = Placement.ANY
    """Same-block placement of the pods."""
    resources: Resources = field(default_factory=Resources)
    """CPU/memory per pod."""

    def __post_init__(self) -> None:
        if self.gpus_per_node < 0:
            raise ValueError(f"gpus_per_node ({self.gpus_per_node}) must be >= 0")
