"""The real node (``cluster/node.py``): a kubelet with containerd, kube-proxy and CoreDNS
joined to the local control plane beside kwok's fake GPU nodes.

Pods run a tiny busybox image (Debian's static busybox, written as an OCI archive by
``cluster.oci`` and imported into the node's containerd): they run and exit with their
status, their logs and exec go through the kubelet, they reach each other by pod IP,
by a ClusterIP Service (kube-proxy) and by the per-pod DNS names of a headless Service
(CoreDNS), and they reach the API server in-cluster, through the ``kubernetes`` Service,
with the token and CA the kubelet projects. A container over its memory limit is
OOMKilled. (That stopping a node leaves nothing on the host, and that a killed node's
leftovers give way to the next, is in ``tests/faults/test_leftovers.py``: those tests
start control planes of their own.)
"""

from __future__ import annotations

import json
import os
import secrets
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster import host
from cluster.local import LocalCluster
from cluster.node import RealNode
from cluster.node_config import KUBERNETES_SERVICE_IP, REAL_NODE_LABEL
from cluster.oci import busybox_files, write_image_archive
from cluster.topology import KWOK_NODE_ANNOTATION
from tests.clusters import ClusterClients, fresh_namespace
from tests.integration.kube import list_objects, pod_dict, read, wait_for

BUSYBOX = "localhost/kubetrain/busybox:test"


@pytest.fixture(scope="module")
def node(real_node_cluster: LocalCluster) -> RealNode:
    """The real node, with the busybox test image imported."""
    found = real_node_cluster.real_node
    assert found is not None
    found.import_files(BUSYBOX, busybox_files(), entrypoint=["/bin/sh"])
    return found


@pytest.fixture(scope="module")
def clients(real_node_clients: ClusterClients) -> ClusterClients:
    return real_node_clients


@pytest.fixture
def ns(clients: ClusterClients, node: RealNode, request: pytest.FixtureRequest) -> Iterator[str]:
    with fresh_namespace(clients.core_v1, clients.dyn, request) as name:
        yield name


def pod(name: str, command: str, **spec: Any) -> dict[str, Any]:
    """A busybox pod running ``sh -c command`` that never restarts."""
    container: dict[str, Any] = {
        "name": "main",
        "image": BUSYBOX,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", command],
    }
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [container],
            **spec,
        },
    }


def create(cluster: LocalCluster, ns: str, *objects: dict[str, Any]) -> None:
    items = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    cluster.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(items))


def wait_phase(clients: ClusterClients, ns: str, name: str, *phases: str) -> dict[str, Any]:
    return wait_for(
        lambda: pod_dict(clients.dyn, ns, name),
        lambda p: p.get("status", {}).get("phase") in phases,
        what=f"pod {ns}/{name} in phase {' or '.join(phases)}",
        timeout=90,
        interval=0.5,
    )


def terminated(p: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = p["status"]["containerStatuses"][0]["state"]
    return dict(state.get("terminated") or {})


def exec_in(cluster: LocalCluster, ns: str, name: str, command: str) -> str:
    return cluster.kubectl("exec", "-n", ns, name, "--", "sh", "-c", command).stdout


def server_pod(name: str, **spec: Any) -> dict[str, Any]:
    """A pod answering ``pong from <hostname>`` to every TCP connection on port 8080."""
    return pod(name, 'exec nc -ll -p 8080 -e sh -c "echo pong from $(hostname)"', **spec)


def test_node_is_ready_with_its_real_kubelet(
    real_node_cluster: LocalCluster, clients: ClusterClients, node_name: str
) -> None:
    found = read(clients.dyn, "v1", "Node", node_name)
    ready = {c["type"]: c["status"] for c in found["status"]["conditions"]}
    assert ready["Ready"] == "True", ready
    info = found["status"]["nodeInfo"]
    assert info["kubeletVersion"] == real_node_cluster.tools.versions.kubernetes
    assert info["containerRuntimeVersion"] == "containerd://1.6.20"
    assert found["metadata"]["labels"][REAL_NODE_LABEL] == "true"
    # kwok manages only the nodes it annotates: never this one.
    assert KWOK_NODE_ANNOTATION not in found["metadata"].get("annotations", {})
    names = [n["metadata"]["name"] for n in list_objects(clients.dyn, "v1", "Node")]
    kwok_nodes = [name for name in names if name != node_name]
    assert len(kwok_nodes) == 2, kwok_nodes


def test_pods_exit_with_their_status_and_logs(
    real_node_cluster: LocalCluster, clients: ClusterClients, ns: str, node_name: str
) -> None:
    create(
        real_node_cluster,
        ns,
        pod("succeeds", "echo hello from $(hostname)"),
        pod("fails", "echo about to fail; exit 3"),
    )
    done = wait_phase(clients, ns, "succeeds", "Succeeded", "Failed")
    assert done["status"]["phase"] == "Succeeded"
    assert done["spec"]["nodeName"] == node_name
    assert terminated(done)["exitCode"] == 0
    failed = wait_phase(clients, ns, "fails", "Succeeded", "Failed")
    assert failed["status"]["phase"] == "Failed"
    assert terminated(failed)["exitCode"] == 3
    assert real_node_cluster.kubectl("logs", "-n", ns, "succeeds").stdout == "hello from succeeds\n"
    assert real_node_cluster.kubectl("logs", "-n", ns, "fails").stdout == "about to fail\n"


def test_exec_runs_in_the_container(
    real_node_cluster: LocalCluster, clients: ClusterClients, ns: str
) -> None:
    create(real_node_cluster, ns, pod("sleeper", "exec sleep 3600"))
    wait_phase(clients, ns, "sleeper", "Running")
    assert (
        exec_in(real_node_cluster, ns, "sleeper", "echo $(hostname) $((6 * 7))") == "sleeper 42\n"
    )


def test_pods_reach_each_other_by_ip_service_and_dns(
    real_node_cluster: LocalCluster, clients: ClusterClients, ns: str
) -> None:
    workers = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "workers"},
        "spec": {"clusterIP": "None", "selector": {"role": "worker"}},
    }
    front = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "front"},
        "spec": {"selector": {"app": "worker-0"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    server = server_pod("worker-0", hostname="worker-0", subdomain="workers")
    server["metadata"]["labels"]["role"] = "worker"
    create(real_node_cluster, ns, workers, front, server, pod("client", "exec sleep 3600"))
    server_ip = wait_phase(clients, ns, "worker-0", "Running")["status"]["podIP"]
    wait_phase(clients, ns, "client", "Running")

    def ask(target: str) -> str:
        """What the server answers at ``target``; empty while nothing answers yet (the
        pod's route, kube-proxy's rules or the DNS record can trail the API objects)."""
        return real_node_cluster.kubectl(
            "exec",
            "-n",
            ns,
            "client",
            "--",
            "sh",
            "-c",
            f"nc -w 3 {target} </dev/null",
            check=False,
        ).stdout

    # Pod to pod by IP.
    assert wait_for(lambda: ask(f"{server_ip} 8080"), bool, what="an answer by pod IP") == (
        "pong from worker-0\n"
    )
    # The headless Service's per-pod name (what MPI hostfiles and torchrun use).
    fqdn = f"worker-0.workers.{ns}.svc.cluster.local"
    resolved = wait_for(
        lambda: exec_in(real_node_cluster, ns, "client", f"nslookup {fqdn} || true"),
        lambda out: server_ip in out,
        what=f"{fqdn} resolving to {server_ip}",
        timeout=30,
    )
    assert f"Name:\t{fqdn}" in resolved
    # The ClusterIP Service, by IP and by name, through kube-proxy's rules.
    cluster_ip = read(clients.dyn, "v1", "Service", "front", ns)["spec"]["clusterIP"]
    assert wait_for(lambda: ask(f"{cluster_ip} 80"), bool, what="an answer by ClusterIP") == (
        "pong from worker-0\n"
    )
    by_name = f"front.{ns}.svc.cluster.local 80"
    assert wait_for(lambda: ask(by_name), bool, what="an answer by Service name") == (
        "pong from worker-0\n"
    )


def test_pods_reach_the_api_server_in_cluster(
    real_node_cluster: LocalCluster, clients: ClusterClients, ns: str
) -> None:
    create(real_node_cluster, ns, pod("incluster", "exec sleep 3600"))
    wait_phase(clients, ns, "incluster", "Running")
    env = exec_in(real_node_cluster, ns, "incluster", "env | grep ^KUBERNETES_SERVICE_ | sort")
    assert f"KUBERNETES_SERVICE_HOST={KUBERNETES_SERVICE_IP}\n" in env
    assert "KUBERNETES_SERVICE_PORT=443\n" in env
    secrets_dir = "/var/run/secrets/kubernetes.io/serviceaccount"
    token = exec_in(real_node_cluster, ns, "incluster", f"cat {secrets_dir}/token")
    ca = exec_in(real_node_cluster, ns, "incluster", f"cat {secrets_dir}/ca.crt")
    # TLS from inside the pod's network: the bytes go through `nc` in the pod to the
    # Service's ClusterIP (kube-proxy -> the forwarder at the node IP -> the API server),
    # the TLS session is the test's, verifying the certificate for the ClusterIP.
    review = tls_request(
        real_node_cluster,
        ns,
        "incluster",
        ca=ca,
        request=(
            "POST /apis/authentication.k8s.io/v1/selfsubjectreviews HTTP/1.1\r\n"
            f"Host: {KUBERNETES_SERVICE_IP}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nConnection: close\r\n"
            "Content-Length: {length}\r\n\r\n{body}"
        ),
        body=json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    status, _, payload = review.partition("\r\n\r\n")
    assert status.startswith("HTTP/1.1 201"), status
    user = json.loads(payload[payload.index("{") : payload.rindex("}") + 1])["status"]["userInfo"]
    assert user["username"] == f"system:serviceaccount:{ns}:default"


def tls_request(
    cluster: LocalCluster, ns: str, pod_name: str, *, ca: str, request: str, body: str
) -> str:
    """One HTTPS request to the ``kubernetes`` Service, sent from ``pod_name``'s network
    (through ``nc`` run there by kubectl exec); the certificate is verified with ``ca``
    for the Service's ClusterIP. Returns the whole response."""
    context = ssl.create_default_context(cadata=ca)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=KUBERNETES_SERVICE_IP)
    relay = subprocess.Popen(
        [
            str(cluster.tools.kubectl),
            "--kubeconfig",
            str(cluster.kubeconfig),
            "exec",
            "-i",
            "-n",
            ns,
            pod_name,
            "--",
            "nc",
            KUBERNETES_SERVICE_IP,
            "443",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert relay.stdin is not None and relay.stdout is not None
    stdout = relay.stdout

    def pump() -> None:
        pending = outgoing.read()
        if pending:
            relay.stdin.write(pending)  # type: ignore[union-attr]
            relay.stdin.flush()  # type: ignore[union-attr]

    def receive() -> bool:
        chunk = os.read(stdout.fileno(), 65536)
        if chunk:
            incoming.write(chunk)
        else:
            incoming.write_eof()
        return bool(chunk)

    try:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                pump()
                receive()
        tls.write(request.replace("{length}", str(len(body))).replace("{body}", body).encode())
        pump()
        response = b""
        while True:
            try:
                data = tls.read(65536)
                if not data:
                    break
                response += data
            except ssl.SSLWantReadError:
                if not receive():
                    break
            except ssl.SSLZeroReturnError:
                break
        return response.decode(errors="replace")
    finally:
        relay.kill()
        relay.wait()


def test_container_over_its_memory_limit_is_oomkilled(
    real_node_cluster: LocalCluster, clients: ClusterClients, ns: str
) -> None:
    limits = {"resources": {"limits": {"memory": "24Mi"}, "requests": {"memory": "24Mi"}}}
    # `tail` keeps the one endless "line" of /dev/zero in memory until the limit stops it.
    create(real_node_cluster, ns, pod("hog", "tail /dev/zero", container=limits))
    done = wait_phase(clients, ns, "hog", "Failed", "Succeeded")
    assert terminated(done)["reason"] == "OOMKilled", terminated(done)
    assert terminated(done)["exitCode"] == 137


def test_import_images_copies_from_containers_storage_once(
    real_node_cluster: LocalCluster,
    clients: ClusterClients,
    node: RealNode,
    ns: str,
    tmp_path: Path,
) -> None:
    # Two images with one layer (like the trainer images, which share torch's): built
    # into podman's storage as `make images` would, then imported in one call.
    tag = secrets.token_hex(3)
    words = ("first", "second")
    refs = [f"localhost/kubetrain/busybox-{word}:{tag}" for word in words]
    for ref, word in zip(refs, words, strict=True):
        archive = tmp_path / f"{word}.tar"
        write_image_archive(archive, ref, busybox_files(), entrypoint=["/bin/echo", word])
        host.run(
            ["skopeo", "copy", "--quiet", f"oci-archive:{archive}", f"containers-storage:{ref}"]
        )
    try:
        assert node.import_images(refs) == refs
        assert node.import_images(refs) == []  # same ids: nothing to do
        assert node.import_image(refs[0]) is False
        # The layer was unpacked into the snapshotter and its blob deleted: only the
        # manifests and configs stay in the content store.
        blobs = set((node.images.ctr("content", "ls", "--quiet") or "").split())
        for ref in refs:
            manifest = json.loads(node.images.ctr("content", "get", _target(node, ref)) or "")
            assert manifest["config"]["digest"] in blobs
            assert not {layer["digest"] for layer in manifest["layers"]} & blobs, manifest
        # Pods start from the snapshots, each with its own image's entrypoint.
        for ref, word in zip(refs, words, strict=True):
            spec = pod(word, "unused", container={"image": ref})
            del spec["spec"]["containers"][0]["command"]
            create(real_node_cluster, ns, spec)
            done = wait_phase(clients, ns, word, "Succeeded", "Failed")
            assert done["status"]["phase"] == "Succeeded", done["status"]
            assert real_node_cluster.kubectl("logs", "-n", ns, word).stdout == f"{word}\n"
    finally:
        host.run(["podman", "rmi", "--force", *refs], check=False)


def _target(node: RealNode, ref: str) -> str:
    """The manifest digest ``ctr images ls`` lists for ``ref``."""
    out = node.images.ctr("images", "list", f"name=={ref}") or ""
    return out.splitlines()[1].split()[2]
