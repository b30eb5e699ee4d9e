"""``PyTorchJob``: a typed PyTorch DDP / torchrun job (kubeflow.org/v1 PyTorchJob)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import constructs

from kubetrain.api import ElasticPolicy
from kubetrain.api import PyTorchJob as PyTorchJobModel
from kubetrain.api.kinds import PYTORCH
from kubetrain.constructs.job_common import (
    JobProps,
    check_restart_policy,
    emit_job,
    job_name,
    metadata,
    pod_template,
    run_policy_wire,
)
from kubetrain.frameworks import pytorch


@dataclass(frozen=True, kw_only=True)
class PyTorchJobProps(JobProps):
    """Props of :class:`PyTorchJob`. One process per GPU unless ``nproc_per_node`` says
    otherwise; ``WORLD_SIZE`` = (master + workers) x processes per node."""

    workers: int = 1
    """Worker replicas."""
    master: bool = True
    """Run a Master replica (rank 0, the rendezvous point). Elastic jobs usually don't."""
    nproc_per_node: int | None = None
    """Processes per pod. Default: ``gpus_per_node`` when GPUs are used, else 1."""
    elastic: ElasticPolicy | None = None
    """torchrun elastic policy (min/max nodes, rendezvous). Default: not elastic."""
    restart_policy: str = "OnFailure"
    """Restart policy of every replica: OnFailure, Always, Never or ExitCode."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.workers < 0:
            raise ValueError(f"workers ({self.workers}) must be >= 0")
        if not self.master and self.workers == 0:
            raise ValueError(
                "workers (0) must be >= 1 when master is False: the job needs a replica"
            )
        if self.elastic is not None and self.workers < 1:
            raise ValueError(f"workers ({self.workers}) must be >= 1 for an elastic job")
        if self.nproc_per_node is not None:
            if self.nproc_per_node < 1:
                raise ValueError(f"nproc_per_node ({self.nproc_per_node}) must be >= 1")
            if self.gpus and self.nproc_per_node != self.gpus:
                raise ValueError(
                    f"nproc_per_node ({self.nproc_per_node}) must equal gpus_per_node "
                    f"({self.gpus}): NCCL runs one process per GPU; drop nproc_per_node or "
                    f"set it to {self.gpus}"
                )
        check_restart_policy(self.restart_policy)

    @property
    def processes_per_node(self) -> int:
        if self.nproc_per_node is not None:
            return self.nproc_per_node
        return self.gpus or 1

    @property
    def nodes(self) -> int:
        return self.workers + (1 if self.master else 0)

    @property
    def world_size(self) -> int:
        """Processes in the job (the PyTorch framework's rule)."""
        return pytorch.world_size_of(self.nodes, self.processes_per_node)


class PyTorchJob(constructs.Construct):
    """A PyTorchJob with a Master (optional) and Workers; child id ``Resource``."""

    def __init__(self, scope: constructs.Construct, id: str, props: PyTorchJobProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.name = job_name(props, id)
        replica_specs: dict[str, Any] = {}
        if props.master:
            replica_specs["Master"] = self._replica("Master", 1)
        if props.workers:
            replica_specs["Worker"] = self._replica("Worker", props.workers)
        spec: dict[str, Any] = {
            "nprocPerNode": str(props.processes_per_node),
            "pytorchReplicaSpecs": replica_specs,
        }
        if props.elastic is not None:
            spec["elasticPolicy"] = props.elastic.to_wire()
        if props.run_policy is not None:
            spec["runPolicy"] = run_policy_wire(props)
        manifest = {
            "apiVersion": PYTORCH.api_version,
            "kind": PYTORCH.kind,
            "metadata": metadata(props, self.name),
            "spec": spec,
        }
        job = emit_job(self, manifest)
        assert isinstance(job, PyTorchJobModel)
        self.job = job

    @property
    def world_size(self) -> int:
        """Processes in the job, as the operator counts them for ``WORLD_SIZE``."""
        return pytorch.world_size(self.job)

    def _replica(self, replica_type: str, replicas: int) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "restartPolicy": self.props.restart_policy,
            "template": pod_template(
                self.props, name=self.name, replica_type=replica_type, container="pytorch"
            ),
        }
