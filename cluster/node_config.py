"""The configuration files of the real node (``cluster.node``): addresses, containerd,
CNI, kubelet, kube-proxy, CoreDNS, kubeconfigs and certificates. Pure functions of the
paths and addresses they are given, so the node's layout is readable in one place.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: The Node's name; the real node carries the label ``kubetrain.dev/real-node: "true"``.
NODE_NAME = "kubetrain-node"
REAL_NODE_LABEL = "kubetrain.dev/real-node"
#: The image containerd and the kubelet use for pod sandboxes (kubetrain's own pause).
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
#: The API server's default Service range (kwokctl sets none; the node sets it explicitly).
SERVICE_CIDR = "10.0.0.0/24"
#: The ``kubernetes`` Service's ClusterIP: the first address of ``SERVICE_CIDR``.
KUBERNETES_SERVICE_IP = "10.0.0.1"
CLUSTER_DOMAIN = "cluster.local"


@dataclass(frozen=True)
class NodeNetwork:
    """Addresses of the node: a /30 on the veth pair between the host and the node's
    network namespace (``host_ip`` on the host side, ``node_ip`` inside, the node's
    InternalIP), and the pods' subnet on a bridge inside that namespace."""

    host_ip: str = "10.201.0.1"
    node_ip: str = "10.201.0.2"
    prefix: int = 30
    pod_subnet: str = "10.202.0.0/24"

    @property
    def pod_gateway(self) -> str:
        """The bridge's address in the pods' subnet (their default gateway)."""
        return str(next(ipaddress.ip_network(self.pod_subnet).hosts()))

    @property
    def dns_ip(self) -> str:
        """Where CoreDNS answers (``clusterDNS`` of the kubelet): the node IP, port 53."""
        return self.node_ip


def containerd_config(
    *, root: Path, state: Path, socket: Path, cni_conf_dir: Path, cni_bin_dir: Path
) -> str:
    """containerd's configuration (version 2) with every path under the node's own
    directories, runc v2 on cgroupfs, and ``restrict_oom_score_adj`` (the sandbox this
    runs in lacks CAP_SYS_RESOURCE: without it every pod sandbox fails to start)."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    runc = f"{cri}.containerd.runtimes.runc"
    return "\n".join(
        [
            "version = 2",
            f'root = "{root}"',
            f'state = "{state}"',
            'disabled_plugins = ["io.containerd.grpc.v1.introspection.btrfs",'
            ' "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",'
            ' "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]',
            "[grpc]",
            f'  address = "{socket}"',
            "[ttrpc]",
            f'  address = "{socket}.ttrpc"',
            "[metrics]",
            '  address = ""',
            f"[{cri}]",
            f'  sandbox_image = "{PAUSE_IMAGE}"',
            "  restrict_oom_score_adj = true",
            "  netns_mounts_under_state_dir = true",
            "  enable_selinux = false",
            "  disable_apparmor = true",
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            f"[{runc}]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{runc}.options]",
            "  SystemdCgroup = false",
            f'  Root = "{state / "runc"}"',
            f"[{cri}.cni]",
            f'  bin_dir = "{cni_bin_dir}"',
            f'  conf_dir = "{cni_conf_dir}"',
            "  max_conf_num = 1",
            "",
        ]
    )


def cni_config(network: NodeNetwork) -> str:
    """The pods' network: a bridge with host-local addresses, ports mapped by portmap."""
    conflist = {
        "cniVersion": "0.4.0",
        "name": "kubetrain",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": network.pod_subnet, "gateway": network.pod_gateway}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(conflist, indent=2, sort_keys=True) + "\n"


def kubelet_config(
    *,
    network: NodeNetwork,
    cgroup_root: str,
    containerd_socket: Path,
    pod_logs_dir: Path,
    client_ca: Path,
    serving_cert: Path,
    serving_key: Path,
    resolv_conf: Path,
) -> dict[str, Any]:
    """The KubeletConfiguration: cgroupfs in a cgroup root of the node's own, webhook
    authentication and authorization (the API server's kubelet client cert is in
    system:masters), no anonymous access, CoreDNS as the cluster DNS."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": network.node_ip,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(serving_cert),
        "tlsPrivateKeyFile": str(serving_key),
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "cgroupsPerQOS": True,
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{containerd_socket}",
        "podLogsDir": str(pod_logs_dir),
        "clusterDNS": [network.dns_ip],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(resolv_conf),
        # The node shares the machine's disk and memory: only evict when nearly out.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "maxPods": 50,
        "serializeImagePulls": False,
        "registerNode": True,
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "nodeStatusReportFrequency": "10s",
        "shutdownGracePeriod": "0s",
        "localStorageCapacityIsolation": True,
    }


def kube_proxy_config(*, kubeconfig: Path, network: NodeNetwork) -> dict[str, Any]:
    """KubeProxyConfiguration: iptables mode inside the node's namespace, every Service
    connection masqueraded (pods on one bridge then get replies through the node's
    stack, with no br_netfilter), conntrack limits left as the kernel has them."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "hostnameOverride": NODE_NAME,
        "bindAddress": network.node_ip,
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "clusterCIDR": network.pod_subnet,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "iptables": {"masqueradeAll": True},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


def corefile(*, kubeconfig: Path, network: NodeNetwork) -> str:
    """CoreDNS serving ``cluster.local`` (Services, and the per-pod names of headless
    Services: ``<hostname>.<subdomain>.<ns>.svc.cluster.local``) and the reverse zones,
    on the node IP; names outside the cluster get NXDOMAIN-free SERVFAIL (no upstream)."""
    return "\n".join(
        [
            ".:53 {",
            f"    bind {network.dns_ip}",
            "    errors",
            "    health 127.0.0.1:8080",
            "    ready 127.0.0.1:8181",
            f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{",
            f"        kubeconfig {kubeconfig}",
            "        pods insecure",
            "        fallthrough in-addr.arpa ip6.arpa",
            "        ttl 5",
            "    }",
            "    cache 5",
            "    loop",
            "}",
            "",
        ]
    )


def kubeconfig(*, server: str, ca: Path, cert: Path, key: Path, user: str) -> str:
    """A kubeconfig for one client certificate."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "kubetrain", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "kubetrain", "context": {"cluster": "kubetrain", "user": user}}],
        "current-context": "kubetrain",
    }
    return yaml.safe_dump(config, sort_keys=True)


def issue_certificate(
    *,
    ca_cert: Path,
    ca_key: Path,
    common_name: str,
    organizations: Sequence[str] = (),
    ip_sans: Sequence[str] = (),
    dns_sans: Sequence[str] = (),
    server: bool = False,
    dest_cert: Path,
    dest_key: Path,
) -> None:
    """Sign a certificate (ECDSA P-256, a year) with the cluster's CA (kwokctl's)."""
    with warnings.catch_warnings():
        # kwokctl's CA has a negative serial number, which cryptography warns about.
        warnings.simplefilter("ignore")
        authority = x509.load_pem_x509_certificate(ca_cert.read_bytes())
    authority_key = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(authority.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_sans]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_sans]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    if not isinstance(authority_key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)):
        raise ValueError(f"{ca_key} holds no private key that can sign certificates")
    certificate = builder.sign(authority_key, hashes.SHA256())
    dest_cert.parent.mkdir(parents=True, exist_ok=True)
    dest_cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    dest_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    dest_key.chmod(0o600)


def control_plane_options(network: NodeNetwork) -> dict[str, Any]:
    """kwokctl options for a control plane with the real node: the API server's serving
    certificate also names the node IP (where the forwarder serves it to the node) and
    the ``kubernetes`` Service's ClusterIP (what in-cluster clients connect to)."""
    return {"kubeApiserverCertSANs": [network.node_ip, KUBERNETES_SERVICE_IP, NODE_NAME]}


def control_plane_patches(pki_dir: Path, network: NodeNetwork) -> list[dict[str, Any]]:
    """kwokctl component patches for a control plane with the real node.

    kube-apiserver advertises the node IP (the ``kubernetes`` Service's endpoint is the
    forwarder there), reaches kubelets at their InternalIP with kwokctl's admin client
    certificate (system:masters), and admits with NodeRestriction (authorization is
    already Node,RBAC). The kwok controller manages only nodes annotated
    ``kwok.x-k8s.io/node: fake`` (kwokctl's binary runtime otherwise takes every node).
    """
    net = network

    def args(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
        # kwokctl replaces an argument it already passes only when told to override, and
        # adds one it does not pass only when not.
        overridden = {"manage-all-nodes"}
        return [{"key": k, "value": v, "override": k in overridden} for k, v in pairs]

    return [
        {
            "name": "kube-apiserver",
            "extraArgs": args(
                ("advertise-address", net.node_ip),
                ("service-cluster-ip-range", SERVICE_CIDR),
                ("enable-admission-plugins", "NodeRestriction"),
                ("kubelet-client-certificate", str(pki_dir / "admin.crt")),
                ("kubelet-client-key", str(pki_dir / "admin.key")),
                ("kubelet-preferred-address-types", "InternalIP"),
            ),
        },
        {
            "name": "kwok-controller",
            "extraArgs": args(
                ("manage-all-nodes", "false"),
                ("manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake"),
            ),
        },
    ]


def coredns_rbac(user: str) -> str:
    """The ClusterRole CoreDNS's kubernetes plugin needs (list and watch what it serves),
    bound to ``user``, as a kubectl List."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": user},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["endpoints", "services", "pods", "namespaces"],
                "verbs": ["list", "watch"],
            },
            {
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["list", "watch"],
            },
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": user},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": user,
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [role, binding]})
