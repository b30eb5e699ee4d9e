"""Fault injection against a real control plane and real operator processes, bounded in
time and printing its figures (see the run's summary): the operator killed (SIGKILL) at
random moments during a mixed burst. Afterwards every job Succeeded with the right status
(one restart for one OOM kill), and no child was made twice (``burst.check_outcome``).

Two operators whose leader is frozen past its Lease mid-burst: after it resumes, not one
write from it reaches the API server.

The API server killed and started again while the operator creates a burst: the same
operator process rides the outage out and drives every job to Succeeded.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cluster.local import LocalCluster
from tests.clusters import ClusterClients
from tests.faults.burst import BurstJob, check_outcome, drive, mixed_burst
from tests.integration.fault_proxy import FaultProxy
from tests.integration.kube import wait_for
from tests.integration.operator.jobs import Jobs
from tests.integration.operator.process import OperatorProcess

#: Jobs of each kind in a burst (three kinds).
EACH = 4


def _submit(jobs: Jobs, prefix: str) -> list[BurstJob]:
    burst = mixed_burst(prefix, EACH)
    for _job, body in burst:
        jobs.create(body)
    return [job for job, _body in burst]


def test_operator_killed_at_random_moments_during_a_mixed_burst(
    faults_cluster: LocalCluster,
    faults_namespace: str,
    jobs: Jobs,
    processes: list[OperatorProcess],
    tmp_path: Path,
    figures: list[str],
) -> None:
    seed = int(os.environ.get("KUBETRAIN_FAULT_SEED") or time.time_ns() % 100_000)
    rng = random.Random(seed)
    log = tmp_path / "operator.log"

    def start() -> OperatorProcess:
        proc = OperatorProcess(faults_cluster.kubeconfig, faults_namespace, log).start()
        processes.append(proc)
        return proc

    current = [start()]
    done = threading.Event()
    kills: list[float] = []

    def killer() -> None:
        # Kills at random moments until the burst is over (at most 8), each followed by a
        # new operator after a random pause.
        while len(kills) < 8 and not done.wait(rng.uniform(1.0, 5.0)):
            current[0].kill()
            kills.append(time.monotonic())
            time.sleep(rng.uniform(0.0, 2.0))
            current[0] = start()

    thread = threading.Thread(target=killer, daemon=True)
    burst = _submit(jobs, "kill")
    thread.start()
    try:
        took = drive(jobs, burst)
    finally:
        done.set()
        thread.join(timeout=30)
    check_outcome(jobs, burst)
    figures.append(
        f"faults: operator SIGKILLed {len(kills)} times at random (seed {seed}) during a "
        f"burst of {len(burst)} jobs: all Succeeded in {took:.0f} s, no child made twice, "
        f"{EACH} OOM kills counted once each"
    )


def test_control_plane_stopped_and_started_under_load(
    faults_cluster: LocalCluster,
    faults: ClusterClients,
    faults_namespace: str,
    jobs: Jobs,
    processes: list[OperatorProcess],
    tmp_path: Path,
    figures: list[str],
) -> None:
    operator = OperatorProcess(
        faults_cluster.kubeconfig, faults_namespace, tmp_path / "operator.log"
    ).start()
    processes.append(operator)
    burst = _submit(jobs, "outage")
    # Load: the operator is creating the burst's children when the control plane stops.
    wait_for(lambda: len(jobs.pods(burst[0].name)), lambda n: n > 0, what="first pods")
    stopped = time.monotonic()
    _restart(faults_cluster, "kube-apiserver", outage_seconds=5.0)
    wait_for(lambda: _ready(faults.api_client), bool, what="the API server back", timeout=120)
    outage = time.monotonic() - stopped
    # kwok (the fake kubelets) does not take pods further after the API server it
    # watches restarted (v0.8.0: scheduled pods stay Pending); a kubelet reconnects, so
    # kwok is started again here. The operator, etcd, the scheduler and the controller
    # manager are not touched: they ride the outage out on their own (the last two run
    # without leader election, cluster/local.py: with it they exit after 10 s away).
    _restart(
        faults_cluster,
        "kwok-controller",
        outage_seconds=0.0,
        meanwhile=lambda: _free_node_leases(faults.core_v1),
    )
    took = drive(jobs, burst)
    check_outcome(jobs, burst)
    assert operator.proc is not None and operator.proc.poll() is None, "the operator died"
    figures.append(
        f"faults: API server down {outage:.0f} s (SIGKILL, 5 s, started again) while the operator "
        f"created a burst of {len(burst)} jobs: the same operator process drove all to "
        f"Succeeded {took:.0f} s after it came back, no child made twice"
    )


def _restart(
    cluster: LocalCluster,
    component: str,
    *,
    outage_seconds: float,
    meanwhile: Callable[[], None] = lambda: None,
) -> None:
    """Stop one of the cluster's processes (SIGKILL, as a crash does), wait (and do
    ``meanwhile``), and start it again with the same command line, environment and log;
    its pid file is updated so that stopping the cluster stops the new process too."""
    pid = cluster.pids()[component]
    proc_dir = Path(f"/proc/{pid}")
    args = [a.decode() for a in (proc_dir / "cmdline").read_bytes().split(b"\0") if a]
    env = dict(
        item.decode().split("=", 1)
        for item in (proc_dir / "environ").read_bytes().split(b"\0")
        if b"=" in item
    )
    cwd = os.readlink(proc_dir / "cwd")
    # SIGKILL: kube-apiserver's graceful shutdown (SIGTERM) outlasted a minute here,
    # with the operator's watches open.
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: _alive(proc_dir), lambda alive: not alive, what=f"{component} {pid} gone")
    time.sleep(outage_seconds)
    meanwhile()
    with (cluster.logs_dir / f"{component}.log").open("ab") as log:
        started = subprocess.Popen(
            args, cwd=cwd, env=env, stdout=log, stderr=log, start_new_session=True
        )
    pid_file = cluster.cluster_dir / "pids" / f"{component}.pid"
    pid_file.write_text(f"{started.pid}\n", encoding="utf-8")


def _free_node_leases(core_v1: client.CoreV1Api) -> None:
    """Delete the fake nodes' Leases, which the stopped kwok-controller held. A kubelet's
    Lease names its node as the holder, so a restarted kubelet renews it at once; kwok's
    holder is a per-process random id, so a restarted kwok-controller leaves every node
    alone until the dead one's Leases expire (40 s, and over 3 minutes seen here: longer
    than the test waits). Without them it takes its nodes back at once."""
    coordination = client.CoordinationV1Api(core_v1.api_client)
    coordination.delete_collection_namespaced_lease("kube-node-lease")


def _alive(proc_dir: Path) -> bool:
    """Running, as opposed to gone or a zombie no one reaped (PID 1 of a container)."""
    try:
        stat = (proc_dir / "stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _ready(api_client: client.ApiClient) -> bool:
    """The API server answers, and serves the namespaces (etcd is back too)."""
    try:
        client.CoreV1Api(api_client).list_namespace(limit=1, _request_timeout=2)
    except (ApiException, urllib3.exceptions.HTTPError, OSError):
        return False
    return True


def test_a_paused_leader_writes_nothing_after_it_resumes(
    faults_cluster: LocalCluster,
    faults_namespace: str,
    jobs: Jobs,
    processes: list[OperatorProcess],
    tmp_path: Path,
    figures: list[str],
) -> None:
    """Two operators, each behind its own proxy that logs every request it forwards.
    The leader is frozen (SIGSTOP) mid-burst, past its Lease; the standby takes over and
    finishes the burst; the old leader, resumed (SIGCONT), must not let one write through
    its fence after the freeze, and exits.

    What no client can promise: a write its fence let through just before the freeze
    (checked, not yet on the wire) still goes out when the process wakes. Each write
    says when its fence checked it (``FENCE_CHECKED_HEADER``); such a write may reach the
    proxy after the takeover only if it was checked before every thread stopped, at most
    one per sending thread. Anything checked later is the fence failing."""
    election = ("--leader-elect=true", "--leader-election-id=kubetrain-faults")
    proxies = [FaultProxy(faults_cluster.kubeconfig, tmp_path / str(i)) for i in range(2)]
    for i, proxy in enumerate(proxies):
        (tmp_path / str(i)).mkdir()
        proxy.start()
    try:
        one = OperatorProcess(
            proxies[0].kubeconfig_path, faults_namespace, tmp_path / "one.log", extra=election
        ).start()
        processes.append(one)
        wait_for(lambda: one.metric("kubetrain_is_leader"), lambda v: v == 1, what="one leads")
        two = OperatorProcess(
            proxies[1].kubeconfig_path, faults_namespace, tmp_path / "two.log", extra=election
        ).start()
        processes.append(two)
        burst = _submit(jobs, "pause")
        wait_for(lambda: len(jobs.pods(burst[0].name)), lambda n: n > 0, what="first pods")
        paused = one.pause()
        threads = one.thread_count()
        try:
            wait_for(
                lambda: two.metric("kubetrain_is_leader"),
                lambda v: v == 1,
                what="the standby to take the Lease",
                timeout=60,
            )
            took_over = time.monotonic()
            # Work the frozen leader finds queued when it wakes up.
            time.sleep(3)
        finally:
            one.resume()
        assert one.proc is not None and one.proc.wait(timeout=60) == 1
        took = drive(jobs, burst)
        check_outcome(jobs, burst)
        late = proxies[0].writes(since=took_over)
        fenced_late = [w for w in late if w.fence_checked is None or w.fence_checked >= paused]
        assert fenced_late == [], f"the old leader's fence let writes through: {fenced_late}"
        assert len(late) <= threads, f"more writes in flight than {threads} threads: {late}"
        figures.append(
            f"faults: leader frozen {took_over - paused:.0f} s until the standby took over, "
            f"then resumed: 0 writes let through its fence after the freeze (it exited; "
            f"{len(late)} checked before the freeze went out late), "
            f"{len(proxies[1].writes())} writes by the new leader, burst of {len(burst)} "
            f"jobs all Succeeded {took:.0f} s later, no child made twice"
        )
    finally:
        for proxy in proxies:
            proxy.stop()
