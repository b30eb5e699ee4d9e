"""Start and stop the local control plane.

kwokctl's binary runtime runs etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and the kwok controller as local processes, all bound to 127.0.0.1, in
a work directory of their own. kubetrain then registers the fake nodes of a
``Topology`` and waits until they are Ready and the cluster can admit pods.

With ``scheduler="coscheduling"`` the scheduler is the scheduler-plugins build instead
of kube-scheduler, with the Coscheduling plugin enabled (gang scheduling of PodGroups):
kwokctl runs it in kube-scheduler's place with a configuration file written into the
work directory, the PodGroup CRD is installed as soon as the API server is up, and the
scheduler-plugins controller (PodGroup status) runs beside it.

Nothing here runs containers: kwok plays the kubelet, driven by the Stage resources in
``cluster/stages`` (pods start at once; an annotation makes them exit, see
``cluster.fake_pods``).

With ``metrics=True`` the control plane also serves the resource metrics API from kwok's
emulated pod usage, and kube-controller-manager's HPA settings are short enough for a
test (``cluster.metrics``); off by default, since only the autoscaling tests read it.

With ``real_node=True`` one real node joins them (``cluster.node``: containerd, the
kubelet, kube-proxy and CoreDNS in a network namespace of their own); kwok then manages
only the nodes annotated ``kwok.x-k8s.io/node: fake``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

from cluster.metrics import KWOK_ADDRESS, METRICS_API_SERVICE, metrics_options, metrics_patches
from cluster.node import RealNode
from cluster.node_config import NodeNetwork, control_plane_options, control_plane_patches
from cluster.process import LocalProcess, ProcessError, free_port
from cluster.tools import CLUSTER_DIR, Tools, find_tools
from cluster.topology import Topology, default_topology
from kubetrain.manifest import parse_yaml

STAGES_DIR = CLUSTER_DIR / "stages"
#: kwokctl's name for the cluster; the work directory is what isolates one from another.
CLUSTER_NAME = "kubetrain"
#: The processes kwokctl starts, by the names of their pid and log files.
COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok-controller",
)
#: The processes kwokctl starts only when asked (``metrics=True``).
OPTIONAL_COMPONENTS = ("metrics-server",)
#: The schedulers ``LocalCluster`` can run: kube-scheduler, or the scheduler-plugins
#: scheduler with gang scheduling (Coscheduling) enabled.
Scheduler = Literal["kube", "coscheduling"]
SCHEDULERS: tuple[str, ...] = get_args(Scheduler)
#: The scheduler profile name the coscheduling scheduler serves: the default one, so every
#: pod goes through it as it would through the kube-scheduler it replaces.
COSCHEDULING_SCHEDULER_NAME = "default-scheduler"
#: Every profile it serves: the default one, and the name scheduler-plugins' own install
#: gives its scheduler (what gang-scheduled pods name by default), both with Coscheduling.
COSCHEDULING_SCHEDULER_NAMES = (COSCHEDULING_SCHEDULER_NAME, "scheduler-plugins-scheduler")
#: How long (seconds) Coscheduling holds the bound members of an incomplete gang at
#: Permit before giving their resources back (upstream's sample configuration uses 10).
COSCHEDULING_PERMIT_WAITING_SECONDS = 10


class ClusterError(RuntimeError):
    """The local control plane could not be started, reached or stopped."""


@dataclass(frozen=True)
class CommandResult:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def _kwok_env(kwok_workdir: Path) -> dict[str, str]:
    # kwokctl reads any KWOK_* variable as an option; keep only ours so that the
    # cluster is the same whoever starts it.
    env = {key: value for key, value in os.environ.items() if not key.startswith("KWOK_")}
    env["KWOK_WORKDIR"] = str(kwok_workdir)
    return env


class LocalCluster:
    """One local control plane living in ``workdir``.

    ``workdir`` holds everything: the kwokctl configuration, kwok's own work directory
    (certificates, etcd data, pid files, component logs) and ``kubeconfig``, the
    cluster-admin kubeconfig to use with kubectl or a Kubernetes client.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        topology: Topology | None = None,
        tools: Tools | None = None,
        scheduler: Scheduler = "kube",
        audit_policy: Path | None = None,
        real_node: bool = False,
        node_network: NodeNetwork | None = None,
        metrics: bool = False,
    ) -> None:
        if scheduler not in SCHEDULERS:
            raise ValueError(
                f"scheduler {scheduler!r} is not one LocalCluster can run: expected one of "
                f"{', '.join(SCHEDULERS)}"
            )
        self.workdir = workdir.resolve()
        self.topology = topology or default_topology()
        self.scheduler: Scheduler = scheduler
        #: An audit Policy file for kube-apiserver (None: no audit log); the log is
        #: ``audit_log``, one JSON event per line (the peer benchmark counts each
        #: operator's requests by user agent from it).
        self.audit_policy = audit_policy.resolve() if audit_policy is not None else None
        self._tools = tools
        #: Whether ``up()`` starts the real node (``down()`` stops one whenever it ran).
        self.with_real_node = real_node
        #: The real node's addresses (two clusters with real nodes need different ones).
        self.node_network = node_network or NodeNetwork()
        #: Whether ``up()`` serves the resource metrics API (``cluster.metrics``).
        self.with_metrics = metrics

    # Paths -------------------------------------------------------------------------

    @property
    def tools(self) -> Tools:
        """The Go tools this cluster runs: the control plane's, and the scheduler-plugins
        build when it runs the coscheduling scheduler."""
        if self._tools is None:
            needed = ["control-plane"]
            if self.scheduler == "coscheduling":
                needed.append("scheduler-plugins")
            if self.with_real_node:
                needed += ["node", "coredns"]
            if self.with_metrics:
                needed.append("metrics-server")
            self._tools = find_tools(only=needed)
        return self._tools

    @property
    def real_node(self) -> RealNode | None:
        """The real node, when this cluster has one (``real_node=True``, or one started
        in its work directory before)."""
        node = RealNode(self.workdir, tools=self.tools, network=self.node_network)
        return node if self.with_real_node or node.has_run() else None

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig written once the cluster is up."""
        return self.workdir / "kubeconfig"

    @property
    def kwok_workdir(self) -> Path:
        return self.workdir / "kwok"

    @property
    def cluster_dir(self) -> Path:
        return self.kwok_workdir / "clusters" / CLUSTER_NAME

    @property
    def logs_dir(self) -> Path:
        return self.cluster_dir / "logs"

    @property
    def audit_log(self) -> Path:
        """kube-apiserver's audit log, written when the cluster has an ``audit_policy``."""
        return self.logs_dir / "audit.log"

    @property
    def saved_logs_dir(self) -> Path:
        """Where ``down()`` keeps the component logs of the last run."""
        return self.workdir / "logs"

    @property
    def owner_file(self) -> Path:
        """Pid of the process that started the cluster (to find orphaned clusters)."""
        return self.workdir / "owner.pid"

    @property
    def config_path(self) -> Path:
        return self.workdir / "kwokctl.yaml"

    @property
    def scheduler_config_path(self) -> Path:
        """The KubeSchedulerConfiguration given to the coscheduling scheduler."""
        return self.workdir / "scheduler-config.yaml"

    @property
    def processes_dir(self) -> Path:
        """Pid files of the processes started beside kwokctl's (see ``extra_process``)."""
        return self.workdir / "processes"

    def extra_process(self, name: str) -> LocalProcess:
        """A process that runs beside the control plane, logging into ``logs_dir``.

        ``down()`` stops every such process before the control plane, so nothing is
        left talking to an API server that is gone.
        """
        return LocalProcess(
            name,
            pid_file=self.processes_dir / f"{name}.pid",
            log_file=self.logs_dir / f"{name}.log",
        )

    def extra_processes(self) -> list[LocalProcess]:
        """Every process with a pid file in ``processes_dir``, running or not."""
        return [self.extra_process(path.stem) for path in sorted(self.processes_dir.glob("*.pid"))]

    # Lifecycle ---------------------------------------------------------------------

    def is_running(self) -> bool:
        """True when every control-plane component's process is alive."""
        pids = self.pids()
        return all(component in pids and _alive(pids[component]) for component in COMPONENTS)

    def is_orphaned(self) -> bool:
        """True when some component still runs but the process that started it is gone
        (say a test session that was killed before it could stop its cluster)."""
        try:
            owner = int(self.owner_file.read_text(encoding="utf-8").strip())
        except (FileNotFoundError, ValueError):
            return False
        return not _alive(owner) and any(_alive(pid) for pid in self.pids().values())

    def up(self, *, timeout: float = 180.0) -> None:
        """Start the control plane and register the nodes; returns once it admits pods.

        Raises ``ClusterError`` with the failing command's output and the tail of the
        component logs when something does not come up within ``timeout`` seconds.
        """
        if self.is_running():
            raise ClusterError(
                f"a control plane is already running in {self.workdir}: "
                f"use it (KUBECONFIG={self.kubeconfig}) or stop it first (make cluster-down)"
            )
        if self.cluster_dir.exists():
            # Left over from a run that did not stop cleanly: start from scratch.
            for process in self.extra_processes():
                process.stop()
            self._kwokctl("delete", "cluster", "--name", CLUSTER_NAME, check=False)
            shutil.rmtree(self.cluster_dir, ignore_errors=True)
        # Before the deadline starts: under make test, finding the tools may wait for a build.
        _ = self.tools
        deadline = time.monotonic() + timeout
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig.unlink(missing_ok=True)
        if self.scheduler == "coscheduling":
            self.scheduler_config_path.write_text(
                yaml.safe_dump(coscheduling_config(), sort_keys=False), encoding="utf-8"
            )
        else:
            self.scheduler_config_path.unlink(missing_ok=True)
        self.config_path.write_text(self._kwokctl_config(), encoding="utf-8")
        self.owner_file.write_text(f"{os.getpid()}\n", encoding="utf-8")
        with start_lock():
            self._create(deadline)
        shutil.copyfile(self.cluster_dir / "kubeconfig.yaml", self.kubeconfig)
        if self.scheduler == "coscheduling":
            self._start_gang_scheduling(deadline)
        self.register_nodes(deadline=deadline)
        self._wait_for_default_service_account(deadline)
        if self.with_metrics:
            self._wait_for_metrics_api(deadline)
        if self.with_real_node:
            node = RealNode(self.workdir, tools=self.tools, network=self.node_network)
            port = int(self.server_url().rsplit(":", 1)[1])
            try:
                node.up(
                    api_port=port,
                    pki_dir=self.cluster_dir / "pki",
                    kubectl=self.tools.kubectl,
                    deadline=deadline,
                )
            except Exception as err:
                raise ClusterError(f"the real node did not come up: {err}") from err

    def _create(self, deadline: float) -> None:
        self._kwokctl(
            "create",
            "cluster",
            "--name",
            CLUSTER_NAME,
            "--runtime",
            "binary",
            "--kubeconfig",
            "",
            "--quiet-pull",
            "--timeout",
            f"{max(1, int(deadline - time.monotonic()))}s",
            "--wait",
            f"{max(1, int(deadline - time.monotonic()))}s",
        )

    def install_crds(self, paths: Sequence[Path], *, deadline: float) -> None:
        """Apply CRD files server-side and wait until every one is Established."""
        names = []
        for path in paths:
            self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
            document = parse_yaml(path.read_text(encoding="utf-8"))
            names.append(document["metadata"]["name"])
        self.wait_established(names, deadline=deadline)

    def wait_established(self, names: Sequence[str], *, deadline: float) -> None:
        """Until every CRD in ``names`` is Established (ClusterError past ``deadline``).

        ``kubectl wait`` fails at once on a CRD the API server has not given a status yet
        ("accessor error: <nil>"), which a loaded machine shows: it is asked again until
        the deadline."""
        self._wait_condition(
            "Established", [f"crd/{name}" for name in names], f"CRDs {', '.join(names)}", deadline
        )

    def _wait_condition(
        self, condition: str, objects: Sequence[str], what: str, deadline: float
    ) -> None:
        """``kubectl wait --for=condition=<condition>`` on ``objects``, asked again until
        ``deadline`` (ClusterError naming ``what`` past it)."""
        while True:
            result = self.kubectl(
                "wait",
                f"--for=condition={condition}",
                *objects,
                f"--timeout={max(1, int(deadline - time.monotonic()))}s",
                check=False,
            )
            if result.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{what}: not {condition} in time: {result.stderr.strip()}\n{self.log_tails()}"
                )
            time.sleep(0.5)

    def _start_gang_scheduling(self, deadline: float) -> None:
        # The scheduler waits for its PodGroup informer to sync before it schedules
        # anything, so it is the CRD's arrival, right after the API server's, that
        # lets it start; no pod can be created before this (no nodes yet either).
        tools = self.tools
        self.install_crds([tools.podgroup_crd, tools.elasticquota_crd], deadline=deadline)
        controller = self.extra_process("scheduler-plugins-controller")
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        try:
            controller.start(
                [
                    str(tools.scheduler_plugins_controller),
                    f"--metricsAddr=127.0.0.1:{free_port()}",
                    f"--probeAddr=127.0.0.1:{free_port()}",
                ],
                env=env,
            )
        except ProcessError as err:
            raise ClusterError(str(err)) from err

    def register_nodes(self, *, deadline: float) -> None:
        """Create the topology's nodes and wait until kwok reports them Ready."""
        nodes = {
            "apiVersion": "v1",
            "kind": "List",
            "items": self.topology.nodes(
                kubelet_version=f"kwok-{self.tools.versions.kwok}",
                metrics_address=KWOK_ADDRESS if self.with_metrics else None,
            ),
        }
        # Created, not applied: the kubelet registers its Node with status, and a
        # create keeps the status (capacity, addresses) it is given.
        self.kubectl("create", "-f", "-", input=json.dumps(nodes))
        self.kubectl(
            "wait",
            "--for=condition=Ready",
            "node",
            "--all",
            f"--timeout={max(1, int(deadline - time.monotonic()))}s",
        )

    def _wait_for_default_service_account(self, deadline: float) -> None:
        # Pods cannot be created in a namespace until the service-account controller of
        # kube-controller-manager has created its "default" ServiceAccount.
        while True:
            result = self.kubectl(
                "get", "serviceaccount", "default", "-n", "default", "-o", "name", check=False
            )
            if result.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    "kube-controller-manager did not create the default ServiceAccount in "
                    f"namespace default in time: {result.stderr.strip()}\n{self.log_tails()}"
                )
            time.sleep(0.5)

    def _wait_for_metrics_api(self, deadline: float) -> None:
        # kwokctl applies the APIService; it is Available once the API server reaches
        # metrics-server through it (pods' usage shows later, after two scrapes).
        service = f"apiservice/{METRICS_API_SERVICE}"
        self._wait_condition("Available", [service], f"the APIService {service}", deadline)

    def down(self) -> list[Path]:
        """Stop every component and remove the cluster's state (a no-op when stopped).

        The component logs are kept: they are copied to ``saved_logs_dir`` first, and
        the copies are returned.
        """
        saved: list[Path] = []
        node = RealNode(self.workdir, tools=self.tools, network=self.node_network)
        if node.has_run():
            node.down()
        # Argo CD beside it (cluster/argocd.py): its processes and network namespace.
        from cluster.argocd import LocalArgoCd

        LocalArgoCd(self).stop()
        for process in self.extra_processes():
            process.stop()
        if self.cluster_dir.exists():
            shutil.rmtree(self.saved_logs_dir, ignore_errors=True)
            saved = self.save_logs(self.saved_logs_dir)
            components = self._component_pids()
            # kwokctl SIGKILLs the pid its pid file names, whatever runs there now: a
            # file of a session that died names a process that reused the pid (another
            # cluster's etcd, once). Those files go first.
            for component in COMPONENTS + OPTIONAL_COMPONENTS:
                if component not in components:
                    self._component_pid_file(component).unlink(missing_ok=True)
            self._kwokctl("delete", "cluster", "--name", CLUSTER_NAME)
            # kwokctl stops only the processes it started: a component started again
            # by hand (the fault tests restart kube-apiserver and kwok-controller) is
            # left running, and would serve or drive a later cluster that reuses its
            # ports. Anything still running from this cluster's binaries is killed.
            for pid in components.values():
                if self._runs_our_binary(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        self.kubeconfig.unlink(missing_ok=True)
        return saved

    def _component_pid_file(self, component: str) -> Path:
        return self.cluster_dir / "pids" / f"{component}.pid"

    def _runs_our_binary(self, pid: int) -> bool:
        """Whether process ``pid`` runs one of this cluster's binaries (kwokctl starts
        each component from its cluster directory's ``bin/``)."""
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        except (OSError, UnicodeDecodeError):
            return False
        return argv0.startswith(f"{self.cluster_dir}{os.sep}")

    def _component_pids(self) -> dict[str, int]:
        """kwokctl's components that run, by name. kwokctl's pid files hold the pid
        alone, and pids are reused: a file counts only while its pid runs one of this
        cluster's binaries (not a zombie, not a stranger that got the pid later)."""
        out: dict[str, int] = {}
        for component in COMPONENTS + OPTIONAL_COMPONENTS:
            try:
                pid = int(self._component_pid_file(component).read_text(encoding="utf-8"))
            except (FileNotFoundError, ValueError):
                continue
            if self._runs_our_binary(pid):
                out[component] = pid
        return out

    # Introspection -----------------------------------------------------------------

    def pids(self) -> dict[str, int]:
        """Process ids of the components, by name: kwokctl's, and those running beside
        them (``extra_processes``: the scheduler-plugins controller, Kueue)."""
        out = self._component_pids()
        for process in self.extra_processes():
            pid = process.pid
            if pid is not None:
                out[process.name] = pid
        node = self.real_node
        if node is not None:
            out.update(node.pids())
        return out

    def running_scheduler(self) -> Scheduler:
        """The scheduler the cluster in ``workdir`` was started with (``up()`` leaves a
        scheduler configuration file only for the coscheduling scheduler)."""
        return "coscheduling" if self.scheduler_config_path.exists() else "kube"

    def memory_rss_bytes(self) -> dict[str, int]:
        """Resident memory of each running component, in bytes (from /proc)."""
        out: dict[str, int] = {}
        for component, pid in self.pids().items():
            try:
                status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    out[component] = int(line.split()[1]) * 1024
        node = self.real_node
        if node is not None and node.is_running():
            out.update(node.memory_rss_bytes())
        return out

    def log_files(self) -> dict[str, Path]:
        """The components' log files, by component name (not the audit log: it is data,
        read through ``audit_log``, and too large to copy or show in error reports)."""
        return {
            path.stem: path
            for path in sorted(self.logs_dir.glob("*.log"))
            if path.name != self.audit_log.name
        }

    def log_tails(self, lines: int = 40) -> str:
        """The last ``lines`` lines of every component log, for error reports."""
        parts: list[str] = []
        for component, path in self.log_files().items():
            text = path.read_text(encoding="utf-8", errors="replace").splitlines()
            parts.append(f"----- {component} ({path}), last {lines} lines -----")
            parts.extend(text[-lines:])
        return "\n".join(parts) if parts else f"(no component logs under {self.logs_dir})"

    def save_logs(self, dest: Path) -> list[Path]:
        """Copy the component logs to ``dest`` (they go when the cluster is deleted)."""
        dest.mkdir(parents=True, exist_ok=True)
        saved = []
        for path in self.log_files().values():
            target = dest / path.name
            shutil.copyfile(path, target)
            saved.append(target)
        return saved

    def server_url(self) -> str:
        """The API server URL from the kubeconfig."""
        config = parse_yaml(self.kubeconfig.read_text(encoding="utf-8"))
        server: str = config["clusters"][0]["cluster"]["server"]
        return server

    def usage(self) -> str:
        """How to use the running cluster, for people."""
        listed = self.kubectl(
            "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}", check=False
        )
        nodes = listed.stdout.split() if listed.returncode == 0 else self.topology.node_names()
        scheduler = (
            f"scheduler-plugins {self.tools.versions.scheduler_plugins} (Coscheduling)"
            if self.running_scheduler() == "coscheduling"
            else "kube-scheduler"
        )
        return (
            f"Kubernetes {self.tools.versions.kubernetes} control plane is up at "
            f"{self.server_url()}\n"
            f"  scheduler: {scheduler}\n"
            f"  nodes: {', '.join(nodes)}\n"
            f"  export KUBECONFIG={self.kubeconfig}\n"
            f"  {self.tools.kubectl} get nodes\n"
            f"  component logs: {self.logs_dir}\n"
            f"  stop it with: python -m cluster --workdir {self.workdir} down"
            " (make cluster-down for the default work directory)"
        )

    # Commands ----------------------------------------------------------------------

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> CommandResult:
        """Run the pinned kubectl against this cluster."""
        return self._run(
            [str(self.tools.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            check=check,
        )

    def _kwokctl(self, *args: str, check: bool = True) -> CommandResult:
        return self._run(
            [str(self.tools.kwokctl), "--config", str(self.config_path), *args],
            env=_kwok_env(self.kwok_workdir),
            check=check,
        )

    def _run(
        self,
        args: Sequence[str],
        *,
        input: str | None = None,
        env: dict[str, str] | None = None,
        check: bool = True,
    ) -> CommandResult:
        proc = subprocess.run(
            list(args), input=input, env=env, capture_output=True, text=True, check=False
        )
        result = CommandResult(list(args), proc.returncode, proc.stdout, proc.stderr)
        if check and proc.returncode != 0:
            raise ClusterError(
                f"`{' '.join(args)}` exited with status {proc.returncode}, expected 0\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\n{self.log_tails()}"
            )
        return result

    def _kwokctl_config(self) -> str:
        tools = self.tools
        config: dict[str, Any] = {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokctlConfiguration",
            "options": {
                "runtime": "binary",
                "bindAddress": "127.0.0.1",
                "kubeVersion": tools.versions.kubernetes,
                "securePort": True,
                "kubeAuthorization": True,
                "kubeAdmission": True,
                "quietPull": True,
                "cacheDir": str(self.workdir / "cache"),
                "etcdBinary": str(tools.path("etcd")),
                "kubeApiserverBinary": str(tools.path("kube-apiserver")),
                "kubeControllerManagerBinary": str(tools.path("kube-controller-manager")),
                "kubeSchedulerBinary": str(
                    tools.scheduler_plugins
                    if self.scheduler == "coscheduling"
                    else tools.path("kube-scheduler")
                ),
                "kubectlBinary": str(tools.path("kubectl")),
                "kwokControllerBinary": str(tools.path("kwok")),
            },
        }
        if self.scheduler == "coscheduling":
            config["options"]["kubeSchedulerConfig"] = str(self.scheduler_config_path)
        if self.audit_policy is not None:
            config["options"]["kubeAuditPolicy"] = str(self.audit_policy)
        patches = single_instance_patches()
        if self.with_real_node:
            config["options"].update(control_plane_options(self.node_network))
            patches += control_plane_patches(self.cluster_dir / "pki", self.node_network)
        if self.with_metrics:
            config["options"].update(metrics_options(tools))
            patches += metrics_patches(self.cluster_dir / "pki")
        config["componentsPatches"] = patches
        documents = [yaml.safe_dump(config, sort_keys=True)]
        documents += [path.read_text(encoding="utf-8") for path in stage_files()]
        return "---\n".join(documents)


def single_instance_patches() -> list[dict[str, Any]]:
    """No leader election for the controller manager and the scheduler: each runs once per
    cluster. With it, a component whose API server is away past its renew deadline (10 s;
    an API server stopped on a loaded machine) loses its Lease and exits, and kwokctl's
    binary runtime starts nothing again: pods stay Pending, namespaces get no
    ServiceAccount. Without it they wait for the API server, as the operator does. (The
    coscheduling scheduler's configuration file turns it off too: ``coscheduling_config``.)"""
    off = [{"key": "leader-elect", "value": "false"}]
    return [
        {"name": "kube-controller-manager", "extraArgs": off},
        {"name": "kube-scheduler", "extraArgs": off},
    ]


def coscheduling_config(
    *, permit_waiting_seconds: int = COSCHEDULING_PERMIT_WAITING_SECONDS
) -> dict[str, Any]:
    """The KubeSchedulerConfiguration of the coscheduling scheduler.

    Two profiles (:data:`COSCHEDULING_SCHEDULER_NAMES`), each with Coscheduling at every
    extension point it implements and as the only queue sort (it orders a gang's pods
    together). kwokctl
    adds ``clientConnection.kubeconfig`` when it copies the file.
    """
    if permit_waiting_seconds < 1:
        raise ValueError(
            f"permit_waiting_seconds is {permit_waiting_seconds}: expected at least 1 second"
        )

    def profile(name: str) -> dict[str, Any]:
        return {
            "schedulerName": name,
            "plugins": {
                "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                "queueSort": {
                    "enabled": [{"name": "Coscheduling"}],
                    "disabled": [{"name": "*"}],
                },
            },
            "pluginConfig": [
                {
                    "name": "Coscheduling",
                    "args": {"permitWaitingTimeSeconds": permit_waiting_seconds},
                }
            ],
        }

    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        # One scheduler per cluster: no Lease to take first.
        "leaderElection": {"leaderElect": False},
        "profiles": [profile(n) for n in COSCHEDULING_SCHEDULER_NAMES],
    }


#: Held while kwokctl creates a cluster (``start_lock``).
START_LOCK = Path(tempfile.gettempdir()) / "kubetrain-cluster-start.lock"


@contextlib.contextmanager
def start_lock(path: Path = START_LOCK) -> Iterator[None]:
    """One cluster creation at a time on this machine: kwokctl picks its components'
    ports by probing from 32767 down, so two creations at once (two test processes, two
    checkouts) pick the same ports and one control plane never answers. Held until
    kwokctl's components run (and hold their ports)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def stop_orphaned_clusters(workdirs: Iterable[Path]) -> list[Path]:
    """Stop the clusters among ``workdirs`` whose starting process is gone; return them."""
    stopped = []
    for workdir in workdirs:
        cluster = LocalCluster(workdir)
        if cluster.is_orphaned():
            cluster.down()
            stopped.append(workdir)
    return stopped


def stage_files() -> list[Path]:
    """The kwok Stage documents that play the kubelet, in a stable order."""
    return sorted(STAGES_DIR.glob("*.yaml"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
