"""One real node beside kwok's fake ones: containerd, the kubelet, kube-proxy and CoreDNS.

Every daemon runs in a network namespace of its own (``kubetrain-<hash>``), joined to the
host by a veth pair: ``NodeNetwork.host_ip`` on the host side, ``node_ip`` (the Node's
InternalIP) inside. Pods sit on a bridge inside that namespace. The API server binds
127.0.0.1 on the host, which the namespace cannot reach, so a forwarder relays it: a
socat inside the namespace listens on ``node_ip:<API server port>`` and connects to a
unix socket in the node's directory, where a socat on the host connects on to
127.0.0.1. The API server advertises ``node_ip``, so the ``kubernetes`` Service's
endpoint is that forwarder and pods reach the API server at its ClusterIP through
kube-proxy (the serving certificate names the ClusterIP and ``node_ip``).

All state lives under ``<cluster workdir>/node``. What the kubelet and containerd change
elsewhere (kernel settings, fixed directories, cgroups, the namespace and veth) is
recorded before the first change and undone by ``down()`` (see ``cluster.host``).
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from cluster import host
from cluster.host import in_netns, run
from cluster.node_config import (
    CLUSTER_DOMAIN,
    KUBERNETES_SERVICE_IP,
    NODE_NAME,
    PAUSE_IMAGE,
    REAL_NODE_LABEL,
    NodeNetwork,
    cni_config,
    containerd_config,
    coredns_rbac,
    corefile,
    issue_certificate,
    kube_proxy_config,
    kubeconfig,
    kubelet_config,
)
from cluster.node_images import NodeImages
from cluster.node_store import NodeStore
from cluster.oci import ImageFiles
from cluster.process import LocalProcess, ProcessError
from cluster.tools import Tools, ToolsMissingError

CNI_BIN_DIR = Path("/usr/lib/cni")
#: Host commands the node needs, from the Debian packages ``make node-packages`` installs.
HOST_COMMANDS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "socat", "nsenter",
                 "ip", "iptables", "conntrack", "umount")  # fmt: skip
#: The node's daemons in start order (``down`` stops them in reverse).
DAEMONS = ("api-forwarder-host", "api-forwarder-node", "containerd", "kubelet", "coredns",
           "kube-proxy")  # fmt: skip

COREDNS_USER = "kubetrain:coredns"
#: The host-side veth of a real node: ``kt`` and the tag of its directory.
VETH_RE = re.compile(r"kt([0-9a-f]{8})")

log = logging.getLogger(__name__)


def node_tag(root: Path) -> str:
    """The tag naming a node's namespace, veth and cgroup root: from its directory."""
    return hashlib.sha256(str(root).encode()).hexdigest()[:8]


class NodeError(RuntimeError):
    """The real node could not be started or stopped."""


class RealNode:
    """The real node of the cluster whose work directory is ``cluster_workdir``."""

    def __init__(
        self,
        cluster_workdir: Path,
        *,
        tools: Tools,
        network: NodeNetwork | None = None,
        store: NodeStore | None = None,
    ) -> None:
        self.root = cluster_workdir.resolve() / "node"
        self.tools = tools
        self.network = network or NodeNetwork()
        #: containerd's root kept across nodes (``cluster.node_store``); ``None``: the
        #: machine's default one, claimed in ``up``.
        self._store = store
        self.name = NODE_NAME
        tag = node_tag(self.root)
        #: The network namespace (``/run/netns/<netns>``), host-side veth and cgroup root.
        self.netns = f"kubetrain-{tag}"
        self.veth = f"kt{tag}"
        self.cgroup_root = f"kubetrain-{tag}"

    # Paths -------------------------------------------------------------------------

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def host_state_file(self) -> Path:
        return self.root / "host-state.json"

    @property
    def api_socket(self) -> Path:
        return self.root / "apiserver.sock"

    def process(self, name: str) -> LocalProcess:
        return LocalProcess(
            name,
            pid_file=self.root / "pids" / f"{name}.pid",
            log_file=self.logs_dir / f"{name}.log",
        )

    def has_run(self) -> bool:
        """Whether the node was started and not stopped since (``down`` has work)."""
        return self.host_state_file.exists() or (self.root / "pids").exists()

    def is_running(self) -> bool:
        return all(self.process(name).is_running() for name in DAEMONS)

    # Lifecycle ---------------------------------------------------------------------

    def check_host(self) -> None:
        """Raise ``ToolsMissingError`` naming what the node needs and the host lacks."""
        missing = [c for c in HOST_COMMANDS if shutil.which(c) is None]
        missing += [
            str(CNI_BIN_DIR / p)
            for p in ("bridge", "host-local", "portmap", "loopback")
            if not (CNI_BIN_DIR / p).exists()
        ]
        if missing:
            raise ToolsMissingError(
                f"the real node needs {', '.join(missing)}: run `make node-packages` (Debian's "
                "containerd, runc, containernetworking-plugins, socat, conntrack, iptables)"
            )
        for name in ("kubelet", "kube-proxy", "pause", "coredns"):
            if not self.tools.path(name).exists():
                raise ToolsMissingError(
                    f"{self.tools.path(name)} is missing: run `make cluster-tools`"
                )

    def up(self, *, api_port: int, pki_dir: Path, kubectl: Path, deadline: float) -> None:
        """Start the node against the API server on 127.0.0.1:``api_port`` (its CA and
        admin certificate in ``pki_dir``) and wait until it is Ready, DNS answers and
        kube-proxy has written the ``kubernetes`` Service's rules."""
        self.check_host()
        self._claim_addresses()
        host.record_host_state(self.host_state_file)
        self._network()
        host.create_cgroup_root(self.cgroup_root)
        server = f"https://{self.network.node_ip}:{api_port}"
        self._write_config(server, pki_dir, self.store.claim(self.root))
        self._start_forwarder(api_port)
        containerd = self.process("containerd")
        self._start(containerd, ["containerd", "--config", str(self.root / "containerd.toml")])
        self._wait(
            lambda: self.images.ctr("version", check=False) is not None, "containerd", deadline
        )
        self._import_pause()
        kubelet = self.process("kubelet")
        self._start(
            kubelet,
            [
                str(self.tools.path("kubelet")),
                f"--config={self.root / 'kubelet-config.yaml'}",
                f"--kubeconfig={self.root / 'kubelet.kubeconfig'}",
                f"--root-dir={self.root / 'kubelet'}",
                f"--node-ip={self.network.node_ip}",
                f"--hostname-override={self.name}",
                f"--node-labels={REAL_NODE_LABEL}=true",
                "--v=1",
            ],
        )
        admin = [str(kubectl), "--kubeconfig", str(self.root / "admin.kubeconfig")]
        self._wait(
            lambda: run([*admin, "get", "node", self.name, "-o", "name"], check=False) or None,
            f"Node {self.name} to register",
            deadline,
            kubelet,
        )
        run(
            [*admin, "apply", "--server-side", "-f", "-"], input=coredns_rbac(COREDNS_USER).encode()
        )
        self._start(
            self.process("coredns"),
            [str(self.tools.path("coredns")), "-conf", str(self.root / "Corefile")],
        )
        self._start(
            self.process("kube-proxy"),
            [
                str(self.tools.path("kube-proxy")),
                f"--config={self.root / 'kube-proxy.yaml'}",
                "--v=1",
            ],
        )
        run(
            [
                *admin,
                "wait",
                "--for=condition=Ready",
                f"node/{self.name}",
                f"--timeout={max(1, int(deadline - time.monotonic()))}s",
            ]
        )
        self._wait(
            self._proxy_synced,
            "kube-proxy's rules for the kubernetes Service",
            deadline,
            self.process("kube-proxy"),
        )
        self._wait(
            lambda: (
                host.resolve(self.network.dns_ip, f"kubernetes.default.svc.{CLUSTER_DOMAIN}")
                or None
            ),
            "CoreDNS to answer",
            deadline,
            self.process("coredns"),
        )

    def down(self) -> None:
        """Stop everything the node started and undo what it changed (a no-op when it
        never ran); keeps ``logs/``."""
        for name in ("kube-proxy", "coredns", "kubelet"):
            self.process(name).stop()
        host.kill_cgroup(self.cgroup_root)
        holds_store = self.store.holds(self.root)
        forgotten = holds_store and self.process("containerd").is_running()
        if forgotten:
            self.store.forget_containers(self.images.ctr_prefix())
        self.process("containerd").stop()
        host.kill_processes(host.processes_with_arg(str(self.containerd_socket)))
        for name in ("api-forwarder-node", "api-forwarder-host"):
            self.process(name).stop()
        host.unmount_all(self.root)
        if holds_store:
            self.store.release(self.root, forgotten=forgotten)
        _remove_network_and_cgroups(node_tag(self.root))
        host.undo_host_state(self.host_state_file)
        if self.root.exists():
            for entry in self.root.iterdir():
                if entry != self.logs_dir:
                    host.remove_tree(entry) if entry.is_dir() else entry.unlink()

    def _claim_addresses(self) -> None:
        """Raise ``NodeError`` when a running node holds this one's addresses; remove
        what a dead one left holding them (a session killed before ``down``: its
        namespace, veth, cgroups and mounts outlive its processes)."""
        for address in (self.network.host_ip, self.network.node_ip):
            out = run(["ip", "-o", "addr", "show", "to", f"{address}/32"]).split()
            if not out:
                continue
            link = out[1].split("@")[0]
            match = VETH_RE.fullmatch(link)
            if match is None or _node_alive(match[1]):
                raise NodeError(
                    f"{address} is already on link {link} of this host: "
                    + (
                        f"the real node of namespace kubetrain-{match[1]} runs with these "
                        "addresses; stop its cluster (make cluster-down) or give this one "
                        "another NodeNetwork"
                        if match
                        else "give the real node another NodeNetwork"
                    )
                )
            reclaim_dead_node(match[1], tools=self.tools)

    # Images ------------------------------------------------------------------------

    @property
    def store(self) -> NodeStore:
        """Where the node's containerd keeps its images from one node to the next."""
        if self._store is None:
            self._store = NodeStore.default()
        return self._store

    @property
    def images(self) -> NodeImages:
        """The node's images (``ids``, ``import_image``, ``import_archive``...)."""
        return NodeImages(self.containerd_socket, self.root / "images")

    def import_image(self, ref: str) -> bool:
        """Copy ``ref`` from podman's storage (``make images``) into the node unless it
        has it with the same id; return whether it was imported."""
        return self.images.import_image(ref)

    def import_images(self, refs: list[str]) -> list[str]:
        """Copy those of ``refs`` the node lacks from podman's storage in one archive
        (shared layers once); return the refs imported."""
        return self.images.import_images(refs)

    def import_files(self, ref: str, files: ImageFiles, *, entrypoint: list[str]) -> None:
        """Write ``files`` as image ``ref`` and import it (the pause image, test images)."""
        self.images.import_files(ref, files, entrypoint=entrypoint)

    # Introspection -----------------------------------------------------------------

    def pids(self) -> dict[str, int]:
        """Pids of the running daemons, by ``node/<name>``."""
        return {f"node/{n}": pid for n in DAEMONS if (pid := self.process(n).pid) is not None}

    def memory_rss_bytes(self) -> dict[str, int]:
        """RSS of each daemon, of the containerd shims together, and of the containers."""
        out = {n: host.rss_bytes(p) for n, p in self.pids().items()}
        shims = host.processes_with_arg(str(self.containerd_socket))
        out["node/containerd-shims"] = sum(host.rss_bytes(p) for p in shims)
        out["node/containers"] = sum(host.rss_bytes(p) for p in host.cgroup_pids(self.cgroup_root))
        return out

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(self.process(n).log_tail(lines) for n in DAEMONS)

    # Internals ---------------------------------------------------------------------

    def _network(self) -> None:
        net = self.network
        if not (host.NETNS_DIR / self.netns).exists():
            run(["ip", "netns", "add", self.netns])
        run(["ip", "link", "delete", self.veth], check=False)
        run(
            [
                "ip",
                "link",
                "add",
                self.veth,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                self.netns,
            ]
        )
        run(["ip", "addr", "add", f"{net.host_ip}/{net.prefix}", "dev", self.veth])
        run(["ip", "link", "set", self.veth, "up"])
        for args in (
            ["ip", "addr", "add", f"{net.node_ip}/{net.prefix}", "dev", "eth0"],
            ["ip", "link", "set", "lo", "up"],
            ["ip", "link", "set", "eth0", "up"],
            ["ip", "route", "add", "default", "via", net.host_ip],
        ):
            run(in_netns(self.netns, args))

    def _write_config(self, server: str, pki_dir: Path, store_root: Path | None) -> None:
        root, net = self.root, self.network
        ca, ca_key = pki_dir / "ca.crt", pki_dir / "ca.key"
        pki = root / "pki"
        certs = {
            "kubelet": (f"system:node:{self.name}", ["system:nodes"]),
            "kube-proxy": ("system:kube-proxy", []),
            "coredns": (COREDNS_USER, []),
        }
        for component, (cn, orgs) in certs.items():
            issue_certificate(
                ca_cert=ca,
                ca_key=ca_key,
                common_name=cn,
                organizations=orgs,
                dest_cert=pki / f"{component}-client.crt",
                dest_key=pki / f"{component}-client.key",
            )
            (root / f"{component}.kubeconfig").write_text(
                kubeconfig(
                    server=server,
                    ca=ca,
                    cert=pki / f"{component}-client.crt",
                    key=pki / f"{component}-client.key",
                    user=cn,
                ),
                encoding="utf-8",
            )
        (root / "admin.kubeconfig").write_text(
            kubeconfig(
                server=server.replace(net.node_ip, "127.0.0.1"),
                ca=ca,
                cert=pki_dir / "admin.crt",
                key=pki_dir / "admin.key",
                user="kwok-admin",
            ),
            encoding="utf-8",
        )
        issue_certificate(
            ca_cert=ca,
            ca_key=ca_key,
            common_name=f"system:node:{self.name}",
            organizations=["system:nodes"],
            ip_sans=[net.node_ip],
            dns_sans=[self.name],
            server=True,
            dest_cert=pki / "kubelet.crt",
            dest_key=pki / "kubelet.key",
        )
        containerd_dir = root / "containerd"
        cni_dir = root / "cni" / "net.d"
        for path in (containerd_dir, cni_dir, root / "kubelet", root / "pod-logs"):
            path.mkdir(parents=True, exist_ok=True)
        (root / "containerd.toml").write_text(
            containerd_config(
                root=store_root or containerd_dir / "root",
                state=containerd_dir / "state",
                socket=self.containerd_socket,
                cni_conf_dir=cni_dir,
                cni_bin_dir=CNI_BIN_DIR,
            ),
            encoding="utf-8",
        )
        (cni_dir / "10-kubetrain.conflist").write_text(cni_config(net), encoding="utf-8")
        (root / "resolv.conf").write_text("", encoding="utf-8")
        (root / "kubelet-config.yaml").write_text(
            yaml.safe_dump(
                kubelet_config(
                    network=net,
                    cgroup_root=f"/{self.cgroup_root}",
                    containerd_socket=self.containerd_socket,
                    pod_logs_dir=root / "pod-logs",
                    client_ca=ca,
                    serving_cert=pki / "kubelet.crt",
                    serving_key=pki / "kubelet.key",
                    resolv_conf=root / "resolv.conf",
                ),
                sort_keys=True,
            ),
            encoding="utf-8",
        )
        (root / "kube-proxy.yaml").write_text(
            yaml.safe_dump(
                kube_proxy_config(kubeconfig=root / "kube-proxy.kubeconfig", network=net),
                sort_keys=True,
            ),
            encoding="utf-8",
        )
        (root / "Corefile").write_text(
            corefile(kubeconfig=root / "coredns.kubeconfig", network=net), encoding="utf-8"
        )

    def _start_forwarder(self, api_port: int) -> None:
        self.api_socket.unlink(missing_ok=True)
        self._start(
            self.process("api-forwarder-host"),
            ["socat", f"UNIX-LISTEN:{self.api_socket},fork,mode=600", f"TCP:127.0.0.1:{api_port}"],
            in_node=False,
        )
        self._start(
            self.process("api-forwarder-node"),
            [
                "socat",
                f"TCP-LISTEN:{api_port},bind={self.network.node_ip},fork,reuseaddr",
                f"UNIX-CONNECT:{self.api_socket}",
            ],
        )

    def _start(self, process: LocalProcess, args: list[str], *, in_node: bool = True) -> None:
        try:
            process.start(in_netns(self.netns, args) if in_node else args)
        except ProcessError as err:
            raise NodeError(str(err)) from err

    def _wait(
        self,
        ready: Callable[[], object],
        what: str,
        deadline: float,
        process: LocalProcess | None = None,
    ) -> None:
        while not ready():
            if process is not None and not process.is_running():
                raise NodeError(f"{process.name} exited before {what}\n{process.log_tail()}")
            if time.monotonic() > deadline:
                raise NodeError(f"timed out waiting for {what}\n{self.log_tails()}")
            time.sleep(0.3)

    def _import_pause(self) -> None:
        if PAUSE_IMAGE in self.images.ids():
            return
        pause = self.tools.path("pause")
        self.import_files(
            PAUSE_IMAGE,
            ImageFiles(files={"/pause": (pause.read_bytes(), 0o755)}),
            entrypoint=["/pause"],
        )

    def _proxy_synced(self) -> bool:
        rules = run(in_netns(self.netns, ["iptables-save", "-t", "nat"]), check=False)
        return f"-d {KUBERNETES_SERVICE_IP}/32" in rules and "KUBE-SEP-" in rules


def _node_alive(tag: str) -> bool:
    """Whether any process of node ``tag`` runs: every daemon but the host-side
    forwarder is in its namespace, every container in its cgroup root."""
    netns = f"kubetrain-{tag}"
    in_ns = (host.NETNS_DIR / netns).exists() and run(["ip", "netns", "pids", netns]).strip()
    return bool(in_ns or host.cgroup_pids(f"kubetrain-{tag}"))


def _dead_node_root(tag: str) -> Path | None:
    """The directory of node ``tag``, found through the mounts it left (containerd's
    sandboxes and snapshots are mounted below it); None when none is left."""
    for line in Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines():
        point = Path(line.split()[4].replace("\\040", " "))
        for parent in point.parents:
            if parent.name == "node" and node_tag(parent) == tag:
                return parent
    return None


def reclaim_dead_node(tag: str, *, tools: Tools) -> None:
    """Undo what node ``tag``, none of whose processes runs, left on the host: as its
    ``down`` does when its directory is found, else its namespace, veth and cgroups."""
    root = _dead_node_root(tag)
    log.warning(
        "removing what a real node that no longer runs left on this host: namespace "
        "kubetrain-%s, veth kt%s%s",
        tag,
        tag,
        f", mounts and state under {root}" if root else "",
    )
    if root is not None:
        RealNode(root.parent, tools=tools).down()
    else:
        _remove_network_and_cgroups(tag)


def _remove_network_and_cgroups(tag: str) -> None:
    host.remove_cgroup_root(f"kubetrain-{tag}")
    run(["ip", "link", "delete", f"kt{tag}"], check=False)
    if (host.NETNS_DIR / f"kubetrain-{tag}").exists():
        run(["ip", "netns", "delete", f"kubetrain-{tag}"], check=False)
