"""PaddlePaddle (``PaddleJob``): every rule of the framework, stated once.

Upstream's contract (training-operator v1.9, ``pkg/controller.v1/paddlepaddle``):

- Roles: the Master is ``master`` (upstream's ``IsMasterRole``); a Workers-only job has no
  ``master`` role.
- Environment, in every container of every replica: ``PYTHONUNBUFFERED=1``,
  ``PADDLE_JOB_ID`` (the job's name), ``PADDLE_NNODES`` (replicas of every type), then
  ``PADDLE_MASTER``, the rendezvous endpoint ``paddle.distributed.launch`` reads:

  - collective mode (no Master replica spec): Worker 0's Service and the ``master`` port
    of the Workers' ``paddle`` container (default 36543); Worker 0 itself gets
    ``POD_IP_DUMMY`` (its pod IP, ``fieldRef: status.podIP``) and
    ``PADDLE_MASTER=$(POD_IP_DUMMY):<port>``;
  - parameter-server mode (a Master replica spec): the same with Master 0 and the
    Master's port, plus ``PADDLE_SERVER_NUM=1`` on Masters and ``PADDLE_TRAINER_NUM=1`` on
    Workers (one server or trainer per pod).
- Start order: none (``paddle.distributed.launch`` waits for its master itself; upstream
  adds no init container).
- Success: every Master replica succeeded; without a Master (or with 0 Master replicas,
  where upstream would call the job Succeeded at once), every Worker.
"""

from __future__ import annotations

from kubetrain.api import env_names as E
from kubetrain.api.common import JobBase
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.paddle import INFO as PADDLE
from kubetrain.api.paddle import PaddleJob, PaddleReplicaType
from kubetrain.frameworks.addressing import (
    Addressing,
    EnvVar,
    ReplicaRef,
    env_var,
    replica_name,
)
from kubetrain.frameworks.base import Done, WholeEnvFramework, typed_as
from kubetrain.frameworks.replicas import declared_port, replicas_of

CONTAINER = str(PADDLE.main_container)
PORT_NAME = str(PADDLE.port_name)
DEFAULT_PORT = int(PADDLE.default_port or 0)
MASTER = PaddleReplicaType.MASTER.value
WORKER = PaddleReplicaType.WORKER.value


def _typed(job: JobBase) -> PaddleJob:
    return typed_as(job, PaddleJob, "PaddlePaddle")


def has_master(job: PaddleJob) -> bool:
    """Whether the job runs in parameter-server mode: it has a Master replica spec (as
    upstream asks, whatever its replica count)."""
    return PaddleReplicaType.MASTER in job.spec.paddle_replica_specs


def replica_port(job: PaddleJob, replica_type: str) -> int:
    """The ``master`` port the replica type's ``paddle`` container declares (default 36543)."""
    spec = job.spec.paddle_replica_specs.get(PaddleReplicaType(replica_type))
    if spec is None:
        return DEFAULT_PORT
    return declared_port(spec.template, CONTAINER, PORT_NAME, DEFAULT_PORT)


def nodes(job: PaddleJob) -> int:
    """``PADDLE_NNODES``: the replicas of every type."""
    return sum(replicas_of(spec) for spec in job.spec.paddle_replica_specs.values())


def replica_env(
    job: PaddleJob, replica_type: str, index: int, addressing: Addressing
) -> list[EnvVar]:
    """The variables injected into every container of replica ``replica_type``-``index``."""
    known = {rtype.value for rtype in job.spec.paddle_replica_specs}
    if replica_type not in known:
        raise ValueError(
            f"replica type {replica_type!r} is not in PaddleJob {job.name!r}: "
            f"expected one of {sorted(known)}"
        )
    server_mode = has_master(job)
    rendezvous_type = MASTER if server_mode else WORKER
    rendezvous = ReplicaRef(
        job_name=job.name,
        namespace=job.metadata.namespace or "default",
        replica_type=rendezvous_type,
        index=0,
    )
    port = addressing.replica_port(rendezvous, replica_port(job, rendezvous_type))
    env = [
        env_var(E.PYTHONUNBUFFERED, "1"),
        env_var(E.PADDLE_JOB_ID, job.name),
        env_var(E.PADDLE_NNODES, nodes(job)),
    ]
    # Collective mode: index 0 of any type is the rendezvous (only Workers exist there).
    is_rendezvous = index == 0 and (replica_type == MASTER or not server_mode)
    if is_rendezvous:
        env += [
            {"name": E.PADDLE_POD_IP, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            env_var(E.PADDLE_MASTER, f"$({E.PADDLE_POD_IP}):{port}"),
        ]
    else:
        host = addressing.replica_host(rendezvous, qualified=False)
        env.append(env_var(E.PADDLE_MASTER, f"{host}:{port}"))
    if server_mode:
        env.append(
            env_var(E.PADDLE_SERVER_NUM if replica_type == MASTER else E.PADDLE_TRAINER_NUM, 1)
        )
    return env


class Paddle(WholeEnvFramework[PaddleJob]):
    """The PaddlePaddle framework (see the module docs)."""

    info: KindInfo = PADDLE
    model = PaddleJob
    name = "PaddlePaddle"
    replica_env = staticmethod(replica_env)

    def role(self, job: JobBase, replica_type: str, index: int) -> str | None:
        return "master" if replica_type == MASTER else None

    def succeeded(self, job: JobBase, done: Done) -> str | None:
        specs = _typed(job).replica_specs()
        decider = MASTER if replicas_of(specs.get(MASTER)) else WORKER
        count = replicas_of(specs.get(decider))
        if not count or not all(done(decider, i) for i in range(count)):
            return None
        if count == 1:
            return f"{replica_name(job.name, decider, 0)} completed"
        return f"all {count} {decider.lower()}s completed"


FRAMEWORK = Paddle()
