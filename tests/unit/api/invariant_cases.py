"""One job per cross-field invariant that breaks it (and only the rules it must), shared by
the unit tests (``kubetrain validate``'s message) and the integration tests (the API
server's CEL message): both must say the same thing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubetrain.api.invariants import INVARIANTS
from kubetrain.api.kinds import REPLICA_FIELDS
from kubetrain.api.rules import ROOT, Rule
from tests.builders.jobs import (
    jax_job,
    mpi_job,
    paddle_job,
    pytorch_job,
    set_path,
    template,
    tf_job,
    xgboost_job,
)

INVARIANTS_BY_NAME = {invariant.name: invariant for invariant in INVARIANTS}


@dataclass(frozen=True)
class InvariantCase:
    """``job`` breaks ``invariant``; a rule on each replica spec fires on ``replica``."""

    invariant: str
    job: dict[str, Any]
    replica: str | None = None

    @property
    def rule(self) -> Rule:
        return INVARIANTS_BY_NAME[self.invariant]

    def server_field(self) -> str:
        """Where the API server reports the rule's failure."""
        rule = self.rule
        (kind,) = rule.kinds
        assert rule.field_path is not None, rule.name
        if rule.node != ROOT:
            return f"spec.{REPLICA_FIELDS[kind]}[{self.replica}]{rule.field_path}"
        return rule.field_path.lstrip(".")


PT = "spec.pytorchReplicaSpecs"
TF = "spec.tfReplicaSpecs"
MPI = "spec.mpiReplicaSpecs"
PADDLE = "spec.paddleReplicaSpecs"
JAX = "spec.jaxReplicaSpecs"
XGB = "spec.xgbReplicaSpecs"
LONG = "a" * 58


def _tf(**specs: Any) -> dict[str, Any]:
    job = tf_job()
    job["spec"]["tfReplicaSpecs"] = specs
    return job


def _mpi_specs(**specs: Any) -> dict[str, Any]:
    job = mpi_job()
    job["spec"]["mpiReplicaSpecs"] = specs
    return job


def _every_kind(prefix: str, job: dict[str, Any], field: str, worker: str) -> list[InvariantCase]:
    """Cases of the rules every kind has, on ``job``'s ``worker`` replica type."""
    path = f"{field}.{worker}"
    return [
        InvariantCase(
            f"{prefix}-replica-types", set_path(job, f"{field}.Sidecar", {"template": template()})
        ),
        InvariantCase(
            f"{prefix}-containers", set_path(job, f"{path}.template.spec.containers", []), worker
        ),
        InvariantCase(
            f"{prefix}-images",
            set_path(job, f"{path}.template.spec.containers[0].image", ""),
            worker,
        ),
        InvariantCase(
            f"{prefix}-managed-by", set_path(job, "spec.runPolicy", {"managedBy": "someone/else"})
        ),
        InvariantCase(
            f"{prefix}-replicas-per-type", set_path(job, f"{path}.replicas", 1001), worker
        ),
        InvariantCase(f"{prefix}-name-fits", set_path(job, "metadata.name", LONG)),
    ]


CASES: list[InvariantCase] = [
    # PyTorchJob
    InvariantCase("pytorch-one-master", set_path(pytorch_job(), f"{PT}.Master.replicas", 2)),
    InvariantCase(
        "pytorch-worker-at-least-one", set_path(pytorch_job(), f"{PT}.Worker.replicas", 0)
    ),
    InvariantCase(
        "pytorch-main-container",
        set_path(pytorch_job(), f"{PT}.Worker.template", template("trainer")),
        "Worker",
    ),
    InvariantCase(
        "pytorch-elastic-needs-worker",
        set_path(
            pytorch_job(elasticPolicy={"maxReplicas": 2}), PT, {"Master": {"template": template()}}
        ),
    ),
    InvariantCase(
        "pytorch-elastic-bounds", pytorch_job(elasticPolicy={"minReplicas": 4, "maxReplicas": 2})
    ),
    InvariantCase(
        "pytorch-nproc-once", pytorch_job(nprocPerNode="2", elasticPolicy={"nProcPerNode": 2})
    ),
    # 1 Master + 2,000 Workers: over both limits (a PyTorchJob cannot pass 2,000 pods with
    # at most 1,000 per replica type).
    InvariantCase("pytorch-pods-per-job", set_path(pytorch_job(), f"{PT}.Worker.replicas", 2000)),
    *_every_kind("pytorch", pytorch_job(), PT, "Worker"),
    # TFJob
    InvariantCase(
        "tf-replica-types-distinct",
        _tf(
            worker={"template": template("tensorflow")}, Worker={"template": template("tensorflow")}
        ),
    ),
    InvariantCase(
        "tf-main-container", set_path(tf_job(), f"{TF}.Worker.template", template()), "Worker"
    ),
    # Chief and a lower-case master count together.
    InvariantCase(
        "tf-one-chief",
        _tf(
            Chief={"template": template("tensorflow")},
            master={"template": template("tensorflow")},
            Worker={"template": template("tensorflow")},
        ),
    ),
    InvariantCase(
        "tf-pods-per-job",
        _tf(
            PS={"replicas": 1000, "template": template("tensorflow")},
            Worker={"replicas": 1000, "template": template("tensorflow")},
            Evaluator={"replicas": 1, "template": template("tensorflow")},
        ),
    ),
    *_every_kind(
        "tf", set_path(tf_job(), f"{TF}.Worker.template", template("tensorflow")), TF, "Worker"
    ),
    # MPIJob
    InvariantCase("mpi-one-launcher", set_path(mpi_job(), f"{MPI}.Launcher.replicas", 2)),
    InvariantCase("mpi-needs-worker", _mpi_specs(Launcher={"template": template("launcher")})),
    InvariantCase(
        "mpi-restart-policy",
        set_path(mpi_job(), f"{MPI}.Worker.restartPolicy", "ExitCode"),
        "Worker",
    ),
    InvariantCase("mpi-pods-per-job", set_path(mpi_job(), f"{MPI}.Worker.replicas", 2000)),
    *_every_kind("mpi", mpi_job(), MPI, "Worker"),
    # PaddleJob
    InvariantCase(
        "paddle-main-container",
        set_path(paddle_job(), f"{PADDLE}.Worker.template", template()),
        "Worker",
    ),
    InvariantCase(
        "paddle-pods-per-job",
        set_path(
            set_path(
                paddle_job(), f"{PADDLE}.Master", {"replicas": 1000, "template": template("paddle")}
            ),
            f"{PADDLE}.Worker.replicas",
            1001,
        ),
    ),
    *_every_kind("paddle", paddle_job(), PADDLE, "Worker"),
    # JAXJob
    InvariantCase(
        "jax-main-container", set_path(jax_job(), f"{JAX}.Worker.template", template()), "Worker"
    ),
    # One replica type: 2,001 Workers are over both limits.
    InvariantCase("jax-pods-per-job", set_path(jax_job(), f"{JAX}.Worker.replicas", 2001)),
    *_every_kind("jax", jax_job(), JAX, "Worker"),
    # XGBoostJob
    InvariantCase(
        "xgboost-needs-master",
        set_path(xgboost_job(), XGB, {"Worker": {"template": template("xgboost")}}),
    ),
    InvariantCase("xgboost-one-master", set_path(xgboost_job(), f"{XGB}.Master.replicas", 2)),
    InvariantCase(
        "xgboost-main-container",
        set_path(xgboost_job(), f"{XGB}.Worker.template", template()),
        "Worker",
    ),
    InvariantCase("xgboost-pods-per-job", set_path(xgboost_job(), f"{XGB}.Worker.replicas", 2000)),
    *_every_kind("xgboost", xgboost_job(), XGB, "Worker"),
]
