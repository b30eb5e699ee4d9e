"""Test-side helpers for the operator's integration tests: job manifests, and a small
client (the official Kubernetes client, not the operator's) to drive and observe them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cluster.fake_pods import exit_patch
from kubetrain.api import keys as K
from kubetrain.api.kinds import OPERATOR_KINDS
from tests.builders import jobs as builders
from tests.integration.kube import condition, wait_for

PLURALS = {kind: info.plural for kind, info in OPERATOR_KINDS.items()}
VERSIONS = {kind: info.version for kind, info in OPERATOR_KINDS.items()}
GROUPS = {kind: info.group for kind, info in OPERATOR_KINDS.items()}
#: The image of the pods the operator tier makes (kwok runs none of them).
IMAGE = "registry.example/trainer:1"


def template(
    container: str, *, gpus: int = 1, env: dict[str, str] | None = None, tolerate: bool = True
) -> dict[str, Any]:
    """A pod template for fake GPU nodes: ``gpus`` GPUs (tolerating the GPU taint unless
    ``tolerate`` is False) and a small CPU request."""
    return builders.template(
        container, image=IMAGE, cpu="100m", gpus=gpus, tolerate=tolerate, env=env
    )


def gpu_pods(gpus: int, tolerate: bool = True) -> builders.Pods:
    """Pods of :func:`template` with ``gpus`` each, but none for a PS or a launcher."""

    def pods(replica_type: str, container: str) -> dict[str, Any]:
        wanted = 0 if replica_type in ("PS", "Launcher") else gpus
        return template(container, gpus=wanted, tolerate=tolerate)

    return pods


def pytorch_job(
    name: str,
    *,
    workers: int = 2,
    master: bool = True,
    restart_policy: str = "OnFailure",
    run_policy: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    gpus: int = 1,
    tolerate: bool = True,
    nproc_per_node: str | None = "2",
) -> dict[str, Any]:
    spec: dict[str, Any] = {} if nproc_per_node is None else {"nprocPerNode": nproc_per_node}
    if run_policy:
        spec["runPolicy"] = run_policy
    return builders.pytorch_job(
        name=name,
        master=master,
        workers=workers,
        restart_policy=restart_policy,
        pods=gpu_pods(gpus, tolerate),
        metadata={"annotations": dict(annotations)} if annotations else None,
        **spec,
    )


def tf_job(
    name: str,
    *,
    workers: int = 2,
    ps: int = 1,
    chief: bool = True,
    gpus: int = 1,
    tolerate: bool = True,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    return builders.tf_job(
        name=name,
        chief=chief,
        ps=ps,
        workers=workers,
        restart_policy=restart_policy,
        pods=gpu_pods(gpus, tolerate),
    )


def mpi_job(
    name: str,
    *,
    workers: int = 2,
    slots: int = 2,
    gpus: int = 1,
    tolerate: bool = True,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    return builders.mpi_job(
        name=name,
        workers=workers,
        restart_policy=restart_policy,
        pods=gpu_pods(gpus, tolerate),
        slotsPerWorker=slots,
    )


def xgboost_job(name: str, *, workers: int = 1, gpus: int = 1) -> dict[str, Any]:
    """An XGBoostJob: its Master (the tracker) and ``workers`` Workers, ``gpus`` each."""
    return builders.xgboost_job(name=name, workers=workers, pods=gpu_pods(gpus))


def paddle_job(name: str, *, workers: int = 1, gpus: int = 1) -> dict[str, Any]:
    """A collective PaddleJob of ``workers`` Workers, ``gpus`` each."""
    return builders.paddle_job(name=name, workers=workers, pods=gpu_pods(gpus))


def jax_job(name: str, *, workers: int = 1, gpus: int = 1) -> dict[str, Any]:
    """A JAXJob of ``workers`` Workers, ``gpus`` each."""
    return builders.jax_job(name=name, workers=workers, pods=gpu_pods(gpus))


def torch_runtime(name: str, namespace: str, pod_template: dict[str, Any]) -> dict[str, Any]:
    """A torch TrainingRuntime of one replicated job ``node`` whose pods are
    ``pod_template`` (a TrainJob's trainer step)."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"trainer.kubeflow.org/framework": "torch"},
        },
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": {"template": copy.deepcopy(pod_template)},
                            },
                        }
                    ]
                }
            },
        },
    }


def train_job(name: str, runtime: str, *, nodes: int = 2) -> dict[str, Any]:
    """A TrainJob of ``nodes`` torchrun nodes on TrainingRuntime ``runtime``."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": runtime, "kind": "TrainingRuntime"},
            "trainer": {"numNodes": nodes, "command": ["torchrun", "train.py"]},
        },
    }


class Jobs:
    """Create, change and watch training jobs and their children in one namespace."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.namespace = namespace
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self._api_client = api_client

    def _serialize(self, obj: Any) -> dict[str, Any]:
        data: dict[str, Any] = self._api_client.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
        return data

    def _by_name(self, found: Any) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for item in found.items:
            data = self._serialize(item)
            out[str(data["metadata"]["name"])] = data
        return out

    # -- jobs --------------------------------------------------------------------------

    def create(self, job: dict[str, Any]) -> dict[str, Any]:
        kind = job["kind"]
        result = self.custom.create_namespaced_custom_object(
            GROUPS[kind], VERSIONS[kind], self.namespace, PLURALS[kind], job
        )
        assert isinstance(result, dict)
        return result

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        try:
            result = self.custom.get_namespaced_custom_object(
                GROUPS[kind], VERSIONS[kind], self.namespace, PLURALS[kind], name
            )
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        assert isinstance(result, dict)
        return result

    def patch(self, kind: str, name: str, patch: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUPS[kind],
            VERSIONS[kind],
            self.namespace,
            PLURALS[kind],
            name,
            patch,
            _content_type="application/merge-patch+json",
        )

    def delete(self, kind: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(
            GROUPS[kind], VERSIONS[kind], self.namespace, PLURALS[kind], name
        )

    def delete_every_job(self) -> None:
        """Delete the namespace's jobs of every kind, so that an operator that goes on
        running makes no pod for them again (their pods go with them)."""
        for kind in VERSIONS:
            self.custom.delete_collection_namespaced_custom_object(
                GROUPS[kind], VERSIONS[kind], self.namespace, PLURALS[kind]
            )

    def wait(
        self,
        kind: str,
        name: str,
        done: Callable[[dict[str, Any] | None], bool],
        *,
        what: str,
        timeout: float = 60.0,
    ) -> dict[str, Any] | None:
        return wait_for(lambda: self.get(kind, name), done, what=what, timeout=timeout)

    def wait_condition(
        self, kind: str, name: str, type_: str, *, status: str = "True", timeout: float = 60.0
    ) -> dict[str, Any]:
        """Wait until the job has condition ``type_`` with ``status``; return the job."""
        job = self.wait(
            kind,
            name,
            lambda j: (condition(j, type_) or {}).get("status") == status,
            what=f"{kind} {name} to have condition {type_}={status}",
            timeout=timeout,
        )
        assert job is not None
        return job

    def state(self, kind: str, name: str) -> str | None:
        """The last condition's type (what ``kubectl get`` shows as State)."""
        job = self.get(kind, name)
        conditions = ((job or {}).get("status") or {}).get("conditions") or []
        return str(conditions[-1]["type"]) if conditions else None

    # -- children ----------------------------------------------------------------------

    def _selector(self, job_name: str) -> str:
        return f"{K.JOB_NAME}={job_name}"

    def pods(self, job_name: str) -> dict[str, dict[str, Any]]:
        found = self.core.list_namespaced_pod(
            self.namespace, label_selector=self._selector(job_name)
        )
        return self._by_name(found)

    def services(self, job_name: str) -> dict[str, dict[str, Any]]:
        found = self.core.list_namespaced_service(
            self.namespace, label_selector=self._selector(job_name)
        )
        return self._by_name(found)

    def config_maps(self, job_name: str) -> dict[str, dict[str, Any]]:
        found = self.core.list_namespaced_config_map(
            self.namespace, label_selector=self._selector(job_name)
        )
        return self._by_name(found)

    def secrets(self, job_name: str) -> dict[str, dict[str, Any]]:
        found = self.core.list_namespaced_secret(
            self.namespace, label_selector=self._selector(job_name)
        )
        return self._by_name(found)

    def batch_jobs(self, job_name: str) -> dict[str, dict[str, Any]]:
        found = self.batch.list_namespaced_job(
            self.namespace, label_selector=self._selector(job_name)
        )
        return self._by_name(found)

    def wait_pods(
        self,
        job_name: str,
        done: Callable[[dict[str, dict[str, Any]]], bool],
        *,
        what: str,
        timeout: float = 60.0,
    ) -> dict[str, dict[str, Any]]:
        return wait_for(lambda: self.pods(job_name), done, what=what, timeout=timeout)

    def wait_running(self, job_name: str, names: set[str]) -> dict[str, dict[str, Any]]:
        """Wait until exactly ``names`` exist and all are Running."""
        return self.wait_pods(
            job_name,
            lambda pods: (
                set(pods) == names
                and all((p.get("status") or {}).get("phase") == "Running" for p in pods.values())
            ),
            what=f"pods {sorted(names)} to be Running",
        )

    def exit(self, pod: str, code: int, reason: str | None = None) -> None:
        """Make a fake pod's containers exit (cluster/stages)."""
        self.core.patch_namespaced_pod(pod, self.namespace, exit_patch(code, reason))

    def evict(self, pod: str, message: str = "The node was low on resource: memory.") -> None:
        """Report a pod as evicted, as the kubelet does (phase Failed, reason Evicted)."""
        self.core.patch_namespaced_pod_status(
            pod,
            self.namespace,
            {"status": {"phase": "Failed", "reason": "Evicted", "message": message}},
        )

    def events(self, name: str) -> list[dict[str, Any]]:
        """Events about the job ``name`` (any kind), oldest first."""
        found = self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={name}"
        )
        events = [self._serialize(e) for e in found.items]
        return sorted(events, key=lambda e: str(e.get("lastTimestamp") or ""))

    def wait_event(self, name: str, reason: str, *, timeout: float = 30.0) -> dict[str, Any]:
        events = wait_for(
            lambda: [e for e in self.events(name) if e.get("reason") == reason],
            bool,
            what=f"an Event with reason {reason} about {name}",
            timeout=timeout,
        )
        return events[-1]


def env_of(pod: dict[str, Any], container: int | str = 0) -> dict[str, str]:
    """A pod container's (by index or name) environment as the kubelet gives it: literal
    values, and a ``fieldRef`` to the pod's name, namespace, a label or an annotation read
    from the pod (a TrainJob's ranks come from its completion-index annotation)."""
    containers = pod["spec"]["containers"]
    spec = (
        containers[container]
        if isinstance(container, int)
        else next(c for c in containers if c["name"] == container)
    )
    meta = pod["metadata"]
    out: dict[str, str] = {}
    for item in spec.get("env") or []:
        path = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if path is None:
            out[item["name"]] = item.get("value", "")
            continue
        for field in ("labels", "annotations"):
            prefix = f"metadata.{field}['"
            if path.startswith(prefix):
                out[item["name"]] = (meta.get(field) or {})[path[len(prefix) : -2]]
                break
        else:
            out[item["name"]] = {
                "metadata.name": meta["name"],
                "metadata.namespace": meta.get("namespace", ""),
            }[path]
    return out


def run_every_kind_to_success(jobs: Jobs, prefix: str) -> None:
    """A PyTorchJob, a TFJob and an MPIJob from creation to Succeeded, their deciding
    pods made to exit 0 once Running (what the operator must manage, whatever its
    credentials)."""
    pt, tf, mpi = f"{prefix}-pt", f"{prefix}-tf", f"{prefix}-mpi"
    jobs.create(pytorch_job(pt, workers=1))
    jobs.create(tf_job(tf, workers=1, ps=0))
    jobs.create(mpi_job(mpi, workers=1))
    for kind, name in (("PyTorchJob", pt), ("TFJob", tf), ("MPIJob", mpi)):
        jobs.wait_condition(kind, name, "Running")
    jobs.exit(f"{pt}-master-0", 0)
    jobs.exit(f"{tf}-chief-0", 0)
    (launcher,) = [
        name
        for name, pod in jobs.pods(mpi).items()
        if pod["metadata"]["labels"].get(K.JOB_ROLE) == "launcher"
    ]
    jobs.exit(launcher, 0)
    for kind, name in (("PyTorchJob", pt), ("TFJob", tf), ("MPIJob", mpi)):
        jobs.wait_condition(kind, name, "Succeeded")


def release_runtimes(jobs: Jobs) -> None:
    """Delete the namespace's TrainJobs and wait until the operator released their runtimes."""
    group, version, plural = "trainer.kubeflow.org", "v1alpha1", "trainjobs"
    jobs.custom.delete_collection_namespaced_custom_object(group, version, jobs.namespace, plural)

    def held() -> list[str]:
        found = jobs.custom.list_namespaced_custom_object(
            group, version, jobs.namespace, "trainingruntimes"
        )
        assert isinstance(found, dict)
        return [
            r["metadata"]["name"]
            for r in found["items"]
            if K.RUNTIME_IN_USE_ANNOTATION in (r["metadata"].get("annotations") or {})
        ]

    wait_for(held, lambda names: not names, what="the runtimes released by the operator")
