"""Upstream's v1 SDK (``kubeflow-training``, ``TrainingClient``) as its users call it.

Usage: ``python -m tests.sdk.training_v1 --kubeconfig K --namespace N <call> [args]``;
prints one JSON document with what the SDK returned.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kubeflow.training import (
    KubeflowOrgV1JAXJob,
    KubeflowOrgV1JAXJobSpec,
    KubeflowOrgV1PaddleJob,
    KubeflowOrgV1PaddleJobSpec,
    KubeflowOrgV1ReplicaSpec,
    KubeflowOrgV1RunPolicy,
    KubeflowOrgV1XGBoostJob,
    KubeflowOrgV1XGBoostJobSpec,
    TrainingClient,
)
from kubeflow.training.api_client import ApiClient
from kubeflow.training.constants import constants
from kubernetes.client import (
    V1Container,
    V1ObjectMeta,
    V1PodSpec,
    V1PodTemplateSpec,
    V1ResourceRequirements,
)

from kubetrain.manifest import parse_yaml


def train() -> None:  # shipped to the pods by the SDK, as upstream's e2e test does
    import time

    for epoch in range(10):
        print(f"Start training for Epoch {epoch}")
        time.sleep(1)


class _Json:
    """What the SDK's ``ApiClient.deserialize`` reads (a response's ``data``)."""

    def __init__(self, data: Any) -> None:
        self.data = json.dumps(data)


def paddlejob_from_file(path: str, namespace: str) -> KubeflowOrgV1PaddleJob:
    """A manifest's PaddleJob as the SDK's models, built as upstream's e2e test builds one
    (``run_policy`` is required by the model: ``cleanPodPolicy: None``, upstream's default)."""
    wire = parse_yaml(Path(path).read_text())
    specs = {
        rtype: KubeflowOrgV1ReplicaSpec(
            replicas=spec.get("replicas"),
            restart_policy=spec.get("restartPolicy"),
            template=ApiClient().deserialize(_Json(spec["template"]), "V1PodTemplateSpec"),
        )
        for rtype, spec in wire["spec"]["paddleReplicaSpecs"].items()
    }
    return KubeflowOrgV1PaddleJob(
        api_version=wire["apiVersion"],
        kind=wire["kind"],
        metadata=V1ObjectMeta(name=wire["metadata"]["name"], namespace=namespace),
        spec=KubeflowOrgV1PaddleJobSpec(
            run_policy=KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
            paddle_replica_specs=specs,
        ),
    )


def jaxjob(name: str, namespace: str) -> KubeflowOrgV1JAXJob:
    """The JAXJob upstream's SDK e2e test builds (sdk/python/test/e2e/test_e2e_jaxjob.py)."""
    container = V1Container(
        name="jax",
        image="docker.io/kubeflow/jaxjob-dist-spmd-mnist:latest",
        resources=V1ResourceRequirements(limits={"memory": "3Gi", "cpu": "1.2"}),
    )
    worker = KubeflowOrgV1ReplicaSpec(
        replicas=2,
        restart_policy="OnFailure",
        template=V1PodTemplateSpec(
            metadata=V1ObjectMeta(annotations={constants.ISTIO_SIDECAR_INJECTION: "false"}),
            spec=V1PodSpec(containers=[container]),
        ),
    )
    return KubeflowOrgV1JAXJob(
        api_version=constants.API_VERSION,
        kind=constants.JAXJOB_KIND,
        metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=KubeflowOrgV1JAXJobSpec(
            run_policy=KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
            jax_replica_specs={"Worker": worker},
        ),
    )


def xgboost_job(name: str, namespace: str, image: str) -> KubeflowOrgV1XGBoostJob:
    """An XGBoostJob built as upstream's SDK e2e test builds it (``test_e2e_xgboostjob.py``:
    one Master and one Worker, ``OnFailure``, the istio sidecar annotation off)."""
    container = V1Container(
        name="xgboost",
        image=image,
        args=["--job_type=Train", "--xgboost_parameter=objective:multi:softprob,num_class:3"],
    )

    def replica() -> KubeflowOrgV1ReplicaSpec:
        return KubeflowOrgV1ReplicaSpec(
            replicas=1,
            restart_policy="OnFailure",
            template=V1PodTemplateSpec(
                metadata=V1ObjectMeta(annotations={constants.ISTIO_SIDECAR_INJECTION: "false"}),
                spec=V1PodSpec(containers=[container]),
            ),
        )

    return KubeflowOrgV1XGBoostJob(
        api_version=constants.API_VERSION,
        kind=constants.XGBOOSTJOB_KIND,
        metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=KubeflowOrgV1XGBoostJobSpec(
            run_policy=KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
            xgb_replica_specs={"Master": replica(), "Worker": replica()},
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--job-kind", default="PyTorchJob")
    sub = parser.add_subparsers(dest="call", required=True)
    create = sub.add_parser("create-job-from-function")
    create.add_argument("--name", required=True)
    create.add_argument("--num-workers", type=int, required=True)
    wait = sub.add_parser("wait-for-job-conditions")
    wait.add_argument("--name", required=True)
    wait.add_argument("--timeout", type=int, default=60)
    names = sub.add_parser("get-job-pod-names")
    names.add_argument("--name", required=True)
    names.add_argument("--is-master", action="store_true")
    names.add_argument("--replica-type")
    from_file = sub.add_parser("create-paddlejob-from-file")
    from_file.add_argument("--file", required=True)
    sub.add_parser("create-jaxjob").add_argument("--name", required=True)
    xgboost = sub.add_parser("create-xgboost-job")
    xgboost.add_argument("--name", required=True)
    xgboost.add_argument("--image", required=True)
    for call in ("get-job", "delete-job"):
        sub.add_parser(call).add_argument("--name", required=True)
    args = parser.parse_args()

    sdk = TrainingClient(
        config_file=args.kubeconfig, namespace=args.namespace, job_kind=args.job_kind
    )
    out: Any
    if args.call == "create-job-from-function":
        sdk.create_job(name=args.name, train_func=train, num_workers=args.num_workers)
        out = {"created": args.name}
    elif args.call == "create-paddlejob-from-file":
        job = paddlejob_from_file(args.file, args.namespace)
        sdk.create_job(job=job)
        out = {"created": job.metadata.name}
    elif args.call == "get-job":
        got = sdk.get_job(args.name)
        # The kind's replica specs (``paddle_replica_specs``, ``jax_replica_specs``, ...).
        (field,) = [f for f in got.spec.openapi_types if f.endswith("_replica_specs")]
        specs = getattr(got.spec, field)
        out = {
            "model": type(got).__name__,
            "kind": got.kind,
            "name": got.metadata.name,
            "replicas": {t: s.replicas for t, s in specs.items()},
            "replica_types": sorted(specs),
            "conditions": [c.type for c in sdk.get_job_conditions(job=got)],
        }
    elif args.call == "delete-job":
        sdk.delete_job(args.name)
        out = {"deleted": args.name}
    elif args.call == "wait-for-job-conditions":
        job = sdk.wait_for_job_conditions(args.name, timeout=args.timeout, polling_interval=1)
        out = {
            "conditions": [c.type for c in sdk.get_job_conditions(job=job)],
            "created": sdk.is_job_created(job=job),
            "running": sdk.is_job_running(job=job),
            "restarting": sdk.is_job_restarting(job=job),
            "succeeded": sdk.is_job_succeeded(job=job),
            "failed": sdk.is_job_failed(job=job),
        }
    elif args.call == "create-xgboost-job":
        sdk.create_job(job=xgboost_job(args.name, args.namespace, args.image))
        out = {"created": args.name}
    elif args.call == "create-jaxjob":
        sdk.create_job(job=jaxjob(args.name, args.namespace), namespace=args.namespace)
        out = {"created": args.name}
    else:
        out = sdk.get_job_pod_names(
            name=args.name, is_master=args.is_master, replica_type=args.replica_type
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
