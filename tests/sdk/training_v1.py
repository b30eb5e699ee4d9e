"""Upstream's v1 SDK (``kubeflow-training``, ``TrainingClient``) as its users call it.

Usage: ``python -m tests.sdk.training_v1 --kubeconfig K --namespace N <call> [args]``;
prints one JSON document with what the SDK returned.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kubeflow.training import TrainingClient


def train() -> None:  # shipped to the pods by the SDK, as upstream's e2e test does
    import time

    for epoch in range(10):
        print(f"Start training for Epoch {epoch}")
        time.sleep(1)


def xgboost_job(name: str, namespace: str, image: str) -> Any:
    """An XGBoostJob built as upstream's SDK e2e test builds it (``test_e2e_xgboostjob.py``:
    one Master and one Worker, ``OnFailure``, the istio sidecar annotation off)."""
    from kubeflow.training import (
        KubeflowOrgV1ReplicaSpec,
        KubeflowOrgV1RunPolicy,
        KubeflowOrgV1XGBoostJob,
        KubeflowOrgV1XGBoostJobSpec,
    )
    from kubeflow.training.constants import constants
    from kubernetes.client import V1Container, V1ObjectMeta, V1PodSpec, V1PodTemplateSpec

    container = V1Container(
        name="xgboost",
        image=image,
        args=["--job_type=Train", "--xgboost_parameter=objective:multi:softprob,num_class:3"],
    )

    def replica() -> Any:
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


def _replica_specs(job: Any) -> dict[str, Any]:
    for attribute in ("xgb_replica_specs", "pytorch_replica_specs", "tf_replica_specs"):
        specs = getattr(job.spec, attribute, None)
        if specs:
            return dict(specs)
    return {}


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
    xgboost = sub.add_parser("create-xgboost-job")
    xgboost.add_argument("--name", required=True)
    xgboost.add_argument("--image", required=True)
    get = sub.add_parser("get-job")
    get.add_argument("--name", required=True)
    delete = sub.add_parser("delete-job")
    delete.add_argument("--name", required=True)
    args = parser.parse_args()

    sdk = TrainingClient(
        config_file=args.kubeconfig, namespace=args.namespace, job_kind=args.job_kind
    )
    out: Any
    if args.call == "create-job-from-function":
        sdk.create_job(name=args.name, train_func=train, num_workers=args.num_workers)
        out = {"created": args.name}
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
    elif args.call == "get-job":
        job = sdk.get_job(args.name)
        out = {
            "kind": job.kind,
            "name": job.metadata.name,
            "replica_types": sorted(_replica_specs(job)),
            "conditions": [c.type for c in sdk.get_job_conditions(job=job)],
        }
    elif args.call == "delete-job":
        sdk.delete_job(args.name)
        out = {"deleted": args.name}
    else:
        out = sdk.get_job_pod_names(
            name=args.name, is_master=args.is_master, replica_type=args.replica_type
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
