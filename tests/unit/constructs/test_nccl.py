"""NCCL fabric profiles: the variables and pod settings per fabric, no debugging knobs in
generic profiles, apply() on pod templates (idempotent, user settings win), schema
validity of every patched pod, and errors that name the prop and the value."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
from collections.abc import Callable
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubetrain.constructs.nccl import (
    DEBUGGING_KNOBS,
    GENERIC_PROFILES,
    NcclDebug,
    NcclProfile,
    quantity_bytes,
)
from kubetrain.constructs.nccl import infiniband as infiniband_fabric
from kubetrain.constructs.nccl.common import ProfileFields
from kubetrain.constructs.types import Image, Quantity
from kubetrain.manifest import dump_all
from tests.k8s_schema import assert_valid
from tests.snapshot import assert_snapshot

FACTORIES: dict[str, Callable[[], NcclProfile]] = {
    "tcp": NcclProfile.tcp,
    "infiniband": NcclProfile.infiniband,
    "roce": NcclProfile.roce,
    "efa": NcclProfile.efa,
    "gcp-tcpx": NcclProfile.gcp_tcpx,
    "gcp-tcpxo": NcclProfile.gcp_tcpxo,
}


def template(**spec: Any) -> dict[str, Any]:
    """A training pod template with one main container holding cpu and memory."""
    main = {
        "name": "trainer",
        "image": "ghcr.io/kubetrain/pytorch-trainer:0.1.0",
        "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"memory": "64Gi"}},
    }
    return {"metadata": {"labels": {"app": "train"}}, "spec": {"containers": [main], **spec}}


def as_pod(tmpl: dict[str, Any], name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**tmpl.get("metadata", {}), "name": name, "namespace": "default"},
        "spec": tmpl["spec"],
    }


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {var["name"]: var["value"] for var in container.get("env", [])}


# --- what each profile sets -----------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        (
            NcclProfile.tcp(),
            {"NCCL_DEBUG": "WARN", "NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"},
        ),
        (
            NcclProfile.tcp(
                socket_ifnames=("ens1f0", "ens1f1"),
                exact_ifnames=True,
                nsocks_per_thread=4,
                socket_nthreads=16,
            ),
            {
                "NCCL_DEBUG": "WARN",
                "NCCL_IB_DISABLE": "1",
                "NCCL_NSOCKS_PERTHREAD": "4",
                "NCCL_SOCKET_IFNAME": "=ens1f0,ens1f1",
                "NCCL_SOCKET_NTHREADS": "16",
            },
        ),
        (
            NcclProfile.infiniband(),
            {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "eth0"},
        ),
        (
            NcclProfile.infiniband(
                hcas=("mlx5_ib",),
                topo_file="/opt/microsoft/ndv5-topo.xml",
                qps_per_connection=4,
                relaxed_ordering=True,
                sharp=True,
                debug=NcclDebug.INFO,
            ),
            {
                "NCCL_COLLNET_ENABLE": "1",
                "NCCL_DEBUG": "INFO",
                "NCCL_DEBUG_SUBSYS": "INIT,NET",
                "NCCL_IB_HCA": "mlx5_ib",
                "NCCL_IB_PCI_RELAXED_ORDERING": "1",
                "NCCL_IB_QPS_PER_CONNECTION": "4",
                "NCCL_SOCKET_IFNAME": "eth0",
                "NCCL_TOPO_FILE": "/opt/microsoft/ndv5-topo.xml",
            },
        ),
        (
            NcclProfile.roce(
                hcas=("mlx5_0", "mlx5_1:1"),
                exact_hcas=True,
                gid_index=3,
                traffic_class=41,
                service_level=0,
                ib_timeout=22,
                cross_nic=False,
            ),
            {
                "NCCL_CROSS_NIC": "0",
                "NCCL_DEBUG": "WARN",
                "NCCL_IB_GID_INDEX": "3",
                "NCCL_IB_HCA": "=mlx5_0,mlx5_1:1",
                "NCCL_IB_SL": "0",
                "NCCL_IB_TC": "41",
                "NCCL_IB_TIMEOUT": "22",
                "NCCL_SOCKET_IFNAME": "eth0",
            },
        ),
        (NcclProfile.efa(), {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "eth0"}),
        (
            NcclProfile.efa(legacy_ofi_plugin=True),
            {
                "FI_EFA_USE_DEVICE_RDMA": "1",
                "FI_PROVIDER": "efa",
                "NCCL_DEBUG": "WARN",
                "NCCL_SOCKET_IFNAME": "eth0",
            },
        ),
    ],
    ids=[
        "tcp-default",
        "tcp-exact-sockets",
        "ib-default",
        "ib-azure-ndv5",
        "roce-oci",
        "efa-default",
        "efa-legacy-plugin",
    ],
)
def test_generic_profile_env(profile: NcclProfile, expected: dict[str, str]) -> None:
    assert profile.env == expected
    assert list(profile.env) == sorted(profile.env)


def test_gcp_tcpx_sets_the_guides_plugin_and_nccl_variables() -> None:
    env = NcclProfile.gcp_tcpx().env
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "eth1,eth2,eth3,eth4"
    assert env["NCCL_GPUDIRECTTCPX_CTRL_DEV"] == "eth0"
    assert env["NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"] == "/run/tcpx"
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert env["NCCL_PROTO"] == "Simple"
    assert env["NCCL_ALGO"] == "Ring"
    assert env["NCCL_CROSS_NIC"] == "0"
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert NcclProfile.gcp_tcpx().debugging_knobs == (
        "NCCL_ALGO",
        "NCCL_MAX_NCHANNELS",
        "NCCL_MIN_NCHANNELS",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_PROTO",
    )


def test_gcp_tcpxo_sets_the_simple_profile() -> None:
    env = NcclProfile.gcp_tcpxo().env
    assert env["NCCL_FASTRAK_IFNAME"] == ",".join(f"eth{i}" for i in range(1, 9))
    assert env["NCCL_FASTRAK_CTRL_DEV"] == "eth0"
    assert env["NCCL_PROTO"] == "Simple"
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["NCCL_TUNER_CONFIG_PATH"].endswith("/a3plus_tuner_config_simple.textproto")
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"
    assert "NCCL_ALGO" not in env  # left to the tuner plugin


# --- generic profiles never set NCCL's debugging knobs ------------------------------


GENERIC_VARIANTS = [
    NcclProfile.tcp(),
    NcclProfile.tcp(nsocks_per_thread=8, socket_nthreads=8, host_network=True),
    NcclProfile.infiniband(),
    NcclProfile.infiniband(
        hcas=("ibp",), sharp=True, topo_file="/t.xml", qps_per_connection=4, relaxed_ordering=True
    ),
    NcclProfile.roce(gid_index=3, traffic_class=52, cross_nic=False, debug=NcclDebug.INFO),
    NcclProfile.efa(),
    NcclProfile.efa(instance_type="p4d.24xlarge", legacy_ofi_plugin=True),
]


@pytest.mark.parametrize("profile", GENERIC_VARIANTS, ids=lambda p: p.name)
def test_generic_profiles_never_set_debugging_knobs(profile: NcclProfile) -> None:
    assert profile.name in GENERIC_PROFILES
    assert not DEBUGGING_KNOBS & set(profile.env)
    assert profile.debugging_knobs == ()


@given(
    ifnames=st.lists(st.sampled_from(["eth0", "eth1", "ens1f0", "ib0"]), min_size=1, unique=True),
    hcas=st.none()
    | st.lists(st.sampled_from(["mlx5_0", "mlx5_1", "ibp"]), min_size=1, unique=True),
    gid=st.none() | st.integers(0, 255),
    tc=st.none() | st.integers(0, 255),
    sharp=st.booleans(),
    cross_nic=st.none() | st.booleans(),
    debug=st.sampled_from(list(NcclDebug)),
)
def test_no_roce_option_combination_sets_a_debugging_knob(
    ifnames: list[str],
    hcas: list[str] | None,
    gid: int | None,
    tc: int | None,
    sharp: bool,
    cross_nic: bool | None,
    debug: NcclDebug,
) -> None:
    profile = NcclProfile.roce(
        socket_ifnames=tuple(ifnames),
        hcas=tuple(hcas) if hcas else None,
        gid_index=gid,
        traffic_class=tc,
        sharp=sharp,
        cross_nic=cross_nic,
        debug=debug,
    )
    assert not DEBUGGING_KNOBS & set(profile.env)


def test_overrides_may_set_debugging_knobs_and_win() -> None:
    profile = NcclProfile.infiniband(
        overrides={"NCCL_ALGO": "Ring", "NCCL_SOCKET_IFNAME": "=eth1", "NCCL_DEBUG_FILE": "/tmp/n"}
    )
    assert profile.env["NCCL_ALGO"] == "Ring"
    assert profile.env["NCCL_SOCKET_IFNAME"] == "=eth1"
    assert profile.debugging_knobs == ("NCCL_ALGO",)


def test_rejects_a_generic_profile_built_with_debugging_knobs_in_its_settings() -> None:
    with pytest.raises(ValueError, match=r"settings \(NCCL_BUFFSIZE\) of the generic efa"):
        NcclProfile(name="efa", settings={"NCCL_BUFFSIZE": "8388608"})


# --- apply(): pod settings ------------------------------------------------------------


def test_infiniband_apply_sets_env_shm_ipc_lock_and_rdma_resource() -> None:
    tmpl = template()
    tmpl["spec"]["containers"].append({"name": "logger", "image": "busybox:1.36"})
    out = NcclProfile.infiniband(rdma_resource=("rdma/ib", 8)).apply(tmpl, gpus_per_node=8)
    spec = out["spec"]
    assert spec["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
    ]
    for container in spec["containers"]:
        assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
        assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert env_of(container)["NCCL_SOCKET_IFNAME"] == "eth0"
    main, logger = spec["containers"]
    assert main["resources"]["limits"] == {"memory": "64Gi", "nvidia.com/gpu": 8, "rdma/ib": 8}
    assert main["resources"]["requests"] == {"cpu": "8", "memory": "64Gi", "rdma/ib": 8}
    assert "resources" not in logger
    assert out["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    assert "hostNetwork" not in spec


def test_fabric_fields_are_the_profiles_fields() -> None:
    assert set(ProfileFields.__annotations__) == {f.name for f in dataclasses.fields(NcclProfile)}


@pytest.mark.parametrize("name", FACTORIES)
def test_each_factory_builds_a_profile_with_its_fabrics_options(name: str) -> None:
    factory = FACTORIES[name]
    assert factory().name == name
    signature = inspect.signature(factory)
    assert signature.return_annotation == "NcclProfile"
    assert all(
        p.kind is p.KEYWORD_ONLY or p.kind is p.VAR_KEYWORD for p in signature.parameters.values()
    )
    assert factory.__doc__


def test_roce_is_infinibands_fields_with_more_variables() -> None:
    fields = infiniband_fabric.roce(gid_index=3, hcas=("mlx5_0",), exact_hcas=True)
    base = infiniband_fabric.infiniband(hcas=("mlx5_0",), exact_hcas=True)
    assert fields["name"] == "roce"
    assert fields["settings"] == {**base["settings"], "NCCL_IB_GID_INDEX": "3"}
    assert {k: v for k, v in fields.items() if k not in ("name", "settings")} == {
        k: v for k, v in base.items() if k not in ("name", "settings")
    }


def test_apply_does_not_change_its_input_and_is_idempotent() -> None:
    tmpl = template()
    before = copy.deepcopy(tmpl)
    for factory in FACTORIES.values():
        profile = factory()
        once = profile.apply(tmpl, gpus_per_node=8)
        assert tmpl == before
        assert profile.apply(once, gpus_per_node=8) == once


def test_user_settings_win_over_the_profile() -> None:
    tmpl = template(dnsPolicy="Default")
    main = tmpl["spec"]["containers"][0]
    main["env"] = [
        {"name": "NCCL_DEBUG", "value": "TRACE"},
        {"name": "NCCL_SOCKET_IFNAME", "value": "ib0"},
    ]
    main["resources"]["limits"]["rdma/ib"] = 2
    main["volumeMounts"] = [{"name": "big-shm", "mountPath": "/dev/shm"}]
    tmpl["spec"]["volumes"] = [{"name": "big-shm", "emptyDir": {"medium": "Memory"}}]
    tmpl["metadata"]["annotations"] = {"sidecar.istio.io/inject": "true"}
    out = NcclProfile.infiniband(host_network=True).apply(tmpl, gpus_per_node=8)
    container = out["spec"]["containers"][0]
    assert [v["name"] for v in container["env"]].count("NCCL_DEBUG") == 1
    assert env_of(container)["NCCL_DEBUG"] == "TRACE"
    assert env_of(container)["NCCL_SOCKET_IFNAME"] == "ib0"
    assert container["resources"]["limits"]["rdma/ib"] == 2
    assert "rdma/ib" not in container["resources"]["requests"]
    assert container["volumeMounts"] == [{"name": "big-shm", "mountPath": "/dev/shm"}]
    assert [v["name"] for v in out["spec"]["volumes"]] == ["big-shm"]
    assert out["metadata"]["annotations"]["sidecar.istio.io/inject"] == "true"
    assert out["spec"]["hostNetwork"] is True
    assert out["spec"]["dnsPolicy"] == "Default"


def test_host_network_sets_cluster_first_with_host_net() -> None:
    out = NcclProfile.tcp(host_network=True).apply(template(), gpus_per_node=1)
    assert out["spec"]["hostNetwork"] is True
    assert out["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"


def test_tcp_needs_no_capabilities_or_rdma() -> None:
    out = NcclProfile.tcp().apply(template(), gpus_per_node=4)
    main = out["spec"]["containers"][0]
    assert "securityContext" not in main
    assert main["resources"]["limits"] == {"memory": "64Gi", "nvidia.com/gpu": 4}


def test_efa_adds_devices_and_hugepages_and_selects_the_instance_type() -> None:
    out = NcclProfile.efa().apply(template(), gpus_per_node=8)
    main = out["spec"]["containers"][0]
    assert main["resources"]["limits"]["vpc.amazonaws.com/efa"] == 32
    assert main["resources"]["limits"]["hugepages-2Mi"] == "5120Mi"
    assert main["resources"]["requests"]["vpc.amazonaws.com/efa"] == 32
    assert main["resources"]["requests"]["hugepages-2Mi"] == "5120Mi"
    assert out["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    assert NcclProfile.efa(instance_type="p5en.48xlarge").resources["vpc.amazonaws.com/efa"] == 16


def test_a_pod_without_gpus_gets_only_env_and_the_istio_annotation() -> None:
    tmpl = {"spec": {"containers": [{"name": "launcher", "image": "mpi:1.0"}]}}
    out = NcclProfile.gcp_tcpxo().apply(tmpl, gpus_per_node=0)
    assert out["metadata"] == {"annotations": {"sidecar.istio.io/inject": "false"}}
    assert set(out["spec"]) == {"containers"}
    assert set(out["spec"]["containers"][0]) == {"name", "image", "env"}


@pytest.mark.parametrize(
    "factory", [NcclProfile.gcp_tcpx, NcclProfile.gcp_tcpxo], ids=["tcpx", "tcpxo"]
)
def test_gke_profiles_host_network_with_a_privileged_native_sidecar(
    factory: Callable[[], NcclProfile],
) -> None:
    out = factory().apply(template(), gpus_per_node=8)
    spec = out["spec"]
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    (daemon,) = spec["initContainers"]
    assert daemon["restartPolicy"] == "Always"
    assert daemon["securityContext"] == {"privileged": True}
    main = spec["containers"][0]
    assert {
        "name": "nvidia-libraries",
        "mountPath": "/usr/local/nvidia/lib64",
        "readOnly": True,
    } in main["volumeMounts"]
    assert spec["nodeSelector"]["cloud.google.com/gke-accelerator"].startswith("nvidia-h100")


def test_tcpxo_with_networks_uses_multi_networking_and_an_unprivileged_daemon() -> None:
    networks = tuple(f"gpu-nic{i}" for i in range(8))
    out = NcclProfile.gcp_tcpxo(networks=networks).apply(template(), gpus_per_node=8)
    spec, annotations = out["spec"], out["metadata"]["annotations"]
    assert "hostNetwork" not in spec
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert interfaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert interfaces[8] == {"interfaceName": "eth8", "network": "gpu-nic7"}
    devices = annotations["devices.gke.io/container.tcpxo-daemon"]
    assert "- path: /dev/nvidia7\n" in devices and "/dev/dmabuf_import_helper" in devices
    (daemon,) = spec["initContainers"]
    assert daemon["securityContext"] == {"capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}}
    assert {"name": "host-sys", "hostPath": {"path": "/sys"}} in spec["volumes"]


# --- schema and snapshot ---------------------------------------------------------------


SNAPSHOT_PROFILES: dict[str, NcclProfile] = {
    "tcp": NcclProfile.tcp(socket_ifnames=("eth0",), exact_ifnames=True),
    "infiniband": NcclProfile.infiniband(hcas=("ibp",), sharp=True),
    "roce": NcclProfile.roce(hcas=("mlx5_0", "mlx5_1"), exact_hcas=True, host_network=True),
    "efa": NcclProfile.efa(),
    "gcp-tcpx": NcclProfile.gcp_tcpx(),
    "gcp-tcpxo": NcclProfile.gcp_tcpxo(networks=tuple(f"vpc{i}" for i in range(1, 9))),
}


def test_every_profile_applied_is_a_valid_pod_and_matches_the_snapshot() -> None:
    pods = []
    for name, profile in SNAPSHOT_PROFILES.items():
        pods.append(as_pod(profile.apply(template(), gpus_per_node=8), f"{name}-worker"))
        pods.append(as_pod(profile.apply(template(), gpus_per_node=0), f"{name}-launcher"))
    assert_valid(pods)
    assert_snapshot("constructs/nccl-profiles.yaml", dump_all(pods))


# --- errors name the prop and the value ---------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: NcclProfile.tcp(socket_ifnames=()), r"socket_ifnames \(empty\)"),
        (lambda: NcclProfile.tcp(socket_ifnames=("",)), r"socket_ifnames \(\(''\,\)\) holds ''"),
        (
            lambda: NcclProfile.tcp(socket_ifnames=cast(Any, "eth0")),
            r"socket_ifnames \('eth0'\) must be a tuple",
        ),
        (lambda: NcclProfile.tcp(socket_ifnames=("^docker",)), r"holds '\^docker'"),
        (lambda: NcclProfile.tcp(socket_ifnames=("eth0", "eth0")), r"lists a interface name twice"),
        (
            lambda: NcclProfile.tcp(nsocks_per_thread=8, socket_nthreads=16),
            r"nsocks_per_thread \(8\) x socket_nthreads \(16\) = 128 must be at most 64",
        ),
        (
            lambda: NcclProfile.tcp(socket_nthreads=17),
            r"socket_nthreads \(17\) must be an integer from 1 to 16",
        ),
        (
            lambda: NcclProfile.roce(gid_index=256),
            r"gid_index \(256\) must be an integer from 0 to 255",
        ),
        (lambda: NcclProfile.roce(gid_index=-1), r"gid_index \(-1\)"),
        (lambda: NcclProfile.roce(service_level=16), r"service_level \(16\)"),
        (lambda: NcclProfile.roce(ib_timeout=0), r"ib_timeout \(0\)"),
        (
            lambda: NcclProfile.infiniband(hcas=("mlx5 0",)),
            r"hcas \(\('mlx5 0',\)\) holds 'mlx5 0'",
        ),
        (lambda: NcclProfile.infiniband(exact_hcas=True), r"exact_hcas \(True\) needs hcas"),
        (
            lambda: NcclProfile.infiniband(topo_file="topo.xml"),
            r"topo_file \('topo.xml'\) must be an absolute path",
        ),
        (lambda: NcclProfile.infiniband(rdma_resource=("ib", 1)), r"rdma_resource \(\('ib', 1\)\)"),
        (
            lambda: NcclProfile.infiniband(rdma_resource=("rdma/ib", 0)),
            r"rdma_resource count \(0\)",
        ),
        (
            lambda: NcclProfile.infiniband(debug=cast(Any, "TRACE")),
            r"debug \('TRACE'\) must be one of WARN, INFO",
        ),
        (
            lambda: NcclProfile.tcp(shm_size=Quantity.mebibytes(64)),
            r"shm_size \(64Mi\) must be larger",
        ),
        (
            lambda: NcclProfile.efa(instance_type="g5.48xlarge"),
            r"efa_devices \(None\) cannot be derived for instance_type \('g5.48xlarge'\)",
        ),
        (
            lambda: NcclProfile.efa(hugepages=Quantity.of("5Mi")),
            r"hugepages \(5Mi\) must be a positive multiple of 2Mi",
        ),
        (lambda: NcclProfile.efa(efa_devices=0), r"efa_devices \(0\)"),
        (
            lambda: NcclProfile.gcp_tcpxo(networks=("a", "b")),
            r"networks \(\('a', 'b'\)\) must name 8 networks",
        ),
        (lambda: NcclProfile.gcp_tcpx(accelerator="H100"), r"accelerator \('H100'\)"),
        (
            lambda: NcclProfile.tcp(overrides={"NCCL-ALGO": "Ring"}),
            r"overrides key \('NCCL-ALGO'\)",
        ),
        (lambda: NcclProfile(name="nvlink", settings={}), r"name \('nvlink'\) must be one of"),
    ],
    ids=[
        "ifnames-empty",
        "ifname-blank",
        "ifnames-string",
        "ifname-exclusion-marker",
        "ifname-twice",
        "sockets-over-64",
        "nthreads-range",
        "gid-too-high",
        "gid-negative",
        "service-level",
        "ib-timeout",
        "hca-space",
        "exact-hcas-without-hcas",
        "topo-file-relative",
        "rdma-resource-name",
        "rdma-resource-count",
        "debug-level",
        "shm-default-size",
        "efa-unknown-instance",
        "hugepages-odd",
        "efa-zero",
        "tcpxo-networks",
        "tcpx-accelerator",
        "override-name",
        "unknown-profile",
    ],
)
def test_fails_with_the_prop_and_value(build: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_fails_applying_a_gke_profile_to_part_of_a_node() -> None:
    with pytest.raises(ValueError, match=r"gpus_per_node \(4\) must be 8 for the gcp-tcpx profile"):
        NcclProfile.gcp_tcpx().apply(template(), gpus_per_node=4)


def test_fails_adding_hugepages_to_a_container_without_cpu_or_memory() -> None:
    tmpl = {"spec": {"containers": [{"name": "trainer", "image": "t:1"}]}}
    with pytest.raises(ValueError, match=r"container 'trainer' gets hugepages-2Mi from the efa"):
        NcclProfile.efa().apply(tmpl, gpus_per_node=8)


def test_fails_applying_to_a_template_without_containers() -> None:
    with pytest.raises(ValueError, match=r"template.spec.containers \(empty\)"):
        NcclProfile.tcp().apply({"spec": {}}, gpus_per_node=1)


def test_fails_with_negative_gpus() -> None:
    with pytest.raises(ValueError, match=r"gpus_per_node \(-1\) must be >= 0"):
        NcclProfile.tcp().apply(template(), gpus_per_node=-1)


@pytest.mark.parametrize(
    ("text", "size"),
    [("16Gi", 16 * 2**30), ("5120Mi", 5120 * 2**20), ("1G", 10**9), ("1e9", 10**9), ("512", 512)],
    ids=["Gi", "Mi", "G", "exponent", "plain"],
)
def test_quantity_bytes(text: str, size: int) -> None:
    assert quantity_bytes("shm_size", Quantity(text)) == size


def test_daemon_image_is_a_pinned_image() -> None:
    image = Image("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.13")
    profile = NcclProfile.gcp_tcpx(daemon_image=image)
    assert profile.sidecars[0]["image"] == str(image)
