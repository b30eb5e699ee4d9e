"""Each kind from creation to Succeeded: the children upstream would create (names,
labels, owner references, environment), Running, success, and what is left after."""

from __future__ import annotations

import base64
import json

from kubetrain.api import keys as K
from tests.integration.kube import condition, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, env_of, mpi_job, pytorch_job, tf_job


def _owned_by(obj: dict[str, object], job: dict[str, object]) -> bool:
    owners: list[dict[str, object]] = obj["metadata"]["ownerReferences"]  # type: ignore[index]
    uid = job["metadata"]["uid"]  # type: ignore[index]
    return any(o["uid"] == uid and o["controller"] for o in owners)


def test_pytorchjob_runs_to_success(operator: RunningOperator, jobs: Jobs) -> None:
    job = jobs.create(pytorch_job("ddp", workers=3))
    expected = {"ddp-master-0", "ddp-worker-0", "ddp-worker-1", "ddp-worker-2"}
    pods = jobs.wait_running("ddp", expected)
    running = jobs.wait_condition("PyTorchJob", "ddp", "Running")

    services = jobs.services("ddp")
    assert set(services) == expected
    for name in expected:
        assert services[name]["spec"]["clusterIP"] == "None"
        assert _owned_by(services[name], job) and _owned_by(pods[name], job)
    master = pods["ddp-master-0"]
    assert master["metadata"]["labels"] == {
        K.OPERATOR_NAME: "pytorchjob-controller",
        K.JOB_NAME: "ddp",
        K.REPLICA_TYPE: "master",
        K.REPLICA_INDEX: "0",
        K.JOB_ROLE: "master",
    }
    env = env_of(pods["ddp-worker-2"])
    # 4 nodes x nprocPerNode 2: WORLD_SIZE counts processes, not pods.
    assert env["WORLD_SIZE"] == "8"
    assert env["RANK"] == env["PET_NODE_RANK"] == "3"
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "ddp-master-0"
    assert env["MASTER_PORT"] == "23456" and env["PET_NNODES"] == "4"
    assert services["ddp-master-0"]["spec"]["ports"][0]["port"] == 23456
    assert running["status"]["replicaStatuses"]["Worker"]["active"] == 3

    jobs.exit("ddp-master-0", 0)
    done = jobs.wait_condition("PyTorchJob", "ddp", "Succeeded")
    assert condition(done, "Running")["status"] == "False"  # type: ignore[index]
    assert done["status"]["completionTime"]
    assert done["status"]["replicaStatuses"]["Master"]["succeeded"] == 1
    # The workers were still running: a finished job leaves no pod running.
    pods = jobs.wait_pods("ddp", lambda p: set(p) == {"ddp-master-0"}, what="only the master left")
    assert pods["ddp-master-0"]["status"]["phase"] == "Succeeded"
    assert jobs.state("PyTorchJob", "ddp") == "Succeeded"


def test_workers_wait_for_the_master_to_be_ready(operator: RunningOperator, jobs: Jobs) -> None:
    jobs.create(pytorch_job("gated", workers=2))
    pods = jobs.wait_running("gated", {"gated-master-0", "gated-worker-0", "gated-worker-1"})
    master_created = pods["gated-master-0"]["metadata"]["creationTimestamp"]
    for name in ("gated-worker-0", "gated-worker-1"):
        assert pods[name]["metadata"]["creationTimestamp"] >= master_created
    # The wait is announced in the job's Created Event, with what it created.
    created = jobs.wait_event("gated", "PyTorchJobCreated")
    assert "Waiting for the master (gated-master-0) to be Ready" in created["message"]


def test_tfjob_runs_to_success_when_the_chief_completes(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(tf_job("tf", workers=2, ps=1))
    expected = {"tf-chief-0", "tf-ps-0", "tf-worker-0", "tf-worker-1"}
    pods = jobs.wait_running("tf", expected)
    jobs.wait_condition("TFJob", "tf", "Running")
    config = json.loads(env_of(pods["tf-worker-1"])["TF_CONFIG"])
    namespace = jobs.namespace
    assert config == {
        "cluster": {
            "chief": [f"tf-chief-0.{namespace}.svc:2222"],
            "ps": [f"tf-ps-0.{namespace}.svc:2222"],
            "worker": [f"tf-worker-0.{namespace}.svc:2222", f"tf-worker-1.{namespace}.svc:2222"],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    assert pods["tf-chief-0"]["metadata"]["labels"][K.JOB_ROLE] == "master"

    jobs.exit("tf-worker-0", 0)
    jobs.exit("tf-chief-0", 0)
    jobs.wait_condition("TFJob", "tf", "Succeeded")
    # The parameter server never exits by itself: it is stopped with the job.
    pods = jobs.wait_pods(
        "tf", lambda p: set(p) == {"tf-chief-0", "tf-worker-0"}, what="finished pods only"
    )
    assert {p["status"]["phase"] for p in pods.values()} == {"Succeeded"}


def test_mpijob_launches_after_its_workers_and_succeeds_with_the_launcher(
    operator: RunningOperator, jobs: Jobs
) -> None:
    job = jobs.create(mpi_job("pi", workers=2, slots=4))
    launcher = jobs.wait_pods(
        "pi",
        lambda p: (
            len(p) == 3
            and len(_launcher_pods(jobs, "pi", p)) == 1
            and all(pod["status"]["phase"] == "Running" for pod in p.values())
        ),
        what="2 workers and the launcher Running",
    )
    launcher_pod = launcher[next(iter(_launcher_pods(jobs, "pi", launcher)))]
    workers = [launcher[n] for n in ("pi-worker-0", "pi-worker-1")]
    assert all(
        launcher_pod["metadata"]["creationTimestamp"] >= w["metadata"]["creationTimestamp"]
        for w in workers
    )
    namespace = jobs.namespace
    config = jobs.config_maps("pi")["pi-config"]
    assert config["data"]["hostfile"] == (
        f"pi-worker-0.pi.{namespace}.svc slots=4\npi-worker-1.pi.{namespace}.svc slots=4\n"
    )
    # The key pair's Secret has a generated name, recorded in the job's status: it is
    # the only Secret of the job, and the one the pods mount.
    current = jobs.get("MPIJob", "pi")
    assert current is not None
    recorded = current["status"]["sshAuthSecretName"]
    assert recorded.startswith("pi-ssh-")
    (secret,) = jobs.secrets("pi").values()
    assert secret["metadata"]["name"] == recorded
    assert secret["type"] == "kubernetes.io/ssh-auth"
    mounted = {v["name"]: v for v in workers[0]["spec"]["volumes"]}["ssh-auth"]
    assert mounted["secret"]["secretName"] == recorded
    assert base64.b64decode(secret["data"]["ssh-publickey"]).startswith(b"ecdsa-sha2-nistp521 ")
    service = jobs.services("pi")["pi"]
    assert service["spec"]["clusterIP"] == "None"
    for obj in (config, secret, service, *workers, jobs.batch_jobs("pi")["pi-launcher"]):
        assert _owned_by(obj, job)
    assert workers[0]["spec"]["hostname"] == "pi-worker-0"
    assert workers[0]["spec"]["subdomain"] == "pi"
    env = env_of(launcher_pod)
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["OMPI_MCA_orte_keep_fqdn_hostnames"] == "true"
    assert env["K_MPI_JOB_ROLE"] == "launcher"
    jobs.wait_condition("MPIJob", "pi", "Running")

    jobs.exit(launcher_pod["metadata"]["name"], 0)
    done = jobs.wait_condition("MPIJob", "pi", "Succeeded")
    assert "pi-launcher" in condition(done, "Succeeded")["message"]  # type: ignore[index]
    jobs.wait_pods(
        "pi",
        lambda p: not {"pi-worker-0", "pi-worker-1"} & set(p),
        what="the workers (sshd) to be stopped",
    )


def _launcher_pods(
    jobs: Jobs, job: str, pods: dict[str, dict[str, object]] | None = None
) -> set[str]:
    found = jobs.pods(job) if pods is None else pods
    return {
        name
        for name, pod in found.items()
        if pod["metadata"]["labels"].get(K.JOB_ROLE) == "launcher"  # type: ignore[index]
    }


def test_deleting_a_job_garbage_collects_its_children(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(pytorch_job("doomed", workers=1))
    jobs.wait_running("doomed", {"doomed-master-0", "doomed-worker-0"})
    jobs.delete("PyTorchJob", "doomed")
    assert jobs.wait_pods("doomed", lambda p: not p, what="the pods to be collected") == {}
    assert wait_for(lambda: jobs.services("doomed"), lambda s: not s, what="no Services") == {}
