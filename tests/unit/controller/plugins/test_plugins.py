"""The plugins' desired children: names, labels, owner references, environment, gating."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubetrain.api import keys as K
from kubetrain.api.common import JobBase
from kubetrain.api.defaults import apply_defaults
from kubetrain.api.mpi import MPIJob
from kubetrain.controller.model import Observed
from kubetrain.controller.plugins.base import JobPlugin
from kubetrain.controller.plugins.mpi_plugin import MPIPlugin
from kubetrain.controller.plugins.registry import build_registry, plugin_for
from kubetrain.controller.policies import startup
from kubetrain.controller.sshkeys import SshKeyPair, ssh_secret_name
from tests.builders.observed import JOB_UID, mpi_raw, pod, pytorch_raw, service, tf_raw, typed


def build(plugin: JobPlugin[Any], job: JobBase, observed: Observed) -> Iterator[dict[str, Any]]:
    """The plugin's children behind the startup gate its rules give (what the startup
    policy hands the build step of a job that has just started)."""
    gate = startup.evaluate(
        plugin.startup_rules(job), observed, started_at=None, timeout_seconds=600
    )
    return plugin.build(job, observed, gate)


def by_name(objs: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


def env(obj: dict[str, Any], container: int = 0) -> dict[str, str]:
    spec = obj["spec"]["template"]["spec"] if obj["kind"] == "Job" else obj["spec"]
    return {e["name"]: e["value"] for e in spec["containers"][container].get("env") or []}


def test_registry_is_ordered_and_rejects_unknown_kinds() -> None:
    assert list(build_registry(("MPIJob", "PyTorchJob"))) == ["PyTorchJob", "MPIJob"]
    assert list(build_registry(("XGBoostJob", "TFJob"))) == ["TFJob", "XGBoostJob"]
    with pytest.raises(ValueError, match="no plugin for kinds"):
        build_registry(("CaffeJob",))


def test_pytorch_children_before_and_after_the_master_is_ready() -> None:
    plugin = plugin_for("PyTorchJob")
    job = typed(pytorch_raw(workers=2))
    first = by_name(build(plugin, job, Observed()))
    # Workers are gated on the master; every Service is created at once.
    assert set(first) == {
        ("Pod", "job-master-0"),
        ("Service", "job-master-0"),
        ("Service", "job-worker-0"),
        ("Service", "job-worker-1"),
    }
    ready = Observed(
        pods={"job-master-0": pod("job-master-0")},
        services={"job-master-0": service("job-master-0")},
    )
    second = by_name(build(plugin, job, ready))
    worker = second[("Pod", "job-worker-1")]
    assert worker["metadata"]["labels"] == {
        K.OPERATOR_NAME: "pytorchjob-controller",
        K.JOB_NAME: "job",
        K.REPLICA_TYPE: "worker",
        K.REPLICA_INDEX: "1",
    }
    assert worker["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "job",
            "uid": JOB_UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert worker["metadata"]["annotations"][K.ISTIO_INJECT_ANNOTATION] == "false"
    assert worker["spec"]["restartPolicy"] == "OnFailure"
    assert env(worker)["RANK"] == "2" and env(worker)["MASTER_ADDR"] == "job-master-0"
    svc = second[("Service", "job-worker-1")]
    assert svc["spec"]["clusterIP"] == "None"
    # A rank restarting in place (not Ready) still resolves for its peers.
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"][K.REPLICA_INDEX] == "1"
    assert svc["spec"]["ports"] == [
        {"name": "pytorchjob-port", "port": 23456, "targetPort": 23456, "protocol": "TCP"}
    ]


def test_exit_code_pods_never_restart_in_place() -> None:
    objs = by_name(
        build(
            plugin_for("PyTorchJob"),
            typed(pytorch_raw(master=False, restart_policy="ExitCode")),
            Observed(),
        )
    )
    assert objs[("Pod", "job-worker-0")]["spec"]["restartPolicy"] == "Never"


def test_a_variable_the_user_set_is_kept() -> None:
    raw = pytorch_raw(master=False, workers=1)
    raw["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "PET_NPROC_PER_NODE", "value": "4"}
    ]
    objs = by_name(build(plugin_for("PyTorchJob"), typed(raw), Observed()))
    assert env(objs[("Pod", "job-worker-0")])["PET_NPROC_PER_NODE"] == "4"


def test_tensorflow_children_and_tf_config() -> None:
    plugin = plugin_for("TFJob")
    job = typed(tf_raw(chief=True, workers=2, ps=1))
    ready = Observed(
        pods={"job-chief-0": pod("job-chief-0")}, services={"job-chief-0": service("job-chief-0")}
    )
    objs = by_name(build(plugin, job, ready))
    assert {name for kind, name in objs if kind == "Pod"} == {
        "job-chief-0",
        "job-ps-0",
        "job-worker-0",
        "job-worker-1",
    }
    config = json.loads(env(objs[("Pod", "job-ps-0")])["TF_CONFIG"])
    assert config["task"] == {"type": "ps", "index": 0}
    assert config["cluster"]["worker"] == ["job-worker-0.ns.svc:2222", "job-worker-1.ns.svc:2222"]
    assert objs[("Pod", "job-chief-0")]["metadata"]["labels"][K.JOB_ROLE] == "master"
    gated = by_name(build(plugin, job, Observed()))
    assert ("Pod", "job-worker-0") not in gated and ("Pod", "job-ps-0") in gated


def test_tensorflow_worker_0_is_the_master_without_a_chief() -> None:
    objs = by_name(build(plugin_for("TFJob"), typed(tf_raw(workers=2)), Observed()))
    assert objs[("Pod", "job-worker-0")]["metadata"]["labels"][K.JOB_ROLE] == "master"
    assert K.JOB_ROLE not in objs[("Pod", "job-worker-1")]["metadata"]["labels"]


def fixed_keys() -> SshKeyPair:
    return SshKeyPair(private_pem="PRIVATE\n", public_openssh="ecdsa-sha2-nistp521 AAAA test\n")


def test_mpi_children_and_the_gated_launcher() -> None:
    plugin = MPIPlugin(keygen=fixed_keys)
    job = typed(mpi_raw(workers=2, slots=4))
    # The first build has every child: the key pair's Secret, named from the job's uid
    # (the same name in every pass and after a crash), and the pods that mount it.
    first = by_name(build(plugin, job, Observed()))
    name = ssh_secret_name("job-ssh-", JOB_UID)
    assert re.fullmatch(r"job-ssh-[bcdfghjklmnpqrstvwxz2456789]{5}", name)
    assert set(first) == {
        ("Service", "job"),
        ("ConfigMap", "job-config"),
        ("Secret", name),
        ("Pod", "job-worker-0"),
        ("Pod", "job-worker-1"),
        ("Job", "job-launcher"),
    }
    assert list(by_name(build(plugin, job, Observed())))[2] == ("Secret", name)  # before pods
    volumes = {v["name"]: v for v in first[("Pod", "job-worker-0")]["spec"]["volumes"]}
    assert volumes["ssh-auth"]["secret"]["secretName"] == name
    # A job whose status names its Secret (an operator that chose the suffix at random
    # started it) keeps that one.
    objs = by_name(build(plugin, job, Observed(ssh_secret_name="job-ssh-x7k2p")))
    secret = objs[("Secret", "job-ssh-x7k2p")]
    assert ("Secret", name) not in objs
    assert secret["type"] == "kubernetes.io/ssh-auth" and secret["immutable"] is True
    assert base64.b64decode(secret["data"]["ssh-publickey"]).decode() == fixed_keys().public_openssh
    assert secret["metadata"]["ownerReferences"][0]["uid"] == JOB_UID
    assert "generateName" not in secret["metadata"]
    recorded = Observed(
        secrets={"job-ssh-x7k2p": {"metadata": {"name": "job-ssh-x7k2p"}}},
        ssh_secret_name="job-ssh-x7k2p",
    )
    objs = by_name(build(plugin, job, recorded))
    # launcherCreationPolicy AtStartup (the default): the launcher Job comes with the
    # workers, its pod gated until they are Ready.
    assert set(objs) == {
        ("Service", "job"),
        ("ConfigMap", "job-config"),
        ("Pod", "job-worker-0"),
        ("Pod", "job-worker-1"),
        ("Job", "job-launcher"),
    }
    gated = objs[("Job", "job-launcher")]["spec"]["template"]["spec"]
    assert gated["schedulingGates"] == [{"name": K.STARTUP_GATE}]
    for kind, name in (("Service", "job"), ("ConfigMap", "job-config"), ("Job", "job-launcher")):
        assert objs[(kind, name)]["metadata"]["labels"][K.APP] == "job"
    assert K.APP not in objs[("Service", "job")]["spec"]["selector"]
    assert objs[("ConfigMap", "job-config")]["data"]["hostfile"] == (
        "job-worker-0.job.ns.svc slots=4\njob-worker-1.job.ns.svc slots=4\n"
    )
    worker = objs[("Pod", "job-worker-0")]
    assert worker["spec"]["hostname"] == "job-worker-0" and worker["spec"]["subdomain"] == "job"
    # Intel MPI's and MPICH's Hydra proxies reach the launcher by its bare host name.
    assert worker["spec"]["dnsConfig"] == {"searches": ["job.ns.svc.cluster.local"]}
    assert worker["spec"]["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"]
    assert env(worker) == {"K_MPI_JOB_ROLE": "worker"}
    assert worker["metadata"]["labels"][K.JOB_ROLE] == "worker"
    volumes = {v["name"]: v for v in worker["spec"]["volumes"]}
    assert volumes["ssh-auth"]["secret"]["secretName"] == "job-ssh-x7k2p"

    ready = Observed(
        pods={n: pod(n) for n in ("job-worker-0", "job-worker-1")},
        services={"job": service("job", replica_index=False)},
        secrets=recorded.secrets,
        ssh_secret_name="job-ssh-x7k2p",
    )
    objs = by_name(build(plugin, job, ready))
    assert not [k for k in objs if k[0] == "Secret"]  # made once
    launcher = objs[("Job", "job-launcher")]
    launcher_env = env(launcher)
    assert launcher_env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert launcher_env["NVIDIA_VISIBLE_DEVICES"] == ""
    launcher_spec = launcher["spec"]["template"]["spec"]
    assert "schedulingGates" not in launcher_spec  # made after the workers: no gate
    assert launcher_spec["hostname"] == "job-launcher" and launcher_spec["subdomain"] == "job"
    labels = launcher["spec"]["template"]["metadata"]["labels"]
    assert labels[K.JOB_ROLE] == "launcher" and K.REPLICA_INDEX not in labels
    mounts = {m["name"]: m["mountPath"] for m in launcher_spec["containers"][0]["volumeMounts"]}
    assert mounts == {"ssh-auth": "/root/.ssh", "mpi-job-config": "/etc/mpi"}
    volumes = {v["name"]: v for v in launcher_spec["volumes"]}
    assert volumes["ssh-auth"]["secret"]["secretName"] == "job-ssh-x7k2p"
    assert launcher_spec["restartPolicy"] == "OnFailure"
    discover = objs[("ConfigMap", "job-config")]["data"]["discover_hosts.sh"]
    assert discover == "#!/bin/sh\necho job-worker-0.job.ns.svc\necho job-worker-1.job.ns.svc\n"


def test_mpi_launcher_waits_for_workers_ready_when_asked() -> None:
    plugin = MPIPlugin(keygen=fixed_keys)
    job = typed(mpi_raw(workers=2, launcherCreationPolicy="WaitForWorkersReady"))
    secrets = {"job-ssh-x7k2p": {"metadata": {"name": "job-ssh-x7k2p"}}}
    recorded = Observed(secrets=secrets, ssh_secret_name="job-ssh-x7k2p")
    assert ("Job", "job-launcher") not in by_name(build(plugin, job, recorded))
    ready = Observed(
        pods={n: pod(n) for n in ("job-worker-0", "job-worker-1")},
        services={"job": service("job", replica_index=False)},
        secrets=secrets,
        ssh_secret_name="job-ssh-x7k2p",
    )
    launcher = by_name(build(plugin, job, ready))[("Job", "job-launcher")]
    assert "schedulingGates" not in launcher["spec"]["template"]["spec"]


@pytest.mark.parametrize(
    ("run_policy", "expected"),
    [
        pytest.param(
            {"ttlSecondsAfterFinished": 60, "backoffLimit": 3},
            {"ttlSecondsAfterFinished": 60, "backoffLimit": 3},
            id="both",
        ),
        # At least a minute on the Job: Kubernetes' TTL controller must not remove the
        # launcher before the operator read its outcome (it would be created again).
        pytest.param({"ttlSecondsAfterFinished": 0}, {"ttlSecondsAfterFinished": 60}, id="ttl-0"),
        pytest.param(
            {"ttlSecondsAfterFinished": 59}, {"ttlSecondsAfterFinished": 60}, id="ttl-under-60"
        ),
        pytest.param({"cleanPodPolicy": "Running"}, {}, id="neither"),
    ],
)
def test_mpi_launcher_job_takes_the_run_policys_ttl_and_backoff_limit_as_upstream(
    run_policy: dict[str, Any], expected: dict[str, int]
) -> None:
    """mpi-operator v0.8.0's newLauncherJob sets the batch Job's ttlSecondsAfterFinished
    and backoffLimit from the MPIJob's runPolicy; kubetrain keeps the TTL at a minute or
    more."""
    plugin = MPIPlugin(keygen=fixed_keys)
    job = typed(mpi_raw(workers=1, runPolicy=run_policy))
    secrets = {"job-ssh-x7k2p": {"metadata": {"name": "job-ssh-x7k2p"}}}
    objs = by_name(build(plugin, job, Observed(secrets=secrets, ssh_secret_name="job-ssh-x7k2p")))
    spec = objs[("Job", "job-launcher")]["spec"]
    assert {k: v for k, v in spec.items() if k != "template"} == expected


def test_mpi_launcher_running_ranks_is_in_the_hostfile_by_its_host_name() -> None:
    plugin = MPIPlugin(keygen=fixed_keys)
    job = typed(mpi_raw(workers=1, slots=2, runLauncherAsWorker=True, mpiImplementation="Intel"))
    secrets = {"job-ssh-x7k2p": {"metadata": {"name": "job-ssh-x7k2p"}}}
    objs = by_name(build(plugin, job, Observed(secrets=secrets, ssh_secret_name="job-ssh-x7k2p")))
    assert objs[("ConfigMap", "job-config")]["data"]["hostfile"] == (
        "job-launcher.job.ns.svc:2\njob-worker-0.job.ns.svc:2\n"
    )
    launcher = objs[("Job", "job-launcher")]["spec"]["template"]
    assert launcher["spec"]["hostname"] == "job-launcher"
    assert launcher["metadata"]["labels"][K.REPLICA_INDEX] == "0"
    worker = objs[("Pod", "job-worker-0")]
    assert worker["metadata"]["labels"][K.REPLICA_INDEX] == "1"


def test_mpi_rejects_restart_policies_a_batch_job_cannot_have() -> None:
    # load_job refuses this job already (invariant mpi-restart-policy, also a CEL rule);
    # the model is built directly to test the plugin's own check behind it.
    errors = MPIPlugin(keygen=fixed_keys).validate(
        apply_defaults(
            MPIJob.model_validate(
                mpi_raw(
                    mpiReplicaSpecs={
                        "Launcher": {
                            "replicas": 1,
                            "restartPolicy": "Never",
                            "template": {"spec": {"containers": [{"name": "l", "image": "i"}]}},
                        },
                        "Worker": {
                            "replicas": 1,
                            "restartPolicy": "ExitCode",
                            "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}},
                        },
                    }
                )
            )
        )
    )
    assert [e.path for e in errors] == ["spec.mpiReplicaSpecs.Worker.restartPolicy"]
    assert "Never or OnFailure" in str(errors[0])


def test_real_ssh_keys_are_ecdsa_p521() -> None:
    from kubetrain.controller.sshkeys import generate_ssh_keys

    keys = generate_ssh_keys()
    assert keys.private_pem.startswith("-----BEGIN EC PRIVATE KEY-----")
    assert keys.public_openssh.startswith("ecdsa-sha2-nistp521 ")
    assert generate_ssh_keys().public_openssh != keys.public_openssh


@settings(max_examples=40, deadline=None)
@given(
    masters=st.integers(0, 1), workers=st.integers(0, 6), nproc=st.sampled_from(["1", "4", "auto"])
)
def test_pytorch_children_are_unique_owned_and_consistent(
    masters: int, workers: int, nproc: str
) -> None:
    if masters + workers == 0:
        return
    raw = pytorch_raw(master=bool(masters), workers=workers)
    raw["spec"]["nprocPerNode"] = nproc
    job = typed(raw)
    observed = Observed(
        pods={"job-master-0": pod("job-master-0")},
        services={"job-master-0": service("job-master-0")},
    )
    objs = list(build(plugin_for("PyTorchJob"), job, observed))
    keys = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert len(keys) == len(set(keys))
    pods = [o for o in objs if o["kind"] == "Pod"]
    assert len(pods) == masters + workers
    assert all(o["metadata"]["ownerReferences"][0]["uid"] == JOB_UID for o in objs)
    expected_world = (masters + workers) * (int(nproc) if nproc.isdigit() else 1)
    ranks = set()
    for p in pods:
        variables = env(p)
        if masters:
            assert variables["WORLD_SIZE"] == str(expected_world)
            ranks.add(int(variables["RANK"]))
        assert variables["PET_NNODES"] == str(masters + workers)
    if masters:
        assert ranks == set(range(masters + workers))
