"""GpuNodePool: node selection and binding, the node-tuner DaemonSet and its
least-privilege RBAC, priority and runtime classes, the preflight MPIJob (schema-valid,
accepted by the typed API) and its result script run by a real shell."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import cdk8s
import pytest

from kubetrain.api import load_job
from kubetrain.constructs.mpi_job import MPIJob, MPIJobProps
from kubetrain.constructs.nccl import NcclProfile
from kubetrain.constructs.node_pool import (
    GpuNodePool,
    GpuNodePoolProps,
    Taint,
)
from kubetrain.constructs.objects import manifests
from kubetrain.constructs.pytorch_job import PyTorchJob, PyTorchJobProps
from kubetrain.constructs.types import Image, Quantity, Resources
from kubetrain.manifest import dump_all
from tests.k8s_schema import assert_valid
from tests.snapshot import assert_snapshot

TUNER = Image("ghcr.io/kubetrain/operator:0.1.0")
NCCL_TESTS = Image("ghcr.io/kubetrain/nccl-tests:2.21.5")
H100 = "NVIDIA-H100-80GB-HBM3"


def props(**overrides: Any) -> GpuNodePoolProps:
    values: dict[str, Any] = {
        "name": "h100-ib",
        "profile": NcclProfile.infiniband(hcas=("ibp",)),
        "tuner_image": TUNER,
        "gpu_product": H100,
        "preflight_image": NCCL_TESTS,
        **overrides,
    }
    return GpuNodePoolProps(**values)


def chart() -> cdk8s.Chart:
    return cdk8s.Chart(cdk8s.App(), "test", disable_resource_name_hashes=True)


def synth(**overrides: Any) -> tuple[GpuNodePool, list[dict[str, Any]]]:
    scope = chart()
    pool = GpuNodePool(scope, "H100", props(**overrides))
    return pool, manifests(scope)


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (obj,) = [o for o in objs if o["kind"] == kind]
    return obj


def pod_template() -> dict[str, Any]:
    return {
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "image": "ghcr.io/kubetrain/pytorch-trainer:0.1.0",
                    "resources": {"requests": {"cpu": "8", "memory": "64Gi"}},
                }
            ]
        }
    }


# --- objects ----------------------------------------------------------------------------


def test_default_objects_schema_and_snapshot() -> None:
    _, objs = synth(preflight_min_busbw_gbps=350.0)
    assert [o["kind"] for o in objs] == [
        "Namespace",
        "NetworkPolicy",
        "NetworkPolicy",
        "NetworkPolicy",
        "PriorityClass",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "DaemonSet",
        "MPIJob",
    ]
    assert_valid(objs)
    assert_snapshot("constructs/gpu-node-pool-infiniband.yaml", dump_all(objs))


@pytest.mark.parametrize(
    "profile",
    [
        NcclProfile.tcp(host_network=True),
        NcclProfile.roce(gid_index=3, host_network=True),
        NcclProfile.efa(),
        NcclProfile.gcp_tcpx(),
        NcclProfile.gcp_tcpxo(networks=tuple(f"gpu-nic{i}" for i in range(8))),
    ],
    ids=lambda p: p.name,
)
def test_every_profile_gives_valid_objects(profile: NcclProfile) -> None:
    _, objs = synth(profile=profile, runtime_class=True)
    assert_valid(objs)
    load_job(one(objs, "MPIJob"))


def test_namespace_allows_privileged_pods() -> None:
    _, objs = synth(namespace="gpu-ops")
    namespace = one(objs, "Namespace")
    assert namespace["metadata"]["name"] == "gpu-ops"
    for mode in ("enforce", "audit", "warn"):
        assert namespace["metadata"]["labels"][f"pod-security.kubernetes.io/{mode}"] == "privileged"
    assert {
        o["metadata"].get("namespace") for o in objs if o["kind"] in ("DaemonSet", "MPIJob")
    } == {"gpu-ops"}


def tuner_pod(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = one(synth(**overrides)[1], "DaemonSet")["spec"]["template"]["spec"]
    return spec


NO_PRIVILEGES = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def test_tuner_rbac_is_patch_on_nodes_only() -> None:
    _, objs = synth()
    role = one(objs, "ClusterRole")
    # No get, list or watch: the tuner writes its label with a merge patch, unread.
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}]
    binding = one(objs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "h100-ib-node-tuner", "namespace": "kubetrain-gpu"}
    ]
    assert one(objs, "ServiceAccount")["automountServiceAccountToken"] is False
    daemon_set = one(objs, "DaemonSet")
    assert daemon_set["spec"]["template"]["spec"]["serviceAccountName"] == "h100-ib-node-tuner"


def test_tuner_runs_on_the_pool_nodes_with_both_steps() -> None:
    spec = tuner_pod(taints=(Taint(key="kubetrain.dev/gpu-pool", value="h100-ib"),))
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": H100}
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {
            "key": "kubetrain.dev/gpu-pool",
            "operator": "Equal",
            "value": "h100-ib",
            "effect": "NoSchedule",
        },
    ]
    (apply_step,) = spec["initContainers"]
    (checker,) = spec["containers"]
    for container in (apply_step, checker):
        assert container["command"] == ["python", "-m", "kubetrain.node_tuner"]
        assert container["image"] == str(TUNER)
    node_name = {e["name"]: e for e in checker["env"]}["NODE_NAME"]
    assert node_name["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert checker["args"] == [
        "--phase=check",
        "--host-root=/host",
        "--proc-root=/proc",
        "--sys-root=/sys",
        "--interval=300",
        "--sysctl=net.core.rmem_max=67108864",
        "--sysctl=net.core.wmem_max=67108864",
        "--require-peermem",
    ]


def test_tuner_writes_only_its_sysctl_files_as_root_without_privileges() -> None:
    spec = tuner_pod()
    (apply_step,) = spec["initContainers"]
    # Root owns /proc/sys files; no capability, no privilege is needed to write them.
    assert apply_step["securityContext"] == {
        **NO_PRIVILEGES,
        "runAsNonRoot": False,
        "runAsUser": 0,
        "runAsGroup": 0,
    }
    assert apply_step["args"] == [
        "--phase=apply",
        "--proc-root=/host/proc",
        "--sysctl=net.core.rmem_max=67108864",
        "--sysctl=net.core.wmem_max=67108864",
    ]
    # Writable: exactly the pool's sysctl files, one hostPath each; no token.
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert {m["mountPath"]: volumes[m["name"]] for m in apply_step["volumeMounts"]} == {
        "/host/proc/sys/net/core/rmem_max": {
            "name": "sysctl-0",
            "hostPath": {"path": "/proc/sys/net/core/rmem_max", "type": "File"},
        },
        "/host/proc/sys/net/core/wmem_max": {
            "name": "sysctl-1",
            "hostPath": {"path": "/proc/sys/net/core/wmem_max", "type": "File"},
        },
    }
    assert not any(m.get("readOnly") for m in apply_step["volumeMounts"])


def test_tuner_checker_is_unprivileged_and_reads_only_logind_config() -> None:
    spec = tuner_pod()
    (checker,) = spec["containers"]
    assert checker["securityContext"] == {
        **NO_PRIVILEGES,
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
    }
    volumes = {v["name"]: v for v in spec["volumes"]}
    host_mounts = {
        m["mountPath"]: (volumes[m["name"]]["hostPath"], m["readOnly"])
        for m in checker["volumeMounts"]
        if "hostPath" in volumes[m["name"]]
    }
    assert host_mounts == {
        "/host/etc/systemd": ({"path": "/etc/systemd", "type": "Directory"}, True),
        "/host/usr/lib/systemd": ({"path": "/usr/lib/systemd", "type": "Directory"}, True),
    }


def test_tuner_mounts_no_host_root_and_nothing_outside_its_files() -> None:
    spec = tuner_pod()
    host_paths = sorted(v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v)
    assert host_paths == [
        "/etc/systemd",
        "/proc/sys/net/core/rmem_max",
        "/proc/sys/net/core/wmem_max",
        "/usr/lib/systemd",
    ]
    containers = spec["initContainers"] + spec["containers"]
    assert not any(c["securityContext"].get("privileged") for c in containers)


def test_only_the_checker_holds_a_service_account_token() -> None:
    spec = tuner_pod()
    assert spec["automountServiceAccountToken"] is False
    (apply_step,) = spec["initContainers"]
    (checker,) = spec["containers"]
    token_dir = "/var/run/secrets/kubernetes.io/serviceaccount"
    assert all(m["mountPath"] != token_dir for m in apply_step["volumeMounts"])
    (token_mount,) = [m for m in checker["volumeMounts"] if m["mountPath"] == token_dir]
    assert token_mount["readOnly"] is True
    (volume,) = [v for v in spec["volumes"] if v["name"] == token_mount["name"]]
    # A pod-bound token (it names the pod's node for the admission policy) and the CA.
    assert volume["projected"]["sources"] == [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    ]


@pytest.mark.parametrize(
    ("sysctls", "host_network", "apply_step"),
    [
        ({"net.core.rmem_max": "67108864"}, True, True),
        ({"vm.max_map_count": "262144"}, False, True),
        ({}, False, False),
    ],
    ids=["net-sysctl", "vm-sysctl-only", "no-sysctls"],
)
def test_tuner_uses_the_host_network_only_to_set_net_sysctls(
    sysctls: dict[str, str], host_network: bool, apply_step: bool
) -> None:
    spec = tuner_pod(sysctls=sysctls)
    assert spec.get("hostNetwork", False) is host_network
    assert ("dnsPolicy" in spec) is host_network
    assert ("initContainers" in spec) is apply_step
    files = [v["hostPath"]["path"] for v in spec["volumes"] if v["name"].startswith("sysctl-")]
    assert files == ["/proc/sys/" + name.replace(".", "/") for name in sorted(sysctls)]


def test_node_patch_policy_binds_the_tuner_to_its_node_and_its_own_keys() -> None:
    pool, objs = synth()
    policy = one(objs, "ValidatingAdmissionPolicy")
    spec = policy["spec"]
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
    ]
    assert spec["matchConditions"] == [
        {
            "name": "the-node-tuner",
            "expression": "request.userInfo.username == "
            "'system:serviceaccount:kubetrain-gpu:h100-ib-node-tuner'",
        }
    ]
    messages = [v["message"] for v in spec["validations"]]
    assert messages[0] == "the node tuner may change only the node its pod runs on"
    assert "kubetrain.dev/ labels" in messages[1] and "kubetrain.dev/ annotations" in messages[2]
    binding = one(objs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    assert pool.tuner_user == "system:serviceaccount:kubetrain-gpu:h100-ib-node-tuner"


@pytest.mark.parametrize(
    ("profile", "peermem"),
    [
        (NcclProfile.infiniband(), True),
        (NcclProfile.roce(), True),
        (NcclProfile.tcp(), False),
        (NcclProfile.efa(), False),
    ],
    ids=["infiniband", "roce", "tcp", "efa"],
)
def test_tuner_requires_peermem_only_for_infiniband_and_roce(
    profile: NcclProfile, peermem: bool
) -> None:
    pool, _ = synth(profile=profile, preflight_nodes=0)
    assert ("--require-peermem" in pool.tuner_args()) is peermem


def test_priority_class_and_runtime_class() -> None:
    pool, objs = synth(priority_value=5000, preempting=False, runtime_class=True)
    priority = one(objs, "PriorityClass")
    assert priority["metadata"]["name"] == pool.priority_class_name == "kubetrain-h100-ib-training"
    assert priority["value"] == 5000
    assert priority["preemptionPolicy"] == "Never"
    assert priority["globalDefault"] is False
    runtime = one(objs, "RuntimeClass")
    assert runtime["metadata"]["name"] == runtime["handler"] == "nvidia"
    assert pool.runtime_class_name == "nvidia"


def test_no_preflight_and_no_namespace_when_disabled() -> None:
    pool, objs = synth(preflight_nodes=0, preflight_image=None, create_namespace=False)
    assert [o["kind"] for o in objs] == [
        "PriorityClass",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "DaemonSet",
    ]
    assert pool.preflight is None


# --- binding ----------------------------------------------------------------------------


def test_bind_adds_selector_tolerations_priority_runtime_and_the_profile() -> None:
    pool, _ = synth(node_labels={"cloud.example.com/pool": "h100"}, runtime_class=True)
    out = pool.bind(pod_template())
    spec = out["spec"]
    assert spec["nodeSelector"] == {
        "cloud.example.com/pool": "h100",
        "nvidia.com/gpu.product": H100,
    }
    assert spec["tolerations"] == pool.tolerations
    assert spec["priorityClassName"] == "kubetrain-h100-ib-training"
    assert spec["runtimeClassName"] == "nvidia"
    main = spec["containers"][0]
    assert main["resources"]["limits"] == {"nvidia.com/gpu": 8, "rdma/ib": 1}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in main["volumeMounts"]
    assert {e["name"]: e["value"] for e in main["env"]}["NCCL_IB_HCA"] == "ibp"
    assert_valid([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}])


def test_bind_does_not_change_its_input() -> None:
    pool, _ = synth()
    tmpl = pod_template()
    pool.bind(tmpl)
    assert tmpl == pod_template()


def test_bind_without_gpus_skips_runtime_class_and_pod_settings() -> None:
    pool, _ = synth(runtime_class=True)
    spec = pool.bind(pod_template(), gpus_per_node=0)["spec"]
    assert "runtimeClassName" not in spec and "volumes" not in spec
    assert spec["priorityClassName"] == pool.priority_class_name
    assert "nvidia.com/gpu" not in spec["containers"][0]["resources"].get("limits", {})


def test_bind_keeps_a_priority_class_the_template_sets() -> None:
    pool, _ = synth()
    tmpl = pod_template()
    tmpl["spec"]["priorityClassName"] = "urgent"
    assert pool.bind(tmpl)["spec"]["priorityClassName"] == "urgent"


def test_required_tuned_nodes_select_the_tuner_label_but_the_tuner_runs_everywhere() -> None:
    pool, objs = synth(require_tuned_nodes=True)
    assert pool.node_selector["kubetrain.dev/node-tuning"] == "ok"
    assert pool.bind(pod_template())["spec"]["nodeSelector"]["kubetrain.dev/node-tuning"] == "ok"
    tuner_selector = one(objs, "DaemonSet")["spec"]["template"]["spec"]["nodeSelector"]
    assert "kubetrain.dev/node-tuning" not in tuner_selector


def test_profile_node_selector_joins_the_pool_selector() -> None:
    pool, _ = synth(profile=NcclProfile.efa(), gpu_product="NVIDIA-H100-80GB-HBM3")
    assert pool.node_selector == {
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "nvidia.com/gpu.product": H100,
    }


def test_job_constructs_bind_to_the_pool() -> None:
    scope = chart()
    pool = GpuNodePool(scope, "Pool", props(preflight_nodes=0, preflight_image=None))
    resources = Resources(cpu=Quantity.of(16), memory=Quantity.gibibytes(128))
    PyTorchJob(
        scope,
        "Train",
        PyTorchJobProps(
            image=Image("ghcr.io/kubetrain/pytorch-trainer:0.1.0"),
            command=("python", "/opt/kubetrain/train.py"),
            node_pool=pool,
            workers=1,
            resources=resources,
        ),
    )
    MPIJob(
        scope,
        "Horovod",
        MPIJobProps(
            image=Image("ghcr.io/kubetrain/horovod-trainer:0.1.0"),
            command=("python", "/opt/kubetrain/train.py"),
            node_pool=pool,
            workers=2,
            resources=resources,
        ),
    )
    objs = manifests(scope)
    assert_valid(objs)
    jobs = [o for o in objs if o["kind"] in ("PyTorchJob", "MPIJob")]
    assert len(jobs) == 2
    for job in jobs:
        specs = job["spec"].get("pytorchReplicaSpecs") or job["spec"]["mpiReplicaSpecs"]
        worker = specs["Worker"]["template"]["spec"]
        assert worker["priorityClassName"] == pool.priority_class_name
        assert worker["nodeSelector"] == pool.node_selector
        assert worker["containers"][0]["resources"]["limits"]["rdma/ib"] == 1


# --- preflight ----------------------------------------------------------------------------


def test_preflight_is_an_mpijob_over_the_pool_with_the_profile_applied() -> None:
    pool, objs = synth(preflight_nodes=4)
    job = one(objs, "MPIJob")
    load_job(job)
    spec = job["spec"]
    assert job["metadata"]["name"] == "h100-ib-preflight"
    assert spec["slotsPerWorker"] == 8
    assert spec["runPolicy"] == {
        "cleanPodPolicy": "Running",
        "backoffLimit": 0,
        "activeDeadlineSeconds": 1800,
    }
    worker = spec["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 4
    worker_spec = worker["template"]["spec"]
    main = worker_spec["containers"][0]
    assert main["command"] == ["/usr/sbin/sshd", "-De"]
    assert main["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert main["resources"]["limits"]["rdma/ib"] == 1
    assert main["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert worker_spec["nodeSelector"] == pool.node_selector
    term = worker_spec["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term[0]["podAffinityTerm"]["topologyKey"] == pool.topology_key
    launcher_spec = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    script = launcher_spec["containers"][0]["command"][2]
    assert "mpirun --allow-run-as-root -np 32 " in script
    assert "all_reduce_perf -b 8 -e 8G -f 2 -g 1" in script
    assert "-x NCCL_IB_HCA" in script and "-x NCCL_DEBUG=INFO" in script
    assert "volumes" not in launcher_spec
    assert "nvidia.com/gpu" not in launcher_spec["containers"][0]["resources"]["limits"]


def test_preflight_on_the_host_network_moves_sshd_off_port_22() -> None:
    _, objs = synth(profile=NcclProfile.roce(host_network=True))
    replicas = one(objs, "MPIJob")["spec"]["mpiReplicaSpecs"]
    worker = replicas["Worker"]["template"]["spec"]
    assert worker["hostNetwork"] is True
    assert worker["containers"][0]["command"] == ["/usr/sbin/sshd", "-De", "-p", "2222"]
    script = replicas["Launcher"]["template"]["spec"]["containers"][0]["command"][2]
    assert "--mca plm_rsh_args '-p 2222 -o ConnectionAttempts=10'" in script


NCCL_TESTS_OUTPUT = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20
node-0:100:100 [0] NCCL INFO Using network {network}
node-1:200:200 [0] NCCL INFO Using network {network}
#       size         count      type   redop    root     time   algbw   busbw #wrong
  8589934592    2147483648     float     sum      -1    39000  220.26  412.98      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : {busbw}
#
"""


def run_script(
    tmp_path: Path, script: str, *, network: str, busbw: str, status: int = 0
) -> subprocess.CompletedProcess[str]:
    """Run the launcher script with a stand-in mpirun that prints nccl-tests output."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mpirun = bin_dir / "mpirun"
    output = NCCL_TESTS_OUTPUT.format(network=network, busbw=busbw)
    mpirun.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}EOF\nexit {status}\n")
    mpirun.chmod(0o755)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return subprocess.run(
        ["/bin/sh", "-c", script.replace("/tmp/", f"{tmp}/")],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        timeout=30,
        check=False,
    )


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout.strip().splitlines()[-1]


def test_preflight_script_passes_on_the_expected_network_above_the_minimum(tmp_path: Path) -> None:
    pool, _ = synth(preflight_min_busbw_gbps=350.0)
    result = run_script(tmp_path, pool.preflight_script(), network="IB", busbw="386.61")
    assert result.returncode == 0, result.stdout + result.stderr
    assert last_line(result) == (
        "kubetrain-preflight: PASS average bus bandwidth 386.61 GB/s over 2 nodes x 8 GPUs, "
        "network(s) [IB ]"
    )


def test_preflight_script_fails_when_nccl_fell_back_to_sockets(tmp_path: Path) -> None:
    pool, _ = synth()
    result = run_script(tmp_path, pool.preflight_script(), network="Socket", busbw="4.1")
    assert result.returncode == 1
    assert last_line(result).startswith(
        "kubetrain-preflight: FAIL NCCL used network(s) [Socket ], expected IB"
    )


def test_preflight_script_fails_below_the_minimum_bandwidth(tmp_path: Path) -> None:
    pool, _ = synth(preflight_min_busbw_gbps=350.0)
    result = run_script(tmp_path, pool.preflight_script(), network="IB", busbw="120.5")
    assert result.returncode == 1
    assert last_line(result) == (
        "kubetrain-preflight: FAIL average bus bandwidth 120.5 GB/s is below 350 GB/s"
    )


def test_preflight_script_fails_when_mpirun_fails(tmp_path: Path) -> None:
    pool, _ = synth()
    result = run_script(tmp_path, pool.preflight_script(), network="IB", busbw="1", status=3)
    assert result.returncode == 1
    assert last_line(result) == "kubetrain-preflight: FAIL mpirun exited with status 3"


def test_preflight_script_does_not_check_the_network_of_gke_profiles(tmp_path: Path) -> None:
    pool, _ = synth(profile=NcclProfile.gcp_tcpxo(), gpu_product=None)
    result = run_script(tmp_path, pool.preflight_script(), network="FasTrak", busbw="340")
    assert result.returncode == 0, result.stdout
    assert "PASS average bus bandwidth 340 GB/s" in last_line(result)


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"name": "H100"}, r"name \('H100'\) must be a DNS-1123 label"),
        ({"name": "a" * 41}, r"name \('a{41}'\) has 41 characters: at most 40"),
        (
            {"preflight_image": None},
            r"preflight_image \(None\) is required when preflight_nodes \(2\)",
        ),
        ({"preflight_nodes": -1}, r"preflight_nodes \(-1\) must be >= 0"),
        ({"priority_value": 2_000_000_000}, r"priority_value \(2000000000\) must be from 0"),
        ({"gpus_per_node": 0}, r"gpus_per_node \(0\) must be from 1 to 64"),
        (
            {"profile": NcclProfile.gcp_tcpx(), "gpus_per_node": 4},
            r"gpus_per_node \(4\) must be 8 for the gcp-tcpx profile",
        ),
        (
            {"gpu_product": None},
            r"pool 'h100-ib' selects every node: set gpu_product or node_labels",
        ),
        ({"gpu_product": "H100 80GB"}, r"gpu_product\['nvidia.com/gpu.product'\] \('H100 80GB'\)"),
        (
            {
                "profile": NcclProfile.efa(),
                "node_labels": {"node.kubernetes.io/instance-type": "p4d.24xlarge"},
            },
            r"node_labels\['node.kubernetes.io/instance-type'\] \('p4d.24xlarge'\) contradicts",
        ),
        ({"topology_key": "not a key"}, r"topology_key key \('not a key'\)"),
        ({"sysctls": {"rmem_max": "1"}}, r"sysctl \('rmem_max=1'\) must be name=value"),
        ({"tuner_interval_s": 1}, r"tuner_interval_s \(1\) must be >= 10"),
        ({"preflight_min_busbw_gbps": 0.0}, r"preflight_min_busbw_gbps \(0.0\) must be > 0"),
        ({"namespace": "GPU"}, r"namespace \('GPU'\) must be a DNS-1123 label"),
    ],
    ids=[
        "name-uppercase",
        "name-too-long",
        "preflight-without-image",
        "preflight-negative",
        "priority-too-high",
        "no-gpus",
        "tcpx-half-node",
        "empty-selector",
        "bad-gpu-product",
        "selector-contradiction",
        "bad-topology-key",
        "bad-sysctl",
        "interval-too-short",
        "busbw-zero",
        "namespace-uppercase",
    ],
)
def test_fails_with_the_prop_and_value(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        props(**overrides)


def test_fails_on_a_taint_with_an_unknown_effect() -> None:
    with pytest.raises(ValueError, match=r"taint effect \('NoRun'\) must be one of"):
        Taint(key="dedicated", effect="NoRun")


def test_fails_when_two_pools_create_the_same_namespace() -> None:
    scope = chart()
    GpuNodePool(scope, "A", props(name="a100"))
    with pytest.raises(
        ValueError, match=r"Namespace 'kubetrain-gpu' of node pool 'h100'.*create_namespace=False"
    ):
        GpuNodePool(scope, "B", props(name="h100"))
    GpuNodePool(scope, "C", props(name="h200", create_namespace=False))


def test_fails_when_two_pools_emit_the_runtime_class() -> None:
    scope = chart()
    GpuNodePool(scope, "A", props(name="a100", runtime_class=True))
    with pytest.raises(ValueError, match=r"RuntimeClass 'nvidia' of node pool 'h100'"):
        GpuNodePool(scope, "B", props(name="h100", runtime_class=True, create_namespace=False))


def test_fails_binding_a_template_whose_selector_contradicts_the_pool() -> None:
    pool, _ = synth()
    tmpl = pod_template()
    tmpl["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    with pytest.raises(
        ValueError, match=r"nodeSelector\['nvidia.com/gpu.product'\] \('NVIDIA-A100"
    ):
        pool.bind(tmpl)


def test_fails_binding_more_gpus_than_a_node_has() -> None:
    pool, _ = synth()
    with pytest.raises(ValueError, match=r"gpus_per_node \(16\) must be from 0 to the pool's 8"):
        pool.bind(pod_template(), gpus_per_node=16)


def test_unhealthy_signals_must_be_condition_types_or_taint_keys() -> None:
    with pytest.raises(ValueError, match=r"unhealthy_node_taints \('no spaces!'\) must be"):
        props(unhealthy_taints=("no spaces!",))
    assert props().unhealthy_conditions == (
        "KernelDeadlock",
        "ReadonlyFilesystem",
        "SysLogsXIDError",
        "SysLogsSXIDError",
        "SysLogsGPUFallenOff",
    )
