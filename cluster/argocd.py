"""Argo CD, the real one, beside a local control plane.

``LocalArgoCd(cluster).start()`` runs the parts of Argo CD that sync Applications (no API
server, UI, Dex or ApplicationSet controller), as its release manifests would run them in
the cluster, but as local processes:

1. a network namespace of its own (``kubetrain-argocd-<id>``), because the application
   controller's metrics server binds every interface: inside it, ``127.0.0.1`` is private
   to Argo CD, and a socat relay over a unix socket carries the API server's port in, so
   the cluster's own kubeconfig works unchanged there (``ARGOCD_FAKE_IN_CLUSTER`` maps
   the in-cluster destination ``https://kubernetes.default.svc`` to it);
2. Argo CD's Application and AppProject CRDs from its release, the ``argocd`` namespace,
   its ``argocd-cm`` (with the data given to ``start``: kubetrain's health checks),
   ``argocd-secret`` and ``argocd-rbac-cm``, and the ``default`` AppProject that its API
   server (not run) would create;
3. Debian's redis (Argo CD's cache), the repo server (git and kustomize on its PATH) and
   the application controller, each waited for until it answers.

``stop()`` stops the processes and removes the namespace; Argo CD's objects stay in the
cluster (delete the Applications first to remove what they deployed). The logs go to the
cluster's logs directory (``argocd-*.log``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from cluster import host
from cluster.local import ClusterError, LocalCluster
from cluster.process import LocalProcess, ProcessError
from cluster.tools import Tools, find_tools
from kubetrain.manifest import parse_yaml

NAMESPACE = "argocd"
#: Ports inside Argo CD's network namespace (private to it, so fixed).
REDIS_PORT = 6379
REPO_SERVER_PORT = 8081
CONTROLLER_METRICS_PORT = 8082
REPO_SERVER_METRICS_PORT = 8084
#: What runs beside Argo CD's binary, from Debian (``make argocd-packages``).
HOST_COMMANDS = ("redis-server", "redis-cli", "git", "socat", "nsenter", "ip")
#: The processes, in start order (``stop`` goes the other way).
PROCESSES = ("api-relay-host", "api-relay", "redis", "repo-server", "controller")
#: How often the controller refreshes every Application from git (``--app-resync``);
#: Argo CD's default is 120 s, kept short so a commit shows up quickly.
APP_RESYNC_SECONDS = 10


class ArgoCdError(RuntimeError):
    """Argo CD could not be started, configured or stopped."""


def default_project(namespace: str = NAMESPACE) -> dict[str, Any]:
    """The ``default`` AppProject, as Argo CD's API server creates it: any source, any
    destination, any cluster-scoped kind."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AppProject",
        "metadata": {"name": "default", "namespace": namespace},
        "spec": {
            "sourceRepos": ["*"],
            "destinations": [{"server": "*", "namespace": "*"}],
            "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
        },
    }


class LocalArgoCd:
    """Argo CD's application controller and repo server beside ``cluster``."""

    def __init__(self, cluster: LocalCluster, *, tools: Tools | None = None) -> None:
        self.cluster = cluster
        self._tools = tools
        digest = hashlib.sha256(str(cluster.workdir).encode()).hexdigest()[:8]
        self.netns = f"kubetrain-argocd-{digest}"

    @property
    def tools(self) -> Tools:
        if self._tools is None:
            self._tools = find_tools(only=("argocd", "kustomize"))
        return self._tools

    @property
    def workdir(self) -> Path:
        """Argo CD's state: the relay's socket, the repo server's TLS and SSH data."""
        return self.cluster.workdir / "argocd"

    @property
    def api_socket(self) -> Path:
        return self.workdir / "api.sock"

    def process(self, name: str) -> LocalProcess:
        return self.cluster.extra_process(f"argocd-{name}")

    def is_running(self) -> bool:
        return all(self.process(name).is_running() for name in PROCESSES)

    def start(self, *, config: Mapping[str, str] | None = None, timeout: float = 180.0) -> None:
        """Install Argo CD's objects (``config`` added to ``argocd-cm``'s data) and start
        its processes; wait until each answers. Raises ``ArgoCdError`` saying what is
        missing or which process failed, with its log."""
        missing = [name for name in HOST_COMMANDS if shutil.which(name) is None]
        if missing:
            raise ArgoCdError(
                f"{', '.join(missing)} not found on PATH: Argo CD needs redis, git and socat "
                "from Debian (run `make argocd-packages`)"
            )
        if self.is_running():
            raise ArgoCdError(f"Argo CD already runs beside {self.cluster.workdir}: stop it first")
        # Before the deadline starts: under make test, finding the tools may wait for a build.
        _ = self.tools
        deadline = time.monotonic() + timeout
        self.workdir.mkdir(parents=True, exist_ok=True)
        for sub in ("tls", "ssh", "home"):
            (self.workdir / sub).mkdir(exist_ok=True)
        try:
            self._network()
            self._install(dict(config or {}), deadline)
            self._start_relay()
            self._start_redis(deadline)
            self._start_repo_server(deadline)
            self._start_controller(deadline)
        except (ArgoCdError, ProcessError, host.HostError) as err:
            tails = self.log_tails()
            self.stop()
            raise ArgoCdError(f"{err}\n{tails}") from err

    def stop(self) -> bool:
        """Stop the processes and remove the network namespace. Returns whether
        anything was running."""
        was_running = False
        for name in reversed(PROCESSES):
            was_running = self.process(name).stop() or was_running
        if (host.NETNS_DIR / self.netns).exists():
            host.run(["ip", "netns", "delete", self.netns], check=False)
        self.api_socket.unlink(missing_ok=True)
        return was_running

    def delete_applications(self, *, timeout: float = 180.0) -> list[str]:
        """Delete every Application, letting Argo CD remove what each deployed (its
        cascade), and wait up to ``timeout`` seconds. An Application whose cascade did not
        finish keeps Argo CD's finalizer, which nothing removes once Argo CD stops: it is
        taken off. Returns the names of those Applications."""
        self.cluster.kubectl(
            "-n",
            NAMESPACE,
            "delete",
            "applications.argoproj.io",
            "--all",
            "--wait=true",
            f"--timeout={int(timeout)}s",
            check=False,
        )
        left = self.cluster.kubectl(
            "-n", NAMESPACE, "get", "applications.argoproj.io", "-o", "name", check=False
        ).stdout.split()
        for app in left:
            self.cluster.kubectl(
                "-n",
                NAMESPACE,
                "patch",
                app,
                "--type",
                "merge",
                "-p",
                '{"metadata":{"finalizers":null}}',
                check=False,
            )
        return [app.rsplit("/", 1)[-1] for app in left]

    def configure(self, data: Mapping[str, str]) -> None:
        """Merge ``data`` into ``argocd-cm`` (the controller reloads it on change)."""
        patch = yaml.safe_dump({"data": dict(data)})
        self.cluster.kubectl(
            "-n", NAMESPACE, "patch", "configmap", "argocd-cm", "--type", "merge", "-p", patch
        )

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(self.process(name).log_tail(lines) for name in PROCESSES[2:])

    def memory_rss_bytes(self) -> dict[str, int]:
        """RSS of redis, the repo server and the controller, by process name."""
        found: dict[str, int] = {}
        for name in PROCESSES[2:]:
            pid = self.process(name).pid
            if pid is not None:
                found[f"argocd-{name}"] = host.rss_bytes(pid)
        return found

    # Internals ---------------------------------------------------------------------

    def _in_ns(self, args: Sequence[str]) -> list[str]:
        return host.in_netns(self.netns, args)

    def _network(self) -> None:
        if not (host.NETNS_DIR / self.netns).exists():
            host.run(["ip", "netns", "add", self.netns])
        host.run(self._in_ns(["ip", "link", "set", "lo", "up"]))

    def _install(self, config: dict[str, str], deadline: float) -> None:
        tools = self.tools
        for crd in tools.argocd_crds:
            self._kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
        try:
            self.cluster.wait_established(
                ("applications.argoproj.io", "appprojects.argoproj.io"), deadline=deadline
            )
        except ClusterError as err:
            raise ArgoCdError(str(err)) from err
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        objects: list[dict[str, Any]] = [namespace]
        for path in tools.argocd_config:
            obj = parse_yaml(path.read_text(encoding="utf-8"))
            obj["metadata"]["namespace"] = NAMESPACE
            if obj["metadata"]["name"] == "argocd-cm":
                obj["data"] = {**(obj.get("data") or {}), **config}
            objects.append(obj)
        objects.append(default_project())
        self._kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            input=yaml.safe_dump_all(objects, sort_keys=False),
        )

    def _kubectl(self, *args: str, input: str | None = None) -> str:
        result = self.cluster.kubectl(*args, input=input, check=False)
        if result.returncode != 0:
            raise ArgoCdError(
                f"`kubectl {' '.join(args)}` exited with status {result.returncode}, "
                f"expected 0: {result.stderr.strip()}"
            )
        return result.stdout

    def _api_port(self) -> int:
        server = self.cluster.server_url()
        port = server.rsplit(":", 1)[-1].rstrip("/")
        if not port.isdigit():
            raise ArgoCdError(f"API server URL {server!r} has no port: expected https://host:port")
        return int(port)

    def _start_relay(self) -> None:
        port = self._api_port()
        self.api_socket.unlink(missing_ok=True)
        self.process("api-relay-host").start(
            ["socat", f"UNIX-LISTEN:{self.api_socket},fork,mode=600", f"TCP:127.0.0.1:{port}"]
        )
        self.process("api-relay").start(
            self._in_ns(
                [
                    "socat",
                    f"TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr",
                    f"UNIX-CONNECT:{self.api_socket}",
                ]
            )
        )

    def _env(self) -> dict[str, str]:
        bins = [str(self.tools.path("kustomize").parent), "/usr/local/bin", "/usr/bin", "/bin"]
        return {
            "PATH": os.pathsep.join(bins),
            "HOME": str(self.workdir / "home"),
            "KUBECONFIG": str(self.cluster.kubeconfig),
            "ARGOCD_FAKE_IN_CLUSTER": "true",
            "ARGOCD_GPG_ENABLED": "false",
            "ARGOCD_TLS_DATA_PATH": str(self.workdir / "tls"),
            "ARGOCD_SSH_DATA_PATH": str(self.workdir / "ssh"),
        }

    def _start_redis(self, deadline: float) -> None:
        process = self.process("redis")
        process.start(
            self._in_ns(
                [
                    "redis-server",
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    str(REDIS_PORT),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ]
            ),
            cwd=self.workdir,
        )
        self._wait(
            process,
            "redis answering PING",
            ["redis-cli", "-h", "127.0.0.1", "-p", str(REDIS_PORT), "ping"],
            deadline,
        )

    def _start_repo_server(self, deadline: float) -> None:
        process = self.process("repo-server")
        process.start(
            self._in_ns(
                [
                    str(self.tools.path("argocd-repo-server")),
                    "--address",
                    "127.0.0.1",
                    "--port",
                    str(REPO_SERVER_PORT),
                    "--metrics-address",
                    "127.0.0.1",
                    "--metrics-port",
                    str(REPO_SERVER_METRICS_PORT),
                    "--redis",
                    f"127.0.0.1:{REDIS_PORT}",
                    "--disable-tls",
                    "--loglevel",
                    "info",
                ]
            ),
            env=self._env(),
            cwd=self.workdir,
        )
        self._wait_healthy(process, "the repo server", REPO_SERVER_METRICS_PORT, deadline)

    def _start_controller(self, deadline: float) -> None:
        process = self.process("controller")
        process.start(
            self._in_ns(
                [
                    str(self.tools.path("argocd-application-controller")),
                    "--namespace",
                    NAMESPACE,
                    "--repo-server",
                    f"127.0.0.1:{REPO_SERVER_PORT}",
                    "--repo-server-plaintext",
                    "--redis",
                    f"127.0.0.1:{REDIS_PORT}",
                    "--metrics-port",
                    str(CONTROLLER_METRICS_PORT),
                    "--app-resync",
                    str(APP_RESYNC_SECONDS),
                    # Each resource's health in the Application's status (off by default
                    # since Argo CD 3.0, which keeps it in redis only), so kubectl shows
                    # and the tests read what kubetrain's health checks say of each job.
                    "--persist-resource-health",
                    "--loglevel",
                    "info",
                ]
            ),
            env=self._env(),
            cwd=self.workdir,
        )
        self._wait_healthy(process, "the application controller", CONTROLLER_METRICS_PORT, deadline)

    def _wait_healthy(self, process: LocalProcess, what: str, port: int, deadline: float) -> None:
        probe = (
            "import sys, urllib.request\n"
            "with urllib.request.urlopen(sys.argv[1], timeout=2) as r:\n"
            "    sys.exit(0 if r.status == 200 else 1)\n"
        )
        url = f"http://127.0.0.1:{port}/healthz"
        self._wait(process, f"{what} answering {url}", [sys.executable, "-c", probe, url], deadline)

    def _wait(
        self, process: LocalProcess, what: str, probe: Sequence[str], deadline: float
    ) -> None:
        """Run ``probe`` inside the namespace until it exits 0, while ``process`` runs."""
        while True:
            if not process.is_running():
                raise ArgoCdError(
                    f"{process.name} exited (status {process.returncode}) before {what}"
                )
            done = subprocess.run(self._in_ns(probe), capture_output=True, text=True, check=False)
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(nothing)"]
                raise ArgoCdError(f"timed out waiting for {what}; last answer: {last[0]}")
            time.sleep(0.5)
