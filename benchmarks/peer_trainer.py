"""Upstream Kubeflow Trainer v2.3.0 and JobSet v0.12.0 on the local control plane, with
their webhooks, for the peer benchmark's TrainJob pairing (``benchmarks.peers``).

What their release manifests do in a cluster, with the two controller managers as local
processes (upstream's own mains, built by ``make peer-tools``) instead of Deployments:

1. a CA and a serving certificate for 127.0.0.1 (``cluster.kueue``'s, written into the
   work directory): upstream's internal certificate rotation needs a Service and a
   Secret, so it is off (Trainer ``certManagement.enable: false``, JobSet
   ``internalCertManagement.enable: false``). JobSet reads the certificate from the
   ``webhook.certDir`` of its configuration; Trainer's configuration has no such field,
   so its webhook server reads controller-runtime's default directory,
   ``$TMPDIR/k8s-webhook-server/serving-certs``, and its ``TMPDIR`` is set to hold it;
2. upstream's CRDs (TrainJob, TrainingRuntime, ClusterTrainingRuntime, JobSet; JobSet's
   kustomization also enables a conversion webhook on its CRD, left out: the CRD has one
   version, so the API server never converts);
3. each process with upstream's shipped configuration file (``controller_manager_config
   .yaml`` of each module: Trainer's 5 TrainJob workers and QPS/burst 50/100, JobSet's
   500/500), changed only where a local process must differ: webhook, metrics and health
   servers bound to 127.0.0.1 ports, no leader election (one replica, as the other peers
   run), the certificates above; QPS/burst replaced when the benchmark asks for equal
   settings (Trainer's ``clientConnection``, JobSet's ``--kube-api-qps/--kube-api-burst``);
4. once both are ready, their Mutating/ValidatingWebhookConfigurations from the modules'
   manifests and kustomize JSON patches, each webhook's Service replaced by
   ``https://127.0.0.1:<port><path>`` and the CA bundle (JobSet's names carry its
   release's ``jobset-`` prefix), and a proof that the API server calls them (server-side
   dry-run creates of a TrainJob and of a JobSet).

``stop()`` removes the webhook configurations first (they fail closed, and JobSet's pod
webhooks select every pod labelled ``jobset.sigs.k8s.io/jobset-name``, kubetrain's
TrainJob pods included), then stops both processes.

The workload (``benchmarks.peer_workload``) is what the Kubeflow SDK sends against
upstream's ``torch-distributed`` ClusterTrainingRuntime, the same for both operators.
"""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from benchmarks.peer_workload import sdk_trainjob
from cluster.kueue import ServingCertificate, write_serving_certificate
from cluster.process import free_port
from cluster.tools import Tools
from kubetrain.controller.errors import ApiError
from kubetrain.controller.kube import KubeApi, Resource
from kubetrain.manifest import parse_yaml, parse_yaml_all

#: client-go's default user agent starts with the binary's name (Trainer sets none).
TRAINER_USER_AGENT = "trainer-controller-manager/"
#: JobSet sets its own: ``jobset/<version> (<os>/<arch>) <commit>``.
JOBSET_USER_AGENT = "jobset/"
#: The client settings of upstream's shipped configurations (JobSet's: its defaults).
TRAINER_QPS, TRAINER_BURST = 50.0, 100
JOBSET_QPS, JOBSET_BURST = 500.0, 500
#: JobSet's release kustomization prefixes every name with this.
JOBSET_NAME_PREFIX = "jobset-"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
WEBHOOK_RESOURCES = {
    kind: Resource("admissionregistration.k8s.io", "v1", f"{kind.lower()}s", kind, False)
    for kind in WEBHOOK_KINDS
}
TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")
CLUSTER_RUNTIMES = Resource(
    "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", False
)
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")


class PeerError(RuntimeError):
    """Upstream Trainer or JobSet could not be installed, started or reached."""


# Manifests from the modules --------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise PeerError(f"JSON patch path {path!r} does not start with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def json_patch(document: Any, operations: Sequence[Mapping[str, Any]]) -> Any:
    """``document`` with the RFC 6902 ``add``, ``replace`` and ``remove`` ``operations``
    applied (a copy): what kustomize does with a ``patches`` entry whose file is a list."""
    document = copy.deepcopy(document)
    for operation in operations:
        op, parts = operation.get("op"), _pointer(str(operation.get("path", "")))
        if op not in ("add", "replace", "remove"):
            raise PeerError(f"JSON patch operation {op!r}: expected add, replace or remove")
        parent = document
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        value = copy.deepcopy(operation.get("value"))
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if op == "add":
                parent.insert(index, value)
            elif index >= len(parent):
                raise PeerError(f"JSON patch {op} {operation['path']}: no such element")
            elif op == "replace":
                parent[index] = value
            else:
                del parent[index]
        elif op == "add":
            parent[last] = value
        elif last not in parent:
            raise PeerError(f"JSON patch {op} {operation['path']}: no such member")
        elif op == "replace":
            parent[last] = value
        else:
            del parent[last]
    return document


def _targets(obj: Mapping[str, Any], target: Mapping[str, Any]) -> bool:
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    wanted = {
        "group": group,
        "version": version,
        "kind": obj.get("kind"),
        "name": obj.get("metadata", {}).get("name"),
    }
    return all(target[key] == wanted[key] for key in wanted if key in target)


def webhook_configurations(
    webhook_dir: Path, *, base_url: str, ca_bundle: str, name_prefix: str = ""
) -> list[dict[str, Any]]:
    """A module's webhook configurations as its kustomization builds them (the JSON
    patches of ``kustomization.yaml``, in order, on the objects they target), served at
    ``base_url``: each webhook's ``clientConfig.service`` becomes ``url`` = ``base_url``
    + the service's path, with ``caBundle``; ``name_prefix`` is the release's."""
    objects = [
        doc for doc in parse_yaml_all((webhook_dir / "manifests.yaml").read_text("utf-8")) if doc
    ]
    kustomization = parse_yaml((webhook_dir / "kustomization.yaml").read_text("utf-8"))
    for entry in kustomization.get("patches", []):
        if "path" not in entry or "target" not in entry:
            raise PeerError(
                f"{webhook_dir / 'kustomization.yaml'} has the patch {entry}: expected a "
                "path to a JSON patch and a target"
            )
        operations = parse_yaml((webhook_dir / Path(entry["path"]).name).read_text("utf-8"))
        matched = [i for i, obj in enumerate(objects) if _targets(obj, entry["target"])]
        if not matched:
            raise PeerError(f"the patch {entry} targets no object of {webhook_dir}")
        for i in matched:
            objects[i] = json_patch(objects[i], operations)
    for obj in objects:
        obj["metadata"]["name"] = name_prefix + obj["metadata"]["name"]
        for webhook in obj["webhooks"]:
            service = webhook["clientConfig"].get("service") or {}
            if "path" not in service:
                raise PeerError(
                    f"webhook {webhook['name']} of {webhook_dir} has clientConfig "
                    f"{webhook['clientConfig']}: expected a service with a path"
                )
            url = base_url.rstrip("/") + service["path"]
            webhook["clientConfig"] = {"url": url, "caBundle": ca_bundle}
    return objects


def trainer_config(
    shipped: Mapping[str, Any],
    *,
    ports: Mapping[str, int],
    qps: float | None = None,
    burst: int | None = None,
) -> dict[str, Any]:
    """Trainer's shipped configuration for a local process: webhook, metrics and health
    on 127.0.0.1 ``ports``, no leader election, no certificate management; ``qps`` and
    ``burst`` replace ``clientConnection``'s when given."""
    config = copy.deepcopy(dict(shipped))
    config["webhook"] = {**config.get("webhook", {}), "host": "127.0.0.1", "port": ports["webhook"]}
    config["metrics"] = {
        **config.get("metrics", {}),
        "bindAddress": f"127.0.0.1:{ports['metrics']}",
    }
    health = {"healthProbeBindAddress": f"127.0.0.1:{ports['health']}"}
    config["health"] = {**config.get("health", {}), **health}
    config["leaderElection"] = {**config.get("leaderElection", {}), "leaderElect": False}
    config["certManagement"] = {**config.get("certManagement", {}), "enable": False}
    connection = dict(config.get("clientConnection") or {})
    if qps is not None:
        connection["qps"] = qps
    if burst is not None:
        connection["burst"] = burst
    config["clientConnection"] = connection
    return config


def jobset_config(
    shipped: Mapping[str, Any], *, ports: Mapping[str, int], cert_dir: Path
) -> dict[str, Any]:
    """JobSet's shipped configuration for a local process: webhook, metrics and health on
    127.0.0.1 ``ports`` with the certificate in ``cert_dir``, no leader election, no
    internal certificate management (QPS/burst: its flags)."""
    config = copy.deepcopy(dict(shipped))
    config["webhook"] = {"host": "127.0.0.1", "port": ports["webhook"], "certDir": str(cert_dir)}
    config["metrics"] = {"bindAddress": f"127.0.0.1:{ports['metrics']}", "certDir": str(cert_dir)}
    config["health"] = {"healthProbeBindAddress": f"127.0.0.1:{ports['health']}"}
    config["leaderElection"] = {**config.get("leaderElection", {}), "leaderElect": False}
    config["internalCertManagement"] = {"enable": False}
    return config


def upstream_crds(tools: Tools) -> list[dict[str, Any]]:
    """Trainer's CRDs and JobSet's, as their modules ship them."""
    return [
        parse_yaml(path.read_text(encoding="utf-8"))
        for path in (*tools.trainer_crds, tools.jobset_crd)
    ]


# The processes ---------------------------------------------------------------------------


def _probe_jobset(namespace: str) -> dict[str, Any]:
    pod = {"containers": [{"name": "c", "image": "registry.example/probe:1"}]}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "kubetrain-webhook-probe", "namespace": namespace},
        "spec": {
            "replicatedJobs": [{"name": "r", "template": {"spec": {"template": {"spec": pod}}}}]
        },
    }


class UpstreamTrainer:
    """Trainer's and JobSet's controller managers against the cluster ``api`` talks to."""

    def __init__(self, api: KubeApi, kubeconfig: Path, tools: Tools, workdir: Path) -> None:
        self.api = api
        self.kubeconfig = kubeconfig
        self.tools = tools
        self.workdir = workdir
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        #: Each process's log file, by name (``trainer``, ``jobset``).
        self.logs: dict[str, Path] = {}
        self.webhooks: list[tuple[str, str]] = []

    def start(
        self,
        *,
        namespace: str,
        log_prefix: Path,
        qps: float | None,
        burst: int | None,
        timeout: float = 120.0,
    ) -> dict[str, subprocess.Popen[bytes]]:
        """Start both (``qps``/``burst``: None for upstream's), install the webhook
        configurations, and return the processes once the API server calls their
        webhooks; the runtime must be installed. Raises ``PeerError`` with the logs'
        tails when they do not get there within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        tmp = self.workdir / "trainer-tmp"
        serving = write_serving_certificate(tmp / "k8s-webhook-server" / "serving-certs")
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "TMPDIR": str(tmp)}
        trainer_ports = {name: free_port() for name in ("webhook", "metrics", "health")}
        jobset_ports = {name: free_port() for name in ("webhook", "metrics", "health")}
        shipped = parse_yaml(self.tools.trainer_config.read_text(encoding="utf-8"))
        config = trainer_config(shipped, ports=trainer_ports, qps=qps, burst=burst)
        trainer_path = self.workdir / "trainer-config.yaml"
        trainer_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        shipped = parse_yaml(self.tools.jobset_config.read_text(encoding="utf-8"))
        config = jobset_config(shipped, ports=jobset_ports, cert_dir=serving.cert_dir)
        jobset_path = self.workdir / "jobset-config.yaml"
        jobset_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        flags = [] if qps is None else [f"--kube-api-qps={qps:g}"]
        flags += [] if burst is None else [f"--kube-api-burst={burst}"]
        commands = {
            "jobset": [
                str(self.tools.path("jobset-controller-manager")),
                f"--config={jobset_path}",
                *flags,
            ],
            "trainer": [
                str(self.tools.path("trainer-controller-manager")),
                f"--config={trainer_path}",
            ],
        }
        self.logs = {name: Path(f"{log_prefix}-{name}.log") for name in commands}
        for name, command in commands.items():
            with self.logs[name].open("wb") as log:
                self.processes[name] = subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT, env=env
                )
        try:
            self._wait_ready("jobset", jobset_ports["health"], deadline)
            self._wait_ready("trainer", trainer_ports["health"], deadline)
            self._install_webhooks(serving, trainer_ports["webhook"], jobset_ports["webhook"])
            self._wait_admitting(namespace, deadline)
        except BaseException:
            self.stop()
            raise
        return dict(self.processes)

    def _fail(self, message: str) -> PeerError:
        tails = []
        for name, path in self.logs.items():
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-25:]
            tails.append(f"--- {name} ({path}):\n" + "\n".join(lines))
        return PeerError(message + "\n" + "\n".join(tails))

    def _wait_ready(self, name: str, port: int, deadline: float) -> None:
        url = f"http://127.0.0.1:{port}/readyz"
        while True:
            for exited, process in self.processes.items():
                if process.poll() is not None:
                    raise self._fail(f"{exited} exited with status {process.returncode}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise self._fail(f"{name} was not ready at {url} in time")
            time.sleep(0.2)

    def _install_webhooks(self, serving: ServingCertificate, trainer: int, jobset: int) -> None:
        objects = webhook_configurations(
            self.tools.trainer_webhook_dir,
            base_url=f"https://127.0.0.1:{trainer}",
            ca_bundle=serving.ca_bundle,
        ) + webhook_configurations(
            self.tools.jobset_webhook_dir,
            base_url=f"https://127.0.0.1:{jobset}",
            ca_bundle=serving.ca_bundle,
            name_prefix=JOBSET_NAME_PREFIX,
        )
        for obj in objects:
            self.api.apply(obj, resource=WEBHOOK_RESOURCES[obj["kind"]])
            self.webhooks.append((obj["kind"], obj["metadata"]["name"]))

    def _wait_admitting(self, namespace: str, deadline: float) -> None:
        # Server-side dry runs through both servers' webhooks: the API server reaches
        # them with the CA it was given (and Trainer's validator finds the runtime).
        probes = (
            (TRAINJOBS, sdk_trainjob("kubetrain-webhook-probe", namespace)),
            (JOBSETS, _probe_jobset(namespace)),
        )
        for resource, body in probes:
            while True:
                try:
                    self.api.request(
                        "POST", resource.path(namespace), query={"dryRun": "All"}, body=body
                    )
                    break
                except ApiError as err:
                    if time.monotonic() > deadline:
                        raise self._fail(
                            f"the API server could not create a {resource.kind} through the "
                            f"webhooks in time: {err}"
                        ) from err
                    time.sleep(0.2)

    def stop(self) -> None:
        """Remove the webhook configurations, then stop both processes."""
        for kind, name in self.webhooks:
            self.api.delete(WEBHOOK_RESOURCES[kind], None, name)
        self.webhooks = []
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes = {}
