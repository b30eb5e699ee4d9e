"""Training runtime constructs: what each framework's runtime holds, the node pool and NCCL
profile bindings, the Kubeflow SDK's needs (labels, the ``node`` container, readable
limits), placement across one TrainJob's pods, and props checked when made."""

from __future__ import annotations

import dataclasses
from typing import Any

import cdk8s
import pytest

from kubetrain.api import keys as K
from kubetrain.api.trainer import load_trainer_object
from kubetrain.constructs.job_common import Placement
from kubetrain.constructs.nccl import NcclProfile
from kubetrain.constructs.node_pool import GpuNodePool, GpuNodePoolProps
from kubetrain.constructs.objects import manifests
from kubetrain.constructs.runtimes import (
    JaxRuntime,
    MpiRuntime,
    MpiRuntimeProps,
    RuntimeConstruct,
    RuntimeFramework,
    RuntimeProps,
    TensorFlowRuntime,
    TorchRuntime,
    XGBoostRuntime,
)
from kubetrain.constructs.types import Image, Quantity, Resources
from kubetrain.frameworks import pytorch, registry
from tests.k8s_schema import assert_valid
from tests.unit.constructs.jobs_helpers import TRAINER, synth

H100 = "NVIDIA-H100-80GB-HBM3"


def one(objs: list[dict[str, Any]]) -> dict[str, Any]:
    (obj,) = [o for o in objs if o["kind"].endswith("TrainingRuntime")]
    assert load_trainer_object(obj) is not None
    assert_valid([obj])
    return obj


def jobs(runtime: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {j["name"]: j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"]}


def pod(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["template"]["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize(
    ("construct", "policy", "label", "port"),
    [
        (TorchRuntime, {"torch": {}}, "torch", 29500),
        (JaxRuntime, {"jax": {}}, "jax", 29500),
        (XGBoostRuntime, {"xgboost": {}}, "xgboost", 29500),
        (TensorFlowRuntime, {}, "tensorflow", 2222),
    ],
    ids=["torch", "jax", "xgboost", "tensorflow"],
)
def test_single_job_runtimes_carry_what_the_sdk_reads(
    construct: type[RuntimeConstruct], policy: dict[str, Any], label: str, port: int
) -> None:
    objs = synth(lambda s: construct(s, "Rt", RuntimeProps(image=TRAINER, num_nodes=3)))
    runtime = one(objs)
    assert runtime["kind"] == "ClusterTrainingRuntime" and runtime["metadata"]["name"] == "rt"
    assert runtime["metadata"]["labels"] == {K.TRAINER_FRAMEWORK_LABEL: label}
    assert runtime["spec"]["mlPolicy"] == {"numNodes": 3, **policy}
    (node,) = jobs(runtime).values()
    assert node["template"]["metadata"]["labels"] == {K.TRAINER_ANCESTOR_LABEL: "trainer"}
    spec = pod(node)
    (container,) = spec["containers"]
    assert container["name"] == "node" and container["image"] == str(TRAINER)
    assert container["ports"] == [{"containerPort": port, "protocol": "TCP"}]
    assert spec["restartPolicy"] == "OnFailure"
    assert spec["automountServiceAccountToken"] is False


def test_every_registered_policy_has_a_runtime_construct_reading_it() -> None:
    constructs_by_policy = {
        c.policy.name: c
        for c in (TorchRuntime, JaxRuntime, XGBoostRuntime, TensorFlowRuntime, MpiRuntime)
    }
    assert set(constructs_by_policy) == {p.name for p in registry.POLICIES}
    for name, construct in constructs_by_policy.items():
        assert construct.policy is registry.BY_NAME[name]


def test_a_policys_construct_is_its_policy_alone() -> None:
    # A framework added to the registry gets its runtime construct from one line: the
    # mlPolicy entry, the framework label and the node port are the policy's.
    class Torch2Runtime(RuntimeConstruct):
        policy = dataclasses.replace(pytorch.POLICY, rank_port=23456)

    runtime = one(synth(lambda s: Torch2Runtime(s, "Rt", RuntimeProps(image=TRAINER))))
    assert runtime["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}
    assert runtime["metadata"]["labels"] == {K.TRAINER_FRAMEWORK_LABEL: "torch"}
    (node,) = jobs(runtime).values()
    assert pod(node)["containers"][0]["ports"] == [{"containerPort": 23456, "protocol": "TCP"}]


def test_the_base_class_alone_is_no_runtime() -> None:
    with pytest.raises(TypeError, match="RuntimeConstruct is not a runtime of one framework"):
        synth(lambda s: RuntimeConstruct(s, "Rt", RuntimeProps(image=TRAINER)))


def test_a_namespaced_runtime() -> None:
    props = RuntimeProps(image=TRAINER, cluster_scoped=False, namespace="team-a")
    runtime = one(synth(lambda s: TorchRuntime(s, "Mine", props)))
    assert runtime["kind"] == "TrainingRuntime"
    assert runtime["metadata"]["namespace"] == "team-a"


def test_restart_backoff_and_ttl() -> None:
    props = RuntimeProps(
        image=TRAINER, restart_policy="Never", backoff_limit=2, ttl_seconds_after_finished=600
    )
    runtime = one(synth(lambda s: TorchRuntime(s, "Strict", props)))
    assert runtime["spec"]["template"]["spec"]["ttlSecondsAfterFinished"] == 600
    node = jobs(runtime)["node"]
    assert node["template"]["spec"]["backoffLimit"] == 2
    assert pod(node)["restartPolicy"] == "Never"


def test_a_runtimes_nodes_get_the_termination_grace_a_checkpoint_needs() -> None:
    props = RuntimeProps(image=TRAINER, termination_grace_seconds=90)
    runtime = one(synth(lambda s: TorchRuntime(s, "Graceful", props)))
    assert pod(jobs(runtime)["node"])["terminationGracePeriodSeconds"] == 90


def test_mpi_runtime_nodes_serve_ssh_and_the_launcher_waits_for_them() -> None:
    props = MpiRuntimeProps(
        image=Image("ghcr.io/kubetrain/horovod-trainer:0.1.0"),
        flavor=RuntimeFramework.HOROVOD,
        num_nodes=2,
        slots_per_node=4,
        command=("mpirun", "python", "-m", "images.horovod.train"),
        launcher_resources=Resources(cpu=Quantity.of(1), cpu_limit=Quantity.of(1)),
    )
    runtime = one(synth(lambda s: MpiRuntime(s, "Hvd", props)))
    assert runtime["metadata"]["labels"] == {K.TRAINER_FRAMEWORK_LABEL: "horovod"}
    assert runtime["spec"]["mlPolicy"]["mpi"] == {
        "numProcPerNode": 4,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/root/.ssh",
        "runLauncherAsNode": False,
    }
    by_name = jobs(runtime)
    assert list(by_name) == ["node", "launcher"]
    # The nodes serve sshd and never end: the launcher's success is the job's.
    assert runtime["spec"]["template"]["spec"]["successPolicy"] == {
        "operator": "All",
        "targetReplicatedJobs": ["launcher"],
    }
    node = pod(by_name["node"])["containers"][0]
    assert node["command"] == ["/usr/sbin/sshd", "-De"]
    assert node["readinessProbe"]["tcpSocket"] == {"port": 22}
    launcher = by_name["launcher"]
    assert launcher["dependsOn"] == [{"name": "node", "status": "Ready"}]
    assert launcher["template"]["metadata"]["labels"] == {K.TRAINER_ANCESTOR_LABEL: "trainer"}
    container = pod(launcher)["containers"][0]
    assert container["command"][0] == "mpirun"
    assert container["resources"]["limits"] == {"cpu": "1"}


def test_a_non_root_image() -> None:
    props = MpiRuntimeProps(
        image=Image("ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0"),
        flavor=RuntimeFramework.DEEPSPEED,
        run_as_user=1000,
        ssh_auth_mount_path="/home/mpiuser/.ssh",
    )
    runtime = one(synth(lambda s: MpiRuntime(s, "Ds", props)))
    for job in jobs(runtime).values():
        assert pod(job)["securityContext"] == {"fsGroup": 1000}
        assert pod(job)["containers"][0]["securityContext"] == {"runAsUser": 1000}


def test_a_pool_binding_brings_the_fabric_and_the_sdk_still_reads_the_gpus() -> None:
    def build(scope: Any) -> None:
        pool = GpuNodePool(
            scope,
            "Pool",
            GpuNodePoolProps(
                name="h100-ib",
                profile=NcclProfile.infiniband(hcas=("ibp",), rdma_resource=("rdma/ib", 1)),
                tuner_image=Image("ghcr.io/kubetrain/operator:0.1.0"),
                gpu_product=H100,
                preflight_nodes=0,
            ),
        )
        TorchRuntime(
            scope,
            "torch-h100-ib",
            RuntimeProps(image=TRAINER, node_pool=pool, placement=Placement.SAME_BLOCK),
        )

    runtime = one(synth(build))
    spec = pod(jobs(runtime)["node"])
    container = spec["containers"][0]
    limits = container["resources"]["limits"]
    # The pool's 8 GPUs and the fabric's RDMA device: the SDK reads the GPU key first.
    assert limits["nvidia.com/gpu"] == 8 and limits["rdma/ib"] == 1
    assert spec["nodeSelector"][K.GPU_PRODUCT_LABEL] == H100
    assert any(t["key"] == "nvidia.com/gpu" for t in spec["tolerations"])
    assert any(m["mountPath"] == "/dev/shm" for m in container["volumeMounts"])
    assert "IPC_LOCK" in container["securityContext"]["capabilities"]["add"]
    assert any(e["name"].startswith("NCCL_") for e in container["env"])
    (term,) = spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # One TrainJob's pods together: the JobSet name label's value comes from each pod.
    assert term["matchLabelKeys"] == [K.JOBSET_NAME_LABEL]


def test_limits_the_sdk_cannot_read_get_a_cpu_limit_and_a_warning() -> None:
    props = RuntimeProps(
        image=TRAINER, resources=Resources(cpu=Quantity.of(2), memory=Quantity.gibibytes(4))
    )
    with pytest.warns(RuntimeWarning, match="kubeflow/sdk#516"):
        objs = synth(lambda s: TorchRuntime(s, "Mem", props))
    limits = pod(jobs(one(objs))["node"])["containers"][0]["resources"]["limits"]
    assert limits == {"memory": "4Gi", "cpu": "2"}


def test_readable_limits_need_no_change() -> None:
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "t")
    props = RuntimeProps(
        image=TRAINER, resources=Resources(cpu=Quantity.of(1), cpu_limit=Quantity.of(1))
    )
    runtime = TorchRuntime(chart, "Cpu", props)
    assert runtime.sdk_notes == []
    assert one(manifests(chart))


@pytest.mark.parametrize(
    ("props", "fragment"),
    [
        ({"num_nodes": 0}, "num_nodes (0) must be between 1 and 1000"),
        ({"restart_policy": "Always"}, "restart_policy ('Always') must be OnFailure or Never"),
        ({"backoff_limit": -1}, "backoff_limit (-1) must be >= 0"),
        ({"name": "Bad_Name"}, "name ('Bad_Name') must be a DNS-1035 label"),
    ],
)
def test_bad_props_are_named(props: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        RuntimeProps(image=TRAINER, **props)


def test_bad_mpi_props_are_named() -> None:
    with pytest.raises(ValueError, match=r"slots_per_node \(0\) must be >= 1"):
        MpiRuntimeProps(image=TRAINER, slots_per_node=0)
    with pytest.raises(ValueError, match=r"flavor \('torch'\) must be horovod or deepspeed"):
        MpiRuntimeProps(image=TRAINER, flavor=RuntimeFramework.TORCH)
