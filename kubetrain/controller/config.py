"""The operator's typed configuration: defined once, rendered to command-line flags by the
``TrainingOperator`` construct and parsed back by ``kubetrain operator``, so the two
cannot drift (a test round-trips every field through the flags)."""

from __future__ import annotations

import argparse
import ipaddress
import re
from dataclasses import dataclass, fields
from enum import StrEnum

from kubetrain.api import keys as K
from kubetrain.api.kinds import OPERATOR_KINDS

# Re-exported: what the generator checks a GPU pool's node health signals with.
from kubetrain.controller.node_rules import NodeRules as NodeRules

#: The kinds the operator can reconcile: the Kubeflow v1 jobs and Trainer v2's TrainJob.
JOB_KINDS = tuple(OPERATOR_KINDS)
#: Namespaces a cluster-wide operator leaves alone unless told otherwise: no training job
#: belongs there, and the operator must never write into them.
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


class LogLevel(StrEnum):
    """How much the operator logs."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class GangScheduler(StrEnum):
    """Gang-scheduling backend; ``none`` schedules pods one by one."""

    NONE = "none"
    VOLCANO = "volcano"
    SCHEDULER_PLUGINS = "scheduler-plugins"


@dataclass(frozen=True, kw_only=True)
class OperatorConfig:
    """Everything ``kubetrain operator`` can be told on its command line.

    Defaults are what a single-replica, cluster-wide install needs.
    """

    kinds: tuple[str, ...] = JOB_KINDS
    """Job kinds to reconcile (and to request RBAC for): the v1 job kinds and TrainJob,
    every kind of the kinds table. Default: all of them."""
    namespaces: tuple[str, ...] = ()
    """Namespaces to watch. Default: empty, meaning every namespace (ClusterRole)."""
    exclude_namespaces: tuple[str, ...] = SYSTEM_NAMESPACES
    """Namespaces a cluster-wide operator never watches or writes to (its informers
    leave them out on the server side; the ``TrainingOperator`` construct adds its own
    namespace and a ValidatingAdmissionPolicy that denies the operator's writes there).
    Default: kube-system, kube-public, kube-node-lease."""
    workers: int = 4
    """Reconcile worker threads."""
    kube_api_qps: float = 20.0
    """Client-side rate limit for API requests per second."""
    kube_api_burst: int = 40
    """Burst above ``kube_api_qps``."""
    leader_elect: bool = False
    """Take a Lease before acting; required (and set by the construct) with replicas > 1."""
    leader_election_id: str = "kubetrain-operator"
    """Name of the Lease."""
    metrics_port: int = 8080
    """Port of the Prometheus ``/metrics`` endpoint."""
    metrics_bind_address: str = "0.0.0.0"
    """Address ``/metrics`` listens on. Default: every address (the pod's IP); use
    127.0.0.1 for a process on a workstation."""
    health_port: int = 8081
    """Port of ``/healthz`` and ``/readyz``."""
    health_bind_address: str = "0.0.0.0"
    """Address the health endpoints listen on (the kubelet probes the pod's IP)."""
    gang_scheduler: GangScheduler = GangScheduler.NONE
    """Gang scheduler whose PodGroups the operator creates: ``none``, ``scheduler-plugins``
    (the Coscheduling plugin) or ``volcano``. The operator refuses to start when the
    backend's PodGroup CRD is not installed."""
    gang_scheduler_name: str = ""
    """The ``schedulerName`` gang-scheduled pods get (unless their template names one).
    Default: the backend's own, ``scheduler-plugins-scheduler`` or ``volcano``; e.g.
    ``default-scheduler`` where scheduler-plugins replaces kube-scheduler."""
    startup_timeout_seconds: int = 600
    """How long a launcher/master waits for its workers to be Ready before the job fails."""
    success_grace_seconds: int = 60
    """With ``cleanPodPolicy`` unset: how long ranks still running after their job
    succeeded may take to exit by themselves before they are deleted."""
    progress_timeout_seconds: int = 0
    """Hang detection (0: off): a job silent this long after a report restarts."""
    progress_startup_timeout_seconds: int = 0
    """The same before a job's first report (0: off)."""
    event_qps: float = 50.0
    """Events per second the operator records at most (bursts of 10x), on a rate limit of
    their own beside ``kube_api_qps``: Events never crowd out reconciles."""
    log_level: LogLevel = LogLevel.INFO
    """Lowest level of the log lines the operator writes: debug, info, warning, error."""
    progress_server: bool = True
    """Serve progress reports (the Kubeflow SDK's ``update_trainjob_status``) over HTTPS
    and give jobs' pods what they need to send them (upstream's ``TrainJobStatus``)."""
    progress_port: int = 10443
    """Port of the progress server."""
    progress_bind_address: str = "0.0.0.0"
    """Address the progress server listens on (pods reach it through a Service)."""
    progress_host: str = ""
    """Host name (or IP) trainer pods reach the progress server at, in their
    ``KUBEFLOW_TRAINER_SERVER_URL`` and the certificate's names. Default:
    ``kubetrain-progress.<the operator's namespace>.svc``."""
    progress_secret: str = "kubetrain-progress-tls"
    """Secret (in the operator's namespace) holding the progress server's CA and
    certificate, which the operator creates and renews."""
    progress_api_qps: float = 50.0
    """Client-side rate limit of the progress server's own API client (each report is a
    write; a new token adds a TokenReview and a pod read), apart from ``kube_api_qps``."""
    progress_api_burst: int = 100
    """Burst above ``progress_api_qps``."""
    node_lost_grace_seconds: int = K.DEFAULT_NODE_LOST_GRACE_SECONDS
    """How long a node may be NotReady or unreachable before the pods of jobs on it are
    moved (a job's ``kubetrain.dev/node-lost-grace-seconds`` overrides it). Nodes are
    watched by a cluster-wide operator only."""
    force_delete_lost_pods: bool = False
    """Force-delete (grace period 0) the pods of a job stuck Terminating on a node that is
    lost, so the job restarts without waiting for it (a job's
    ``kubetrain.dev/safe-to-forcefully-delete`` overrides it). Off by default: a node that
    is only partitioned still runs the old process (docs/operator.md, "Lost nodes")."""
    unhealthy_node_conditions: tuple[str, ...] = K.DEFAULT_UNHEALTHY_NODE_CONDITIONS
    """Node condition types that, when True, make a node unhealthy for training: its
    jobs' pods are moved at once. Default: node-problem-detector's KernelDeadlock and
    ReadonlyFilesystem, NVIDIA NVSentinel's SysLogsXIDError, SysLogsSXIDError and
    SysLogsGPUFallenOff."""
    unhealthy_node_taints: tuple[str, ...] = ()
    """Taint keys that make a node unhealthy for training (e.g. the taint a GPU health
    system puts on a quarantined node). Default: none."""

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in JOB_KINDS]
        if unknown or not self.kinds:
            raise ValueError(
                f"kinds ({', '.join(self.kinds) or 'empty'}) must be a non-empty subset of "
                f"{', '.join(JOB_KINDS)}"
            )
        if len(set(self.kinds)) != len(self.kinds):
            raise ValueError(f"kinds ({', '.join(self.kinds)}) lists a kind twice")
        for name in ("namespaces", "exclude_namespaces"):
            bad = [n for n in getattr(self, name) if not _DNS1123.match(n) or len(n) > 63]
            if bad:
                raise ValueError(f"{name} ({', '.join(bad)}) must be DNS-1123 labels")
        if len(set(self.namespaces)) != len(self.namespaces):
            raise ValueError(f"namespaces ({', '.join(self.namespaces)}) lists one twice")
        both = sorted(set(self.namespaces) & set(self.exclude_namespaces))
        if both:
            raise ValueError(
                f"namespaces and exclude_namespaces both name {', '.join(both)}: a watched "
                "namespace cannot be excluded (drop it from one of them)"
            )
        for name in ("metrics_bind_address", "health_bind_address", "progress_bind_address"):
            address = getattr(self, name)
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise ValueError(
                    f"{name} ({address!r}) must be an IP address, e.g. 0.0.0.0 (every "
                    "address) or 127.0.0.1 (this machine only)"
                ) from None
        if not 1 <= self.workers <= 64:
            raise ValueError(f"workers ({self.workers}) must be between 1 and 64")
        for name in ("kube_api_qps", "progress_api_qps", "event_qps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} ({getattr(self, name)}) must be > 0")
        for name in ("kube_api_burst", "progress_api_burst"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} ({getattr(self, name)}) must be >= 1")
        for name in ("metrics_port", "health_port", "progress_port"):
            port = getattr(self, name)
            if not 1024 <= port <= 65535:
                raise ValueError(f"{name} ({port}) must be between 1024 and 65535 (non-root)")
        ports = (self.metrics_port, self.health_port, self.progress_port)
        if len(set(ports)) != len(ports):
            raise ValueError(
                f"metrics_port, health_port and progress_port ({', '.join(map(str, ports))}) "
                "must differ"
            )
        if self.progress_host and not (
            _DNS1123_SUBDOMAIN.match(self.progress_host) or _is_ip(self.progress_host)
        ):
            raise ValueError(
                f"progress_host ({self.progress_host!r}) must be a DNS name (e.g. "
                "kubetrain-progress.kubetrain-system.svc) or an IP address"
            )
        if not _DNS1123_SUBDOMAIN.match(self.progress_secret) or len(self.progress_secret) > 253:
            raise ValueError(
                f"progress_secret ({self.progress_secret!r}) must be a Secret name (a DNS-1123 "
                "subdomain)"
            )
        if not _DNS1123.match(self.leader_election_id):
            raise ValueError(
                f"leader_election_id ({self.leader_election_id!r}) must be a DNS-1123 label"
            )
        if self.gang_scheduler_name and (
            not _DNS1123_SUBDOMAIN.match(self.gang_scheduler_name)
            or len(self.gang_scheduler_name) > 253
        ):
            raise ValueError(
                f"gang_scheduler_name ({self.gang_scheduler_name!r}) must be a scheduler name "
                "(a DNS-1123 subdomain, e.g. scheduler-plugins-scheduler)"
            )
        if self.gang_scheduler_name and self.gang_scheduler is GangScheduler.NONE:
            raise ValueError(
                f"gang_scheduler_name ({self.gang_scheduler_name}) needs a gang_scheduler "
                "(scheduler-plugins or volcano); it is none"
            )
        if self.startup_timeout_seconds < 1:
            raise ValueError(
                f"startup_timeout_seconds ({self.startup_timeout_seconds}) must be >= 1"
            )
        for name in ("progress_timeout_seconds", "progress_startup_timeout_seconds"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} ({getattr(self, name)}) must be >= 0 (0: off)")
        if self.success_grace_seconds < 0:
            raise ValueError(
                f"success_grace_seconds ({self.success_grace_seconds}) must be >= 0 "
                "(0 deletes ranks still running as soon as the job succeeded)"
            )
        self.node_rules  # noqa: B018 (it checks the node fields)

    @property
    def cluster_wide(self) -> bool:
        return not self.namespaces

    @property
    def node_rules(self) -> NodeRules:
        """The rules for lost and unhealthy nodes (``node_health``)."""
        return NodeRules(
            grace_seconds=self.node_lost_grace_seconds,
            force_delete=self.force_delete_lost_pods,
            conditions=self.unhealthy_node_conditions,
            taints=self.unhealthy_node_taints,
        )

    def to_args(self) -> list[str]:
        """Command-line flags for every field, in a fixed order (deterministic manifests)."""
        args = [f"--kinds={','.join(self.kinds)}"]
        args += [f"--namespace={n}" for n in self.namespaces]
        args += [
            f"--exclude-namespaces={','.join(self.exclude_namespaces)}",
            f"--workers={self.workers}",
            f"--kube-api-qps={self.kube_api_qps:g}",
            f"--kube-api-burst={self.kube_api_burst}",
            f"--leader-elect={'true' if self.leader_elect else 'false'}",
            f"--leader-election-id={self.leader_election_id}",
            f"--metrics-port={self.metrics_port}",
            f"--metrics-bind-address={self.metrics_bind_address}",
            f"--health-port={self.health_port}",
            f"--health-bind-address={self.health_bind_address}",
            f"--gang-scheduler={self.gang_scheduler.value}",
            f"--startup-timeout-seconds={self.startup_timeout_seconds}",
            f"--success-grace-seconds={self.success_grace_seconds}",
            f"--progress-timeout-seconds={self.progress_timeout_seconds}",
            f"--progress-startup-timeout-seconds={self.progress_startup_timeout_seconds}",
            f"--event-qps={self.event_qps:g}",
            f"--log-level={self.log_level.value}",
            f"--progress-server={'true' if self.progress_server else 'false'}",
            f"--progress-port={self.progress_port}",
            f"--progress-bind-address={self.progress_bind_address}",
            f"--progress-secret={self.progress_secret}",
            f"--progress-api-qps={self.progress_api_qps:g}",
            f"--progress-api-burst={self.progress_api_burst}",
            f"--node-lost-grace-seconds={self.node_lost_grace_seconds}",
            f"--force-delete-lost-pods={'true' if self.force_delete_lost_pods else 'false'}",
            f"--unhealthy-node-conditions={','.join(self.unhealthy_node_conditions)}",
            f"--unhealthy-node-taints={','.join(self.unhealthy_node_taints)}",
        ]
        if self.progress_host:
            args.append(f"--progress-host={self.progress_host}")
        if self.gang_scheduler_name:
            args.append(f"--gang-scheduler-name={self.gang_scheduler_name}")
        return args

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Declare the flags ``to_args`` renders."""
        d = cls()
        parser.add_argument(
            "--kinds",
            default=",".join(d.kinds),
            help=f"comma-separated job kinds (default: {','.join(d.kinds)})",
        )
        parser.add_argument(
            "--namespace",
            action="append",
            dest="namespaces",
            default=[],
            help="namespace to watch (repeatable; default: all namespaces)",
        )
        parser.add_argument(
            "--exclude-namespaces",
            default=",".join(d.exclude_namespaces),
            help="comma-separated namespaces a cluster-wide operator leaves alone "
            f"(default: {','.join(d.exclude_namespaces)}; empty for none)",
        )
        parser.add_argument("--workers", type=int, default=d.workers)
        parser.add_argument("--kube-api-qps", type=float, default=d.kube_api_qps)
        parser.add_argument("--kube-api-burst", type=int, default=d.kube_api_burst)
        parser.add_argument(
            "--leader-elect", type=_parse_bool, default=d.leader_elect, metavar="true|false"
        )
        parser.add_argument("--leader-election-id", default=d.leader_election_id)
        parser.add_argument("--metrics-port", type=int, default=d.metrics_port)
        parser.add_argument("--metrics-bind-address", default=d.metrics_bind_address)
        parser.add_argument("--health-port", type=int, default=d.health_port)
        parser.add_argument("--health-bind-address", default=d.health_bind_address)
        parser.add_argument(
            "--gang-scheduler",
            default=d.gang_scheduler.value,
            choices=[g.value for g in GangScheduler],
        )
        parser.add_argument(
            "--gang-scheduler-name",
            default=d.gang_scheduler_name,
            help="schedulerName of gang-scheduled pods (default: the backend's own)",
        )
        for seconds in (
            "startup_timeout_seconds",
            "success_grace_seconds",
            "progress_timeout_seconds",
            "progress_startup_timeout_seconds",
        ):
            flag = "--" + seconds.replace("_", "-")
            parser.add_argument(flag, type=int, default=getattr(d, seconds))
        parser.add_argument("--event-qps", type=float, default=d.event_qps)
        parser.add_argument(
            "--log-level", default=d.log_level.value, choices=[level.value for level in LogLevel]
        )
        parser.add_argument(
            "--progress-server",
            type=_parse_bool,
            default=d.progress_server,
            metavar="true|false",
            help="serve the SDK's progress reports for TrainJobs (default: true)",
        )
        parser.add_argument("--progress-port", type=int, default=d.progress_port)
        parser.add_argument("--progress-bind-address", default=d.progress_bind_address)
        parser.add_argument(
            "--progress-host",
            default=d.progress_host,
            help="host trainer pods reach the progress server at "
            "(default: kubetrain-progress.<namespace>.svc)",
        )
        parser.add_argument("--progress-secret", default=d.progress_secret)
        parser.add_argument("--progress-api-qps", type=float, default=d.progress_api_qps)
        parser.add_argument("--progress-api-burst", type=int, default=d.progress_api_burst)
        parser.add_argument(
            "--node-lost-grace-seconds", type=int, default=d.node_lost_grace_seconds
        )
        parser.add_argument(
            "--force-delete-lost-pods",
            type=_parse_bool,
            default=d.force_delete_lost_pods,
            metavar="true|false",
            help="force-delete pods stuck Terminating on lost nodes (default: false)",
        )
        parser.add_argument(
            "--unhealthy-node-conditions",
            default=",".join(d.unhealthy_node_conditions),
            help="comma-separated node condition types that, True, make a node unhealthy "
            f"(default: {','.join(d.unhealthy_node_conditions)})",
        )
        parser.add_argument(
            "--unhealthy-node-taints",
            default=",".join(d.unhealthy_node_taints),
            help="comma-separated taint keys that make a node unhealthy (default: none)",
        )

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> OperatorConfig:
        """Build a config from parsed flags (raises ValueError naming a bad value)."""
        return cls(
            kinds=tuple(k.strip() for k in args.kinds.split(",") if k.strip()),
            namespaces=tuple(args.namespaces),
            exclude_namespaces=tuple(
                n.strip() for n in args.exclude_namespaces.split(",") if n.strip()
            ),
            workers=args.workers,
            kube_api_qps=args.kube_api_qps,
            kube_api_burst=args.kube_api_burst,
            leader_elect=args.leader_elect,
            leader_election_id=args.leader_election_id,
            metrics_port=args.metrics_port,
            metrics_bind_address=args.metrics_bind_address,
            health_port=args.health_port,
            health_bind_address=args.health_bind_address,
            gang_scheduler=GangScheduler(args.gang_scheduler),
            gang_scheduler_name=args.gang_scheduler_name,
            startup_timeout_seconds=args.startup_timeout_seconds,
            success_grace_seconds=args.success_grace_seconds,
            progress_timeout_seconds=args.progress_timeout_seconds,
            progress_startup_timeout_seconds=args.progress_startup_timeout_seconds,
            event_qps=args.event_qps,
            log_level=LogLevel(args.log_level),
            progress_server=args.progress_server,
            progress_port=args.progress_port,
            progress_bind_address=args.progress_bind_address,
            progress_host=args.progress_host,
            progress_secret=args.progress_secret,
            progress_api_qps=args.progress_api_qps,
            progress_api_burst=args.progress_api_burst,
            node_lost_grace_seconds=args.node_lost_grace_seconds,
            force_delete_lost_pods=args.force_delete_lost_pods,
            unhealthy_node_conditions=_csv(args.unhealthy_node_conditions),
            unhealthy_node_taints=_csv(args.unhealthy_node_taints),
        )

    @classmethod
    def from_args(cls, argv: list[str]) -> OperatorConfig:
        parser = argparse.ArgumentParser(prog="kubetrain operator", exit_on_error=False)
        cls.add_arguments(parser)
        return cls.from_namespace(parser.parse_args(argv))


def config_field_names() -> list[str]:
    return [f.name for f in fields(OperatorConfig)]


def _csv(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean: use true or false")
