"""``NcclPreflight``: an nccl-tests MPIJob across a GPU pool's nodes, built with the
:class:`~kubetrain.constructs.mpi_job.MPIJob` construct, whose launcher runs
``all_reduce_perf`` over the pool's fabric and judges the result: its last line is
``kubetrain-preflight: PASS average bus bandwidth <x> GB/s ...`` or ``... FAIL ...`` (mpirun
failed, NCCL used another network than the fabric's, or the bandwidth is below a
threshold).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Protocol

import constructs

from kubetrain.api import RunPolicy
from kubetrain.api.common import CleanPodPolicy
from kubetrain.constructs.job_common import NodePoolLike, Placement
from kubetrain.constructs.mpi_job import MPIJob, MPIJobProps
from kubetrain.constructs.nccl import NcclProfile
from kubetrain.constructs.types import Image, Quantity, Resources
from kubetrain.frameworks import mpi

PREFLIGHT_SSH_PORT = 2222
"""sshd port of host-network preflight workers (port 22 belongs to the node's sshd)."""
PREFLIGHT_MARK = "kubetrain-preflight:"


class PoolLike(NodePoolLike, Protocol):
    """What the preflight reads of its pool."""

    @property
    def profile(self) -> NcclProfile: ...


@dataclass(frozen=True, kw_only=True)
class NcclPreflightProps:
    """Props of :class:`NcclPreflight`."""

    pool: PoolLike
    name: str
    namespace: str
    image: Image
    nodes: int
    deadline_s: int
    min_busbw_gbps: float | None = None
    labels: dict[str, str] | None = None


class NcclPreflight(constructs.Construct):
    """The preflight MPIJob of a GPU pool; child id ``Job`` (an MPIJob construct)."""

    def __init__(self, scope: constructs.Construct, id: str, props: NcclPreflightProps) -> None:
        super().__init__(scope, id)
        self.props = props
        pool = props.pool
        sshd: tuple[str, ...] = ("/usr/sbin/sshd", "-De")
        if pool.profile.host_network:
            sshd += ("-p", str(PREFLIGHT_SSH_PORT))
        try:
            self.job = MPIJob(
                self,
                "Job",
                MPIJobProps(
                    name=props.name,
                    namespace=props.namespace,
                    image=props.image,
                    node_pool=pool,
                    workers=props.nodes,
                    slots_per_worker=pool.gpus_per_node,
                    worker_command=sshd,
                    launcher_command=("/bin/sh", "-c", self.script()),
                    launcher_on_node_pool=True,
                    launcher_restart_policy="Never",
                    worker_restart_policy="Never",
                    ssh_auth_mount_path="/root/.ssh",
                    resources=Resources(cpu=Quantity.of(4), memory=Quantity.gibibytes(32)),
                    placement=Placement.PREFER_SAME_BLOCK,
                    run_policy=RunPolicy(
                        clean_pod_policy=CleanPodPolicy.RUNNING,
                        backoff_limit=0,
                        active_deadline_seconds=props.deadline_s,
                    ),
                    labels=dict(props.labels or {}),
                    pod_labels={"app.kubernetes.io/name": "nccl-preflight"},
                ),
            )
        except ValueError as exc:
            raise ValueError(
                f"preflight MPIJob of node pool {props.name!r} is invalid: {exc}"
            ) from None

    @property
    def manifest(self) -> dict[str, Any]:
        """The preflight MPIJob as emitted."""
        return self.job.manifest

    def script(self) -> str:
        """The launcher's shell script: mpirun all_reduce_perf, then judge the output.
        Its last line starts with ``kubetrain-preflight: PASS`` or ``... FAIL``."""
        props = self.props
        profile = props.pool.profile
        gpus = props.pool.gpus_per_node
        ranks = mpi.ranks_of(props.nodes, gpus)
        mpirun = [
            "mpirun",
            "--allow-run-as-root",
            "-np",
            str(ranks),
            "-bind-to",
            "none",
            "-map-by",
            "slot",
        ]
        if profile.host_network:
            rsh_args = f"-p {PREFLIGHT_SSH_PORT} -o ConnectionAttempts=10"
            mpirun += ["--mca", "plm_rsh_args", rsh_args]
        # Ranks started over ssh do not inherit the pod's environment: export it.
        mpirun += ["-x", "NCCL_DEBUG=INFO", "-x", "NCCL_DEBUG_SUBSYS=INIT,NET"]
        exported = [k for k in profile.env if k not in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS")]
        for name in sorted({*exported, "PATH", "LD_LIBRARY_PATH"}):
            mpirun += ["-x", name]
        mpirun += ["all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1"]
        shape = f"{props.nodes} nodes x {gpus} GPUs"
        lines = [
            f'echo "{PREFLIGHT_MARK} all_reduce_perf over {shape}, profile {profile.name}"',
            f"{{ {shlex.join(mpirun)}; echo $? > /tmp/mpirun.rc; }} 2>&1 | tee /tmp/preflight.log",
            "rc=$(cat /tmp/mpirun.rc)",
            'if [ "$rc" -ne 0 ]; then',
            f'  echo "{PREFLIGHT_MARK} FAIL mpirun exited with status $rc"; exit 1',
            "fi",
            "busbw=$(awk '/Avg bus bandwidth/ {print $NF}' /tmp/preflight.log | tail -n 1)",
            'if [ -z "$busbw" ]; then',
            f"  echo \"{PREFLIGHT_MARK} FAIL no 'Avg bus bandwidth' in the output\"; exit 1",
            "fi",
            "sed -n 's/.*NCCL INFO Using network //p' /tmp/preflight.log | sort -u > /tmp/nets",
            "nets=$(tr '\\n' ' ' < /tmp/nets)",
        ]
        expected = profile.expected_network
        if expected is not None:
            lines += [
                f"if [ ! -s /tmp/nets ] || grep -qvF '{expected}' /tmp/nets; then",
                f'  echo "{PREFLIGHT_MARK} FAIL NCCL used network(s) [$nets], expected'
                f" {expected}: the fabric is not in use (RDMA device, memlock, HCA or"
                ' interface settings)"; exit 1',
                "fi",
            ]
        minimum = props.min_busbw_gbps
        if minimum is not None:
            lines += [
                f"if ! awk -v b=\"$busbw\" -v m={minimum:g} 'BEGIN {{ exit !(b + 0 >= m) }}'; then",
                f'  echo "{PREFLIGHT_MARK} FAIL average bus bandwidth $busbw GB/s is below'
                f' {minimum:g} GB/s"; exit 1',
                "fi",
            ]
        lines.append(
            f'echo "{PREFLIGHT_MARK} PASS average bus bandwidth $busbw GB/s over {shape},'
            ' network(s) [$nets]"'
        )
        return "\n".join(lines) + "\n"
