"""Where the Go tools of the local control plane live and which versions they are.

The versions are pinned in one place, the Go modules under ``cluster/tools``; ``make
cluster-tools`` (``cluster/cluster.mk``, which computes the same paths) builds each tool
into a cache directory of its own outside the repository:

- the control plane (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
  etcd, kwok, kwokctl), in a directory named after its versions;
- the scheduler-plugins scheduler and controller, with the PodGroup and ElasticQuota
  CRDs of that release;
- the Kueue controller manager, with Kueue's CRDs, their conversion-webhook patches and
  its webhook manifests, and the CRDs of the Kubeflow projects its integrations watch
  (JobSet, Trainer v2);
- helm;
- Volcano's ``scheduling.volcano.sh`` CRDs, generated from ``volcano.sh/apis`` by
  controller-gen as Volcano's own build does;
- Prometheus and promtool (``cluster/prometheus.py`` runs them);
- dashboard-check, which checks Grafana dashboard JSON against the dashboard schema of
  the Grafana Foundation SDK (no Grafana server can run here);
- the real node's kubelet, kube-proxy and pause (from the control plane's module, in a
  directory of their own) and CoreDNS (``cluster/node.py`` runs them);
- Argo CD (one multicall binary, run as its application controller and repo server), with
  the CRDs of Application and AppProject and its default configuration, and kustomize,
  which the repo server runs (``cluster/argocd.py`` runs them).
- metrics-server (the ``metrics.k8s.io`` API), with the release's kustomize manifests,
  which the control plane runs when it is started with metrics (``cluster/metrics.py``);
- upstream Kubeflow Trainer's end-to-end suite (``test/e2e`` of the pinned Trainer
  module, Ginkgo), compiled unchanged into ``trainer-e2e.test``, which the integration
  tests run against kubetrain's operator.

``make peer-tools`` builds, the same way, the Go operators kubetrain is compared with in
``benchmarks/peers.py`` (not needed by anything else, so not part of ``cluster-tools``):

- Kubeflow training-operator's job controllers, with its CRDs;
- Kubeflow mpi-operator's MPIJob controller, with its CRD;
- Kubeflow Trainer v2's controller manager (upstream's own main), with its CRDs, webhook
  manifests, shipped configuration and default ClusterTrainingRuntimes;
- JobSet's controller manager (upstream's own main; Trainer creates JobSets), with its
  CRD, webhook manifests and shipped configuration.

The other tools' directories are named ``<tool>-<version>-<digest>``, the digest being the
first 12 hex digits of the SHA-256 of the module's ``go.mod`` followed by its ``go.sum``,
so that changing any pin of one tool rebuilds that tool and nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

CLUSTER_DIR = Path(__file__).resolve().parent
TOOL_MODULES_DIR = CLUSTER_DIR / "tools"
KUBE_MODULE = TOOL_MODULES_DIR / "kubernetes"
KWOK_MODULE = TOOL_MODULES_DIR / "kwok"
SCHEDULER_PLUGINS_MODULE = TOOL_MODULES_DIR / "scheduler-plugins"
KUEUE_MODULE = TOOL_MODULES_DIR / "kueue"
HELM_MODULE = TOOL_MODULES_DIR / "helm"
VOLCANO_MODULE = TOOL_MODULES_DIR / "volcano"
TRAINING_OPERATOR_MODULE = TOOL_MODULES_DIR / "training-operator"
MPI_OPERATOR_MODULE = TOOL_MODULES_DIR / "mpi-operator"
TRAINER_MODULE = TOOL_MODULES_DIR / "trainer"
JOBSET_MODULE = TOOL_MODULES_DIR / "jobset"
PROMETHEUS_OPERATOR_MODULE = TOOL_MODULES_DIR / "prometheus-operator"
PROMETHEUS_MODULE = TOOL_MODULES_DIR / "prometheus"
GRAFANA_MODULE = TOOL_MODULES_DIR / "grafana"
COREDNS_MODULE = TOOL_MODULES_DIR / "coredns"
ARGOCD_MODULE = TOOL_MODULES_DIR / "argocd"
KUSTOMIZE_MODULE = TOOL_MODULES_DIR / "kustomize"
METRICS_SERVER_MODULE = TOOL_MODULES_DIR / "metrics-server"

#: Every binary ``make cluster-tools`` builds, by file name, with the tool it belongs to
#: (the ``ToolDirs`` field naming its cache directory).
BINARY_TOOLS = {
    "etcd": "control_plane",
    "kube-apiserver": "control_plane",
    "kube-controller-manager": "control_plane",
    "kube-scheduler": "control_plane",
    "kubectl": "control_plane",
    "kwok": "control_plane",
    "kwokctl": "control_plane",
    "kube-scheduler-plugins": "scheduler_plugins",
    "scheduler-plugins-controller": "scheduler_plugins",
    "kueue": "kueue",
    "helm": "helm",
    "controller-gen": "volcano",
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "dashboard-check": "grafana",
    "kubelet": "node",
    "kube-proxy": "node",
    "pause": "node",
    "coredns": "coredns",
    "argocd": "argocd",
    "argocd-application-controller": "argocd",
    "argocd-repo-server": "argocd",
    "kustomize": "kustomize",
    "trainer-e2e.test": "trainer_e2e",
    "metrics-server": "metrics_server",
    "training-operator": "training_operator",
    "mpi-operator": "mpi_operator",
    "trainer-controller-manager": "trainer",
    "jobset-controller-manager": "jobset",
}
#: Every binary ``make cluster-tools`` builds, by file name.
BINARIES = tuple(BINARY_TOOLS)

#: The CRD file of the scheduler-plugins PodGroup (``scheduling.x-k8s.io/v1alpha1``).
PODGROUP_CRD = "scheduling.x-k8s.io_podgroups.yaml"
#: The CRD file of the scheduler-plugins ElasticQuota (its controller watches it).
ELASTICQUOTA_CRD = "scheduling.x-k8s.io_elasticquotas.yaml"
#: The CRD files of Volcano's PodGroup and Queue (``scheduling.volcano.sh/v1beta1``).
VOLCANO_PODGROUP_CRD = "scheduling.volcano.sh_podgroups.yaml"
VOLCANO_QUEUE_CRD = "scheduling.volcano.sh_queues.yaml"
#: Trainer v2's CRD files (``trainer.kubeflow.org/v1alpha1``), as its module ships them.
TRAINER_CRDS = (
    "trainer.kubeflow.org_clustertrainingruntimes.yaml",
    "trainer.kubeflow.org_trainingruntimes.yaml",
    "trainer.kubeflow.org_trainjobs.yaml",
)
#: JobSet's CRD file (``jobset.x-k8s.io/v1alpha2``).
JOBSET_CRD = "jobset.x-k8s.io_jobsets.yaml"
#: The files of a webhook kustomization ``make peer-tools`` caches, by tool: upstream's
#: manifests, the kustomization naming its patches, and the patches (JSON patches).
TRAINER_WEBHOOK_FILES = (
    "manifests.yaml",
    "kustomization.yaml",
    "patch_mutating.yaml",
    "patch_validating.yaml",
)
JOBSET_WEBHOOK_FILES = (
    "manifests.yaml",
    "kustomization.yaml",
    "mutating-patch.yaml",
    "validating-patch.yaml",
)
#: The shipped configuration file of both controller managers (``config/`` of the cache).
MANAGER_CONFIG = "controller_manager_config.yaml"


class ToolsMissingError(RuntimeError):
    """The Go tools have not been built (run ``make cluster-tools``)."""


def module_version(go_mod: Path, module: str) -> str:
    """Return the version ``go_mod`` requires for ``module``.

    Raises ``ValueError`` naming the file and module when there is no such requirement.
    """
    for raw in go_mod.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("//") or "=>" in line:
            continue
        fields = line.split()
        if fields and fields[0] == "require":
            fields = fields[1:]
        if len(fields) >= 2 and fields[0] == module:
            return fields[1]
    raise ValueError(f"{go_mod} has no requirement on {module}: expected a line '{module} vX.Y.Z'")


def module_digest(module_dir: Path) -> str:
    """First 12 hex digits of the SHA-256 of ``go.mod``, ``go.sum`` and every file under
    ``cmd/`` (sorted by path) in ``module_dir``.

    It changes with any pin of the module, indirect ones included, and with the code of
    the commands kubetrain writes there; cluster/cluster.mk computes the same with
    ``cat go.mod go.sum $(find cmd -type f | sort) | sha256sum``.
    """
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((module_dir / name).read_bytes())
    commands = module_dir / "cmd"
    if commands.is_dir():
        files = sorted(
            (p for p in commands.rglob("*") if p.is_file()),
            key=lambda p: p.relative_to(module_dir).as_posix().encode(),
        )
        for path in files:
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def prometheus_release(module_version: str) -> str:
    """The Prometheus release of a ``github.com/prometheus/prometheus`` module version:
    ``v0.3XX.Y`` is Prometheus ``3.XX.Y`` (cluster/cluster.mk computes the same)."""
    parts = module_version.split(".")
    if len(parts) != 3 or parts[0] != "v0" or not parts[1].isdigit() or len(parts[1]) < 3:
        raise ValueError(
            f"{module_version!r} is not a Prometheus module version: expected v0.MNN.P "
            "(e.g. v0.316.0 for Prometheus 3.16.0)"
        )
    minor = int(parts[1])
    return f"{minor // 100}.{minor % 100}.{parts[2]}"


@dataclass(frozen=True)
class Versions:
    """The pinned versions of the Go tools."""

    kubernetes: str
    etcd: str
    kwok: str
    scheduler_plugins: str
    kueue: str
    helm: str
    volcano_apis: str
    controller_gen: str
    training_operator: str
    mpi_operator: str
    trainer: str
    jobset: str
    #: The Go module's version (``v0.316.0``); ``prometheus_release`` is ``3.16.0``.
    prometheus: str
    grafana_sdk: str
    coredns: str
    argocd: str
    kustomize: str
    metrics_server: str

    @classmethod
    def pinned(cls) -> Versions:
        """Read the versions from the Go modules under ``cluster/tools``."""
        kube_mod = KUBE_MODULE / "go.mod"
        volcano_mod = VOLCANO_MODULE / "go.mod"
        return cls(
            kubernetes=module_version(kube_mod, "k8s.io/kubernetes"),
            etcd=module_version(kube_mod, "go.etcd.io/etcd/server/v3"),
            kwok=module_version(KWOK_MODULE / "go.mod", "sigs.k8s.io/kwok"),
            scheduler_plugins=module_version(
                SCHEDULER_PLUGINS_MODULE / "go.mod", "sigs.k8s.io/scheduler-plugins"
            ),
            kueue=module_version(KUEUE_MODULE / "go.mod", "sigs.k8s.io/kueue"),
            helm=module_version(HELM_MODULE / "go.mod", "helm.sh/helm/v3"),
            volcano_apis=module_version(volcano_mod, "volcano.sh/apis"),
            controller_gen=module_version(volcano_mod, "sigs.k8s.io/controller-tools"),
            training_operator=module_version(
                TRAINING_OPERATOR_MODULE / "go.mod", "github.com/kubeflow/training-operator"
            ),
            mpi_operator=module_version(
                MPI_OPERATOR_MODULE / "go.mod", "github.com/kubeflow/mpi-operator"
            ),
            trainer=module_version(TRAINER_MODULE / "go.mod", "github.com/kubeflow/trainer/v2"),
            jobset=module_version(JOBSET_MODULE / "go.mod", "sigs.k8s.io/jobset"),
            prometheus=module_version(
                PROMETHEUS_MODULE / "go.mod", "github.com/prometheus/prometheus"
            ),
            grafana_sdk=module_version(
                GRAFANA_MODULE / "go.mod", "github.com/grafana/grafana-foundation-sdk/go"
            ),
            coredns=module_version(COREDNS_MODULE / "go.mod", "github.com/coredns/coredns"),
            argocd=module_version(ARGOCD_MODULE / "go.mod", "github.com/argoproj/argo-cd/v3"),
            kustomize=module_version(
                KUSTOMIZE_MODULE / "go.mod", "sigs.k8s.io/kustomize/kustomize/v5"
            ),
            metrics_server=module_version(
                METRICS_SERVER_MODULE / "go.mod", "sigs.k8s.io/metrics-server"
            ),
        )

    @property
    def prometheus_release(self) -> str:
        """The Prometheus release (``3.16.0``), as ``prometheus --version`` reports it."""
        return prometheus_release(self.prometheus)

    @property
    def cache_key(self) -> str:
        """The control plane's cache directory name; cluster/cluster.mk builds the same."""
        return f"kubernetes-{self.kubernetes}_etcd-{self.etcd}_kwok-{self.kwok}"


def cache_root() -> Path:
    """``$KUBETRAIN_CACHE``, or ``~/.cache/kubetrain`` as in the Makefile."""
    configured = os.environ.get("KUBETRAIN_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "kubetrain"


def tools_dir(versions: Versions | None = None) -> Path:
    """The directory ``make cluster-tools`` builds the control plane into."""
    configured = os.environ.get("KUBETRAIN_CLUSTER_TOOLS_DIR")
    if configured:
        return Path(configured)
    return cache_root() / "cluster-tools" / (versions or Versions.pinned()).cache_key


@dataclass(frozen=True)
class ToolDirs:
    """The cache directory of each tool."""

    control_plane: Path
    scheduler_plugins: Path
    kueue: Path
    helm: Path
    volcano: Path
    training_operator: Path
    mpi_operator: Path
    prometheus: Path
    grafana: Path
    trainer: Path
    jobset: Path
    node: Path
    coredns: Path
    argocd: Path
    kustomize: Path
    trainer_e2e: Path
    metrics_server: Path

    @classmethod
    def for_versions(cls, versions: Versions) -> ToolDirs:
        """The directories ``make cluster-tools`` builds ``versions`` into."""
        root = cache_root() / "cluster-tools"
        return cls(
            control_plane=tools_dir(versions),
            scheduler_plugins=root
            / (
                f"scheduler-plugins-{versions.scheduler_plugins}-"
                f"{module_digest(SCHEDULER_PLUGINS_MODULE)}"
            ),
            kueue=root / f"kueue-{versions.kueue}-{module_digest(KUEUE_MODULE)}",
            helm=root / f"helm-{versions.helm}-{module_digest(HELM_MODULE)}",
            volcano=root / f"volcano-{versions.volcano_apis}-{module_digest(VOLCANO_MODULE)}",
            training_operator=root
            / (
                f"training-operator-{versions.training_operator}-"
                f"{module_digest(TRAINING_OPERATOR_MODULE)}"
            ),
            mpi_operator=root
            / f"mpi-operator-{versions.mpi_operator}-{module_digest(MPI_OPERATOR_MODULE)}",
            prometheus=root
            / f"prometheus-{versions.prometheus}-{module_digest(PROMETHEUS_MODULE)}",
            grafana=root / f"grafana-{versions.grafana_sdk}-{module_digest(GRAFANA_MODULE)}",
            trainer=root / f"trainer-{versions.trainer}-{module_digest(TRAINER_MODULE)}",
            jobset=root / f"jobset-{versions.jobset}-{module_digest(JOBSET_MODULE)}",
            node=root / f"node-{versions.kubernetes}-{module_digest(KUBE_MODULE)}",
            coredns=root / f"coredns-{versions.coredns}-{module_digest(COREDNS_MODULE)}",
            argocd=root / f"argocd-{versions.argocd}-{module_digest(ARGOCD_MODULE)}",
            kustomize=root / f"kustomize-{versions.kustomize}-{module_digest(KUSTOMIZE_MODULE)}",
            trainer_e2e=root / f"trainer-e2e-{versions.trainer}-{module_digest(TRAINER_MODULE)}",
            metrics_server=root
            / (f"metrics-server-{versions.metrics_server}-{module_digest(METRICS_SERVER_MODULE)}"),
        )

    def by_tool(self) -> dict[str, Path]:
        """Every directory by tool name, as ``make cluster-tool-dirs`` prints them."""
        return {
            "control-plane": self.control_plane,
            "scheduler-plugins": self.scheduler_plugins,
            "kueue": self.kueue,
            "helm": self.helm,
            "volcano": self.volcano,
            "prometheus": self.prometheus,
            "grafana": self.grafana,
            "node": self.node,
            "coredns": self.coredns,
            "argocd": self.argocd,
            "kustomize": self.kustomize,
            "trainer-e2e": self.trainer_e2e,
            "metrics-server": self.metrics_server,
            "training-operator": self.training_operator,
            "mpi-operator": self.mpi_operator,
            "trainer": self.trainer,
            "jobset": self.jobset,
        }


@dataclass(frozen=True)
class Tools:
    """Paths of the built Go tools and of the upstream files cached beside them."""

    versions: Versions
    dirs: ToolDirs

    @property
    def bin_dir(self) -> Path:
        """The control plane's binary directory."""
        return self.dirs.control_plane / "bin"

    def path(self, name: str) -> Path:
        """The path of binary ``name`` (one of ``BINARIES``)."""
        tool = BINARY_TOOLS.get(name)
        if tool is None:
            raise ValueError(f"unknown binary {name!r}: expected one of {', '.join(BINARIES)}")
        tool_dir: Path = getattr(self.dirs, tool)
        return tool_dir / "bin" / name

    @property
    def kubectl(self) -> Path:
        return self.path("kubectl")

    @property
    def kwokctl(self) -> Path:
        return self.path("kwokctl")

    @property
    def helm(self) -> Path:
        return self.path("helm")

    @property
    def kueue(self) -> Path:
        """The Kueue controller manager."""
        return self.path("kueue")

    @property
    def scheduler_plugins(self) -> Path:
        """The scheduler-plugins kube-scheduler (coscheduling and the other plugins)."""
        return self.path("kube-scheduler-plugins")

    @property
    def scheduler_plugins_controller(self) -> Path:
        """The scheduler-plugins controller (PodGroup and ElasticQuota status)."""
        return self.path("scheduler-plugins-controller")

    @property
    def prometheus(self) -> Path:
        return self.path("prometheus")

    @property
    def promtool(self) -> Path:
        return self.path("promtool")

    @property
    def metrics_server(self) -> Path:
        """metrics-server (the ``metrics.k8s.io`` API; ``cluster/metrics.py``)."""
        return self.path("metrics-server")

    @property
    def metrics_server_manifests(self) -> Path:
        """metrics-server's release kustomization (APIService, Service, RBAC and the
        Deployment kwokctl drops), as its module ships it."""
        return self.dirs.metrics_server / "manifests" / "overlays" / "release"

    @property
    def dashboard_check(self) -> Path:
        """kubetrain's Grafana dashboard checker (cluster/tools/grafana)."""
        return self.path("dashboard-check")

    # Upstream files ------------------------------------------------------------------

    @property
    def podgroup_crd(self) -> Path:
        """scheduler-plugins' PodGroup CRD (``scheduling.x-k8s.io/v1alpha1``)."""
        return self.dirs.scheduler_plugins / "crds" / PODGROUP_CRD

    @property
    def elasticquota_crd(self) -> Path:
        """scheduler-plugins' ElasticQuota CRD (its controller watches it)."""
        return self.dirs.scheduler_plugins / "crds" / ELASTICQUOTA_CRD

    @property
    def volcano_podgroup_crd(self) -> Path:
        """Volcano's PodGroup CRD (``scheduling.volcano.sh/v1beta1``)."""
        return self.dirs.volcano / "crds" / VOLCANO_PODGROUP_CRD

    @property
    def volcano_queue_crd(self) -> Path:
        """Volcano's Queue CRD (``scheduling.volcano.sh/v1beta1``)."""
        return self.dirs.volcano / "crds" / VOLCANO_QUEUE_CRD

    @property
    def kueue_crds(self) -> list[Path]:
        """Kueue's own CRDs (``kueue.x-k8s.io``), as its module ships them."""
        return sorted((self.dirs.kueue / "crds").glob("*.yaml"))

    @property
    def kueue_crd_patches_dir(self) -> Path:
        """Kueue's CRD patches (conversion webhook) and the kustomization naming them."""
        return self.dirs.kueue / "crds" / "patches"

    @property
    def kueue_webhook_dir(self) -> Path:
        """Kueue's webhook manifests, the kustomization that patches them, and the
        release's top-level kustomization (``default-kustomization.yaml``: namespace and
        name prefix)."""
        return self.dirs.kueue / "webhook"

    @property
    def kueue_dependency_crds(self) -> list[Path]:
        """CRDs of the projects Kueue's Kubeflow integrations build on, from the module
        versions Kueue pins: JobSet, and Trainer v2's TrainJob and training runtimes."""
        return sorted((self.dirs.kueue / "crds" / "deps").glob("*.yaml"))

    @property
    def training_operator_crds(self) -> Path:
        """training-operator's CRDs (``kubeflow.org_<kind>s.yaml``), from its module."""
        return self.dirs.training_operator / "crds"

    @property
    def mpi_operator_crd(self) -> Path:
        """mpi-operator's MPIJob CRD (``kubeflow.org/v2beta1``), from its module."""
        return self.dirs.mpi_operator / "crds" / "kubeflow.org_mpijobs.yaml"

    @property
    def trainer_crds(self) -> list[Path]:
        """Trainer v2's CRDs (TrainJob, TrainingRuntime, ClusterTrainingRuntime)."""
        return [self.dirs.trainer / "crds" / name for name in TRAINER_CRDS]

    @property
    def trainer_webhook_dir(self) -> Path:
        """Trainer's webhook manifests with their kustomization and JSON patches."""
        return self.dirs.trainer / "webhook"

    @property
    def trainer_config(self) -> Path:
        """Trainer's shipped controller manager configuration."""
        return self.dirs.trainer / "config" / MANAGER_CONFIG

    @property
    def trainer_runtimes_dir(self) -> Path:
        """Trainer's default ClusterTrainingRuntimes (``<name>_distributed.yaml``)."""
        return self.dirs.trainer / "runtimes"

    @property
    def jobset_crd(self) -> Path:
        """JobSet's CRD (``jobset.x-k8s.io/v1alpha2``)."""
        return self.dirs.jobset / "crds" / JOBSET_CRD

    @property
    def jobset_webhook_dir(self) -> Path:
        """JobSet's webhook manifests with their kustomization and JSON patches."""
        return self.dirs.jobset / "webhook"

    @property
    def jobset_config(self) -> Path:
        """JobSet's shipped controller manager configuration."""
        return self.dirs.jobset / "config" / MANAGER_CONFIG

    @property
    def argocd_crds(self) -> list[Path]:
        """Argo CD's Application and AppProject CRDs, as its release ships them."""
        crds = self.dirs.argocd / "manifests" / "crds"
        return [crds / "application-crd.yaml", crds / "appproject-crd.yaml"]

    @property
    def argocd_config(self) -> list[Path]:
        """Argo CD's default ``argocd-cm``, ``argocd-secret`` and ``argocd-rbac-cm``."""
        config = self.dirs.argocd / "manifests" / "config"
        return [
            config / f"{name}.yaml" for name in ("argocd-cm", "argocd-secret", "argocd-rbac-cm")
        ]

    def crd_files(self) -> list[Path]:
        """Every upstream CRD file ``make cluster-tools`` caches."""
        return [
            self.podgroup_crd,
            self.elasticquota_crd,
            self.volcano_podgroup_crd,
            self.volcano_queue_crd,
            *self.kueue_crds,
            *self.kueue_dependency_crds,
        ]

    # Versions as the binaries report them --------------------------------------------

    def kubectl_version(self) -> str:
        """``kubectl version --client`` as reported by the binary (e.g. ``v1.34.4``)."""
        out = _output([str(self.kubectl), "version", "--client", "-o", "json"])
        version: str = json.loads(out)["clientVersion"]["gitVersion"]
        return version

    def helm_version(self) -> str:
        """``helm version`` as reported by the binary (e.g. ``v3.19.5``)."""
        return _output([str(self.helm), "version", "--template", "{{.Version}}"]).strip()


def _output(args: list[str]) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


#: The tools ``make cluster-tools`` builds, by the names ``ToolDirs.by_tool`` uses.
TOOL_NAMES = (
    "control-plane",
    "scheduler-plugins",
    "kueue",
    "helm",
    "volcano",
    "prometheus",
    "grafana",
    "node",
    "coredns",
    "argocd",
    "kustomize",
    "trainer-e2e",
    "metrics-server",
)
#: The Go operators ``make peer-tools`` builds for the peer benchmark.
PEER_TOOL_NAMES = ("training-operator", "mpi-operator", "trainer", "jobset")


def _tool_files(tools: Tools, tool: str) -> list[Path]:
    """The files ``make cluster-tools`` leaves in ``tool``'s directory, binaries first."""
    field = tool.replace("-", "_")
    files = [tools.path(name) for name, owner in BINARY_TOOLS.items() if owner == field]
    if tool == "scheduler-plugins":
        files += [tools.podgroup_crd, tools.elasticquota_crd]
    elif tool == "volcano":
        files += [tools.volcano_podgroup_crd, tools.volcano_queue_crd]
    elif tool == "kueue":
        files += [
            tools.kueue_webhook_dir / "manifests.yaml",
            tools.kueue_webhook_dir / "kustomization.yaml",
            tools.kueue_webhook_dir / "default-kustomization.yaml",
            tools.kueue_crd_patches_dir / "kustomization.yaml",
        ]
    elif tool == "training-operator":
        files.append(tools.training_operator_crds / "kubeflow.org_pytorchjobs.yaml")
    elif tool == "mpi-operator":
        files.append(tools.mpi_operator_crd)
    elif tool == "trainer":
        files += tools.trainer_crds
        files += [tools.trainer_webhook_dir / name for name in TRAINER_WEBHOOK_FILES]
        files += [tools.trainer_config, tools.trainer_runtimes_dir / "torch_distributed.yaml"]
    elif tool == "argocd":
        files += tools.argocd_crds + tools.argocd_config
    elif tool == "metrics-server":
        files.append(tools.metrics_server_manifests / "kustomization.yaml")
    elif tool == "jobset":
        files.append(tools.jobset_crd)
        files += [tools.jobset_webhook_dir / name for name in JOBSET_WEBHOOK_FILES]
        files.append(tools.jobset_config)
    return files


#: Set by the test runner (``tests/tiers.py``) while its set-up builds the Go tools beside
#: the tests: a file that says ``building``, then ``done`` or ``failed``. While it says
#: ``building``, ``find_tools`` waits for a missing tool instead of failing.
BUILDING_ENV = "KUBETRAIN_TOOLS_BUILDING"
#: How often a waiting ``find_tools`` looks again, and says it still waits.
BUILD_POLL_SECONDS = 2.0
BUILD_SAY_SECONDS = 60.0


def build_status() -> str | None:
    """What the runner's Go set-up says (``building``, ``done``, ``failed``), or ``None``
    when no runner builds beside this process."""
    status_file = os.environ.get(BUILDING_ENV)
    if not status_file:
        return None
    try:
        return Path(status_file).read_text(encoding="utf-8").strip() or "building"
    except OSError:
        return None


def _missing_files(tools: Tools, wanted: Sequence[str]) -> list[str]:
    missing: list[str] = []
    for tool in wanted:
        for path in _tool_files(tools, tool):
            is_binary = path.parent.name == "bin"
            if not (os.access(path, os.X_OK) if is_binary else path.is_file()):
                missing.append(str(path))
    if "kueue" in wanted:
        if not tools.kueue_crds:
            missing.append(f"{tools.dirs.kueue / 'crds'}/*.yaml")
        if not tools.kueue_dependency_crds:
            missing.append(f"{tools.dirs.kueue / 'crds' / 'deps'}/*.yaml")
    return missing


def _wait_for_build(tools: Tools, wanted: Sequence[str], missing: list[str]) -> list[str]:
    """While the runner's set-up is still building (``BUILDING_ENV``), wait for the
    missing files to appear; return what is still missing once it stopped building."""
    began = time.monotonic()
    said = began - BUILD_SAY_SECONDS
    while missing and build_status() == "building":
        if time.monotonic() - said >= BUILD_SAY_SECONDS:
            said = time.monotonic()
            waited = round(said - began)
            print(
                f"kubetrain: waiting {waited} s so far for {', '.join(wanted)} "
                f"({len(missing)} file(s) missing): make test builds them beside the tests",
                file=sys.stderr,
                flush=True,
            )
        time.sleep(BUILD_POLL_SECONDS)
        missing = _missing_files(tools, wanted)
    return missing


def find_tools(versions: Versions | None = None, *, only: Iterable[str] = TOOL_NAMES) -> Tools:
    """Locate the built tools, or raise ``ToolsMissingError`` saying how to build them.

    ``only`` limits the check to some of ``TOOL_NAMES`` (stopping a control plane needs
    kwokctl, not helm) or names ``PEER_TOOL_NAMES`` (built by ``make peer-tools``); the
    returned ``Tools`` names every tool's paths either way. While ``make test``'s set-up
    builds the Go tools beside the tests (``BUILDING_ENV``), a missing tool is waited
    for rather than reported.
    """
    versions = versions or Versions.pinned()
    tools = Tools(versions=versions, dirs=ToolDirs.for_versions(versions))
    wanted = list(only)
    known = TOOL_NAMES + PEER_TOOL_NAMES
    unknown = sorted(set(wanted) - set(known))
    if unknown:
        raise ValueError(f"unknown tools {', '.join(unknown)}: expected some of {', '.join(known)}")
    missing = _missing_files(tools, wanted)
    if missing and not set(wanted) <= set(PEER_TOOL_NAMES):
        missing = _wait_for_build(tools, wanted, missing)
    if missing and set(wanted) <= set(PEER_TOOL_NAMES):
        raise ToolsMissingError(
            f"{len(missing)} file(s) missing from the peer operators' cache: "
            f"{', '.join(missing)}; expected training-operator {versions.training_operator}, "
            f"mpi-operator {versions.mpi_operator}, Trainer {versions.trainer} and JobSet "
            f"{versions.jobset}. Run `make peer-tools` to build them."
        )
    if missing:
        raise ToolsMissingError(
            f"{len(missing)} file(s) missing from the Go tools' cache: {', '.join(missing)}; "
            f"expected the tools {', '.join(wanted)} built from Kubernetes "
            f"{versions.kubernetes}, etcd {versions.etcd}, kwok {versions.kwok}, "
            f"scheduler-plugins {versions.scheduler_plugins}, Kueue {versions.kueue}, "
            f"helm {versions.helm}, Volcano APIs {versions.volcano_apis}, Prometheus "
            f"{versions.prometheus_release} ({versions.prometheus}), grafana-foundation-sdk "
            f"{versions.grafana_sdk}, CoreDNS {versions.coredns}, Argo CD {versions.argocd}, "
            f"kustomize {versions.kustomize}, Trainer's e2e suite {versions.trainer}, "
            f"metrics-server {versions.metrics_server}. "
            "Run `make cluster-tools` to build them."
            + (
                " (make test's set-up, which was building them, failed: see its log, "
                "build/test-results/setup-go.log)"
                if build_status() == "failed"
                else ""
            )
        )
    return tools


def kueue_module_crds() -> list[Path]:
    """Kueue's own CRD files (``kueue.x-k8s.io``) as the pinned module ships them, from
    the Go module cache: a download through the module proxy, nothing built (``make
    kueue-crds``; ``make cluster-tools`` copies the same files for Kueue itself).
    ``tests/schema_bundle.py`` copies the schemas the unit tier checks against from
    them."""
    version = module_version(KUEUE_MODULE / "go.mod", "sigs.k8s.io/kueue")
    module = _module_cache_dir("sigs.k8s.io/kueue", version, "make kueue-crds")
    crds = sorted((module / "config" / "components" / "crd" / "bases").glob("*.yaml"))
    if not crds:
        raise ToolsMissingError(f"the Kueue module in {module} ships no CRD files")
    return crds


def prometheus_operator_crds() -> list[Path]:
    """The Prometheus Operator's CRD files (``monitoring.coreos.com``: ServiceMonitor,
    PrometheusRule, ...) of the pinned release, from the Go module cache: a download
    through the module proxy, nothing built (``make monitoring-crds``).
    ``tests/schema_bundle.py`` copies the schemas the unit tier checks against from
    them."""
    module_path = "github.com/prometheus-operator/prometheus-operator"
    version = module_version(PROMETHEUS_OPERATOR_MODULE / "go.mod", module_path)
    module = _module_cache_dir(module_path, version, "make monitoring-crds")
    crds = sorted((module / "example" / "prometheus-operator-crd").glob("*.yaml"))
    if not crds:
        raise ToolsMissingError(f"the Prometheus Operator module in {module} ships no CRD files")
    return crds


def _module_cache_dir(module_path: str, version: str, make_target: str) -> Path:
    """Where Go's module cache holds ``module_path@version`` (downloading it if needed)."""
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    found = subprocess.run(
        ["go", "mod", "download", "-json", f"{module_path}@{version}"],
        # Outside any module: the download leaves the tools modules' go.sum alone.
        cwd=tempfile.gettempdir(),
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise ToolsMissingError(
            f"cannot download the module {module_path}@{version}: "
            f"{(found.stderr or found.stdout).strip()[-500:]}; run `{make_target}`"
        )
    return Path(json.loads(found.stdout)["Dir"])
