"""Kueue, the real one, beside a local control plane.

``Kueue(cluster).start()`` does what Kueue's release manifests do in a cluster, with the
controller manager as a local process instead of a Deployment:

1. writes a CA and a serving certificate for 127.0.0.1 into its work directory (Kueue's
   internal certificate management, which needs a Service, is off);
2. installs Kueue's CRDs from its module, with the conversion webhook its
   kustomization enables on some of them pointing at ``https://127.0.0.1:<port>/convert``;
3. writes Kueue's configuration file and starts the controller manager (webhooks, metrics
   and health probes on 127.0.0.1 ports, leader election off, the on-demand visibility
   API server off because it would listen on every interface) and waits until it is ready.
   Without internal certificate management Kueue reads its metrics serving certificate
   from ``/etc/kueue/metrics/certs``, a fixed path its Deployment mounts a Secret at; the
   process runs in a mount namespace of its own (``unshare``) where an overlay on ``/etc``
   holds the work directory's certificate at that path, so nothing on the machine changes;
4. installs Kueue's Mutating/ValidatingWebhookConfigurations, generated from the
   manifests and kustomize patches of its module with every webhook's service replaced
   by the URL of the local process and the CA bundle, and checks that the API server
   really calls them.

``stop()`` removes the webhook configurations first (they fail closed, so a stopped Kueue
would otherwise block creating pods and Jobs), then stops the process; the CRDs and
Kueue's objects stay. The log goes to ``kueue.log`` in the cluster's logs directory, so it
is kept and printed with the other component logs.
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
import os
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cluster.local import ClusterError, LocalCluster
from cluster.process import ProcessError, free_port, wait_http_ok
from cluster.tools import Tools, find_tools
from kubetrain.controller.status_tls import issue_ca, issue_serving
from kubetrain.manifest import parse_yaml, parse_yaml_all

#: The integrations kubetrain's jobs use: batch Jobs (MPI launchers, and the plain Job
#: that proves a setup works) and Kubeflow's v1 training jobs.
DEFAULT_INTEGRATIONS = (
    "batch/job",
    "kubeflow.org/mpijob",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
)
#: Kubeflow Trainer v2's TrainJob: enabled when its CRD is installed (see ``Kueue``).
TRAINJOB_INTEGRATION = "trainer.kubeflow.org/trainjob"
TRAINJOB_CRD = "trainjobs.trainer.kubeflow.org"
#: What Kueue's TrainJob integration needs besides the TrainJob CRD: it indexes Trainer's
#: runtimes at start (and exits without their CRDs), and its controller watches the
#: JobSets upstream Trainer creates (and Kueue exits when that watch cannot sync, 2
#: minutes later).
TRAINER_RUNTIME_CRDS = (
    "clustertrainingruntimes.trainer.kubeflow.org",
    "trainingruntimes.trainer.kubeflow.org",
)
JOBSET_CRD = "jobsets.jobset.x-k8s.io"
#: The label that puts a job into a LocalQueue.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
#: Kueue features that are on by default but cannot run here as a local process:
#: VisibilityOnDemand starts an aggregated API server on 0.0.0.0:8082 with certificates
#: from /visibility (a path in Kueue's container image).
DISABLED_FEATURES = {"VisibilityOnDemand": False}
PROCESS_NAME = "kueue"
#: Where Kueue's manager reads its metrics serving certificate when its internal
#: certificate management is off (a path its Deployment mounts a Secret at).
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")


class KueueError(ClusterError):
    """Kueue could not be installed, started, reached or stopped."""


# Certificates ------------------------------------------------------------------------


@dataclass(frozen=True)
class ServingCertificate:
    """Where a serving certificate was written, and its CA in PEM form."""

    cert_dir: Path
    ca_pem: bytes

    @property
    def ca_bundle(self) -> str:
        """The CA as webhook and CRD ``clientConfig.caBundle`` expect it (base64 PEM)."""
        return base64.b64encode(self.ca_pem).decode("ascii")

    @property
    def cert_file(self) -> Path:
        return self.cert_dir / "tls.crt"

    @property
    def key_file(self) -> Path:
        return self.cert_dir / "tls.key"

    @property
    def ca_file(self) -> Path:
        return self.cert_dir / "ca.crt"


def write_serving_certificate(
    cert_dir: Path,
    *,
    ip_addresses: Sequence[str] = ("127.0.0.1",),
    dns_names: Sequence[str] = ("localhost",),
    valid_for: datetime.timedelta = datetime.timedelta(days=30),
) -> ServingCertificate:
    """Write a new self-signed CA and a serving certificate it signed into ``cert_dir``.

    Files: ``ca.crt``, ``tls.crt`` and ``tls.key`` (the names controller-runtime's webhook
    server reads). The serving certificate names ``ip_addresses`` and ``dns_names``.
    """
    if not ip_addresses and not dns_names:
        raise ValueError("a serving certificate needs at least one IP address or DNS name")
    # The operator's certificate issuer (its progress server's): ECDSA P-256, back-dated
    # five minutes (the API server's clock is this machine's, but not to the second).
    now = datetime.datetime.now(datetime.UTC)
    days = max(1, valid_for.days)
    ca_pem_text, ca_key = issue_ca(now, days=days, name="kubetrain local Kueue CA")
    cert_pem, key_pem = issue_serving(
        ca_pem_text, ca_key, [*ip_addresses, *dns_names], now, days=days
    )
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca_pem = ca_pem_text.encode()
    serving = ServingCertificate(cert_dir=cert_dir, ca_pem=ca_pem)
    serving.ca_file.write_bytes(ca_pem)
    serving.cert_file.write_text(cert_pem)
    serving.key_file.touch(mode=0o600)
    serving.key_file.write_text(key_pem)
    serving.key_file.chmod(0o600)
    return serving


# Manifests from Kueue's module --------------------------------------------------------


def _documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in parse_yaml_all(text) if doc]


def _kustomization(path: Path) -> dict[str, Any]:
    document = parse_yaml(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise KueueError(f"{path} is not a kustomization: expected a YAML mapping")
    return document


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def _merge_webhooks(target: dict[str, Any], patch: Mapping[str, Any], source: Path) -> None:
    # Strategic merge of an admissionregistration object: webhooks merge by name.
    by_name = {webhook["name"]: webhook for webhook in target.get("webhooks", [])}
    for webhook_patch in patch.get("webhooks", []):
        webhook = by_name.get(webhook_patch["name"])
        if webhook is None:
            raise KueueError(
                f"{source} patches webhook {webhook_patch['name']!r} of {target['kind']} "
                f"{target['metadata']['name']}, which does not have it: expected one of "
                f"{', '.join(sorted(by_name))}"
            )
        webhook.update({k: copy.deepcopy(v) for k, v in webhook_patch.items() if k != "name"})


def _client_config(base_url: str, path: str, ca_bundle: str) -> dict[str, str]:
    return {"url": f"{base_url.rstrip('/')}{path}", "caBundle": ca_bundle}


def webhook_configurations(
    webhook_dir: Path, *, base_url: str, ca_bundle: str, name_prefix: str = ""
) -> list[dict[str, Any]]:
    """Kueue's webhook configurations as its kustomization builds them, served at
    ``base_url`` instead of by a Service.

    ``webhook_dir`` holds the module's ``manifests.yaml`` and ``kustomization.yaml``
    (whose inline patches add namespace selectors); each webhook's
    ``clientConfig.service`` becomes ``url`` = ``base_url`` + the service's path, with
    ``caBundle``. ``name_prefix`` is the release's ``namePrefix`` (``kueue-``).
    """
    manifests = webhook_dir / "manifests.yaml"
    objects = {_key(obj): obj for obj in _documents(manifests.read_text(encoding="utf-8"))}
    kustomization_path = webhook_dir / "kustomization.yaml"
    for entry in _kustomization(kustomization_path).get("patches", []):
        if "patch" not in entry:
            raise KueueError(
                f"{kustomization_path} has a patch without inline content ({entry}): "
                "expected `patch:` documents only, as Kueue's releases have"
            )
        for patch in _documents(entry["patch"]):
            target = objects.get(_key(patch))
            if target is None:
                raise KueueError(
                    f"{kustomization_path} patches {patch['kind']} {patch['metadata']['name']}, "
                    f"which {manifests} does not define"
                )
            _merge_webhooks(target, patch, kustomization_path)
    out = []
    for obj in objects.values():
        obj = copy.deepcopy(obj)
        obj["metadata"]["name"] = name_prefix + obj["metadata"]["name"]
        for webhook in obj["webhooks"]:
            service = webhook["clientConfig"].get("service")
            if not service or "path" not in service:
                raise KueueError(
                    f"webhook {webhook['name']} in {manifests} has clientConfig "
                    f"{webhook['clientConfig']}: expected a service with a path"
                )
            webhook["clientConfig"] = _client_config(base_url, service["path"], ca_bundle)
        out.append(obj)
    return out


def crd_manifests(
    crd_files: Iterable[Path], patches_dir: Path, *, base_url: str, ca_bundle: str
) -> list[dict[str, Any]]:
    """Kueue's CRDs with the conversion webhooks its CRD kustomization enables
    (``patches_dir``: the module's ``config/components/crd`` patches and
    ``kustomization.yaml``) pointing at ``base_url`` with ``ca_bundle``."""
    crds = {
        obj["metadata"]["name"]: obj
        for path in crd_files
        for obj in _documents(path.read_text(encoding="utf-8"))
    }
    kustomization_path = patches_dir / "kustomization.yaml"
    for entry in _kustomization(kustomization_path).get("patches", []):
        patch_path = patches_dir / Path(entry["path"]).name
        for patch in _documents(patch_path.read_text(encoding="utf-8")):
            crd = crds.get(patch["metadata"]["name"])
            if crd is None:
                raise KueueError(
                    f"{patch_path} patches CRD {patch['metadata']['name']}, which is not "
                    f"among Kueue's CRDs: {', '.join(sorted(crds))}"
                )
            conversion = copy.deepcopy(patch["spec"]["conversion"])
            webhook = conversion.get("webhook", {})
            service = webhook.get("clientConfig", {}).get("service", {})
            if "path" not in service:
                raise KueueError(
                    f"{patch_path} sets conversion {conversion}: expected a webhook "
                    "clientConfig with a service path"
                )
            webhook["clientConfig"] = _client_config(base_url, service["path"], ca_bundle)
            crd["spec"]["conversion"] = conversion
    return [crds[name] for name in sorted(crds)]


def release_layout(tools: Tools) -> tuple[str, str]:
    """The ``namespace`` and ``namePrefix`` of Kueue's release kustomization."""
    default = _kustomization(tools.kueue_webhook_dir / "default-kustomization.yaml")
    return str(default["namespace"]), str(default.get("namePrefix", ""))


def check_trainjob_crds(served: Iterable[str]) -> None:
    """Raise ``KueueError`` unless the CRDs Kueue's TrainJob integration needs at start
    (TrainJob, TrainingRuntime, ClusterTrainingRuntime) are among ``served``."""
    names = set(served)
    missing = [name for name in (TRAINJOB_CRD, *TRAINER_RUNTIME_CRDS) if name not in names]
    if missing:
        raise KueueError(
            f"Kueue's {TRAINJOB_INTEGRATION} integration needs the CRDs {TRAINJOB_CRD}, "
            f"{', '.join(TRAINER_RUNTIME_CRDS)} installed (it indexes the runtimes at start "
            f"and exits without them); missing: {', '.join(missing)}. Install them first, "
            "or leave the integration out"
        )


def kueue_config(
    *,
    namespace: str,
    webhook_port: int,
    metrics_port: int,
    health_port: int,
    cert_dir: Path,
    integrations: Sequence[str],
) -> dict[str, Any]:
    """Kueue's configuration file (``config.kueue.x-k8s.io/v1beta2``) for a local process:
    everything it serves on 127.0.0.1, certificates from ``cert_dir``, no leader election."""
    if not integrations:
        raise ValueError("Kueue needs at least one integration: e.g. ('batch/job',)")
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": namespace,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "featureGates": dict(DISABLED_FEATURES),
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": list(integrations)},
    }


# The process --------------------------------------------------------------------------


class Kueue:
    """The Kueue controller manager running against ``cluster``.

    ``integrations`` defaults to ``DEFAULT_INTEGRATIONS``, plus ``TRAINJOB_INTEGRATION``
    when the TrainJob CRD is installed at start. For an integration whose kind is not
    served yet Kueue registers the webhooks and defers the controller, polling for the
    kind with a back-off of up to 2 minutes: install the job CRDs before ``start()``.
    The TrainJob integration also needs Trainer's runtime CRDs (``start()`` fails
    without them, as Kueue would) and the JobSet CRD (installed from the JobSet release
    Kueue pins when missing; no JobSet controller runs).
    """

    def __init__(
        self,
        cluster: LocalCluster,
        *,
        integrations: Sequence[str] | None = None,
        tools: Tools | None = None,
    ) -> None:
        self.cluster = cluster
        self._integrations = tuple(integrations) if integrations is not None else None
        self._tools = tools
        self.process = cluster.extra_process(PROCESS_NAME)

    @property
    def tools(self) -> Tools:
        if self._tools is None:
            self._tools = find_tools(only=("control-plane", "kueue"))
        return self._tools

    @property
    def workdir(self) -> Path:
        return self.cluster.workdir / "kueue"

    @property
    def cert_dir(self) -> Path:
        return self.workdir / "certs"

    @property
    def config_path(self) -> Path:
        return self.workdir / "config.yaml"

    @property
    def state_path(self) -> Path:
        """Ports and objects of the running instance (read by ``stop()`` and ``usage()``)."""
        return self.workdir / "state.json"

    @property
    def log_file(self) -> Path:
        return self.process.log_file

    def is_running(self) -> bool:
        return self.process.is_running()

    def state(self) -> dict[str, Any]:
        """What ``start()`` recorded: ports, integrations, webhook configuration names."""
        try:
            state: dict[str, Any] = json.loads(self.state_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return state

    def _crd_exists(self, name: str) -> bool:
        return self.cluster.kubectl("get", "crd", name, "-o", "name", check=False).returncode == 0

    def _resolve_integrations(self, deadline: float) -> tuple[str, ...]:
        if self._integrations is not None:
            integrations = self._integrations
        elif self._crd_exists(TRAINJOB_CRD):
            integrations = (*DEFAULT_INTEGRATIONS, TRAINJOB_INTEGRATION)
        else:
            integrations = DEFAULT_INTEGRATIONS
        if TRAINJOB_INTEGRATION in integrations:
            self._prepare_trainjob(deadline)
        return integrations

    def _prepare_trainjob(self, deadline: float) -> None:
        check_trainjob_crds(
            name for name in (TRAINJOB_CRD, *TRAINER_RUNTIME_CRDS) if self._crd_exists(name)
        )
        if not self._crd_exists(JOBSET_CRD):
            # Nothing creates JobSets here; the CRD only lets Kueue's watch on them sync.
            jobset = [
                p for p in self.tools.kueue_dependency_crds if JOBSET_CRD.split(".")[0] in p.name
            ]
            self.cluster.install_crds(jobset, deadline=deadline)

    def start(self, *, timeout: float = 120.0) -> None:
        """Install Kueue into the cluster and run it; return once its webhooks admit.

        Raises ``KueueError`` with Kueue's log tail when it does not get ready within
        ``timeout`` seconds, or exits.
        """
        if self.is_running():
            raise KueueError(
                f"Kueue already runs against {self.cluster.workdir} (pid {self.process.pid}): "
                "stop it first (make kueue-down)"
            )
        if not self.cluster.is_running():
            raise KueueError(
                f"no control plane runs in {self.cluster.workdir}: start it first (make cluster-up)"
            )
        # Before the deadline starts: under make test, finding the tools may wait for a build.
        tools = self.tools
        deadline = time.monotonic() + timeout
        integrations = self._resolve_integrations(deadline)
        namespace, name_prefix = release_layout(tools)
        ports = {"webhook": free_port(), "metrics": free_port(), "health": free_port()}
        base_url = f"https://127.0.0.1:{ports['webhook']}"
        serving = write_serving_certificate(self.cert_dir)
        self.cluster.kubectl(
            "apply", "--server-side", "-f", "-", input=json.dumps(_namespace(namespace))
        )
        crds = crd_manifests(
            tools.kueue_crds,
            tools.kueue_crd_patches_dir,
            base_url=base_url,
            ca_bundle=serving.ca_bundle,
        )
        self._apply(crds)
        self._wait_established([crd["metadata"]["name"] for crd in crds], deadline)
        config = kueue_config(
            namespace=namespace,
            webhook_port=ports["webhook"],
            metrics_port=ports["metrics"],
            health_port=ports["health"],
            cert_dir=serving.cert_dir,
            integrations=integrations,
        )
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        webhooks = webhook_configurations(
            tools.kueue_webhook_dir,
            base_url=base_url,
            ca_bundle=serving.ca_bundle,
            name_prefix=name_prefix,
        )
        self.state_path.write_text(
            json.dumps(
                {
                    "ports": ports,
                    "integrations": list(integrations),
                    "webhook_configurations": [
                        [webhook["kind"], webhook["metadata"]["name"]] for webhook in webhooks
                    ],
                    "ca_file": str(serving.ca_file),
                },
                indent=2,
            ),
            encoding="utf-8",
        )
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        command = [str(tools.kueue), f"--config={self.config_path}"]
        try:
            self.process.start(self._with_metrics_certificate(serving, command), env=env)
        except ProcessError as err:
            raise KueueError(str(err)) from err
        try:
            self._wait_ready(ports["health"], deadline)
            # Only now: the configurations fail closed, and Kueue is there to answer them.
            self._apply(webhooks)
            self._wait_admitting(deadline)
        except BaseException:
            # Nothing half-started is left behind (make kueue-up exits with the error).
            self.stop()
            raise

    def _wait_established(self, names: Sequence[str], deadline: float) -> None:
        try:
            self.cluster.wait_established(names, deadline=deadline)
        except ClusterError as err:
            raise KueueError(f"Kueue's CRDs were not Established in time: {err}") from err

    def _with_metrics_certificate(
        self, serving: ServingCertificate, command: Sequence[str]
    ) -> list[str]:
        """``command`` run where ``/etc/kueue/metrics/certs`` holds ``serving``'s files.

        A private mount namespace (a user namespace too when not root) with an overlay
        on ``/etc`` whose upper layer, in the work directory, has the certificate at the
        path Kueue reads; ``exec`` keeps the pid, so the pid file names Kueue itself.
        """
        overlay = self.workdir / "etc-overlay"
        shutil.rmtree(overlay, ignore_errors=True)
        certs = overlay / "upper" / METRICS_CERT_DIR.relative_to("/etc")
        certs.mkdir(parents=True)
        (overlay / "work").mkdir()
        shutil.copyfile(serving.cert_file, certs / "tls.crt")
        shutil.copyfile(serving.key_file, certs / "tls.key")
        unshare = shutil.which("unshare")
        if unshare is None:
            raise KueueError(
                "`unshare` (util-linux) is not on PATH: Kueue needs it to find its metrics "
                f"certificate at {METRICS_CERT_DIR} without writing to /etc"
            )
        namespaces = ["--mount"] if os.geteuid() == 0 else ["--user", "--map-root-user", "--mount"]
        mount = (
            "mount -t overlay overlay "
            f"-o lowerdir=/etc,upperdir={overlay / 'upper'},workdir={overlay / 'work'} /etc"
        )
        return [unshare, *namespaces, "--", "sh", "-c", f'{mount} && exec "$@"', "sh", *command]

    def _apply(self, objects: Sequence[dict[str, Any]]) -> None:
        self.cluster.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=kubetrain-kueue",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}),
        )

    def _fail(self, message: str) -> KueueError:
        return KueueError(f"{message}\n{self.process.log_tail(60)}")

    def _wait_ready(self, health_port: int, deadline: float) -> None:
        wait_http_ok(
            self.process, "Kueue", f"http://127.0.0.1:{health_port}/readyz", deadline, self._fail
        )

    def _wait_admitting(self, deadline: float) -> None:
        # A dry-run create of a v1beta2 ClusterQueue goes through Kueue's mutating and
        # validating webhooks and, stored as v1beta1, its conversion webhook: proof that
        # the API server reaches Kueue with the CA it was given.
        probe = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "kubetrain-kueue-readiness-probe"},
            "spec": {"namespaceSelector": {}},
        }
        while True:
            result = self.cluster.kubectl(
                "create", "--dry-run=server", "-o", "json", "-f", "-",
                input=json.dumps(probe), check=False,
            )  # fmt: skip
            if result.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise self._fail(
                    f"the API server could not reach Kueue's webhooks in time: "
                    f"{result.stderr.strip()}"
                )
            time.sleep(0.2)

    def stop(self) -> bool:
        """Remove the webhook configurations and stop the process; return whether it ran.

        The configurations go first: they fail closed, so pods and Jobs could not be
        created while they point at a Kueue that is gone.
        """
        for kind, name in self.state().get("webhook_configurations", []):
            self.cluster.kubectl("delete", kind, name, "--ignore-not-found", check=False)
        try:
            return self.process.stop()
        except ProcessError as err:
            raise KueueError(str(err)) from err

    def usage(self) -> str:
        """How to use the running Kueue, for people."""
        state = self.state()
        return (
            f"Kueue {self.tools.versions.kueue} runs against {self.cluster.server_url()} "
            f"(pid {self.process.pid})\n"
            f"  integrations: {', '.join(state.get('integrations', []))}\n"
            f"  webhooks: https://127.0.0.1:{state.get('ports', {}).get('webhook')} "
            f"(CA {state.get('ca_file')})\n"
            f"  label a job {QUEUE_NAME_LABEL}=<LocalQueue> to queue it\n"
            f"  log: {self.log_file}\n"
            f"  stop it with: python -m cluster --workdir {self.cluster.workdir} kueue down"
            " (make kueue-down for the default work directory)"
        )


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
