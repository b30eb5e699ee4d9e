"""The Kubeflow SDK (``kubeflow`` 0.5.0, ``TrainerClient``) as its users call it: a bare
``TrainerClient()`` (credentials and namespace from ``$KUBECONFIG``, as on a laptop) and
the issue's three ``train`` calls verbatim.

Usage: ``python -m tests.sdk.trainer_v2 <call> [args]``; prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kubeflow.trainer import CustomTrainer, TrainerClient
from kubeflow.trainer.options.kubernetes import (
    ContainerPatch,
    JobSetSpecPatch,
    JobSetTemplatePatch,
    JobSpecPatch,
    JobTemplatePatch,
    PodSpecPatch,
    PodTemplatePatch,
    ReplicatedJobPatch,
    RuntimePatch,
    TrainingRuntimeSpecPatch,
)


def train() -> None:  # the function the SDK ships to every node
    import os

    print("rank", os.environ.get("PET_NODE_RANK"), "of", os.environ.get("PET_NNODES"))


def allreduce() -> None:  # shipped to every node of a real-node TrainJob
    import os

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    print(
        f"node {os.environ.get('PET_NODE_RANK')} rank {dist.get_rank()} of "
        f"{dist.get_world_size()}: allreduce sum {value.item():.0f}",
        flush=True,
    )
    dist.destroy_process_group()


def report_progress() -> None:  # shipped to a real-node TrainJob's node
    import os

    from kubeflow.trainer.backends.kubernetes.utils import update_trainjob_status

    sent = update_trainjob_status(
        progress_percent=42, estimated_remaining_seconds=120, metrics={"loss": 0.123}
    )
    print(f"node {os.environ.get('PET_NODE_RANK')} progress reported: {sent}", flush=True)
    if not sent:
        raise SystemExit(3)


def checkpointed(steps: int, every: int) -> None:  # shipped to a drained real-node TrainJob
    import sys

    from images.pytorch import train as sample  # the trainer image's own sample

    sys.exit(
        sample.main(
            [
                *("--steps", str(steps), "--step-delay", "0.5"),
                *("--checkpoint-every", str(every), "--checkpoint-dir", "/checkpoints"),
            ]
        )
    )


def _checkpoint_volume(directory: str, labels: dict[str, str]) -> RuntimePatch:
    """What a data scientist adds with the SDK's options for checkpoints that outlive the
    pods: a volume on the ``node`` job's pods (here a directory on the node), mounted at
    /checkpoints, and labels on those pods."""
    pod = PodTemplatePatch(
        metadata={"labels": labels},
        spec=PodSpecPatch(
            volumes=[
                {
                    "name": "checkpoints",
                    "hostPath": {"path": directory, "type": "Directory"},
                }
            ],
            containers=[
                ContainerPatch(
                    name="node",
                    volume_mounts=[{"name": "checkpoints", "mountPath": "/checkpoints"}],
                )
            ],
        ),
    )
    node = ReplicatedJobPatch(
        name="node", template=JobTemplatePatch(spec=JobSpecPatch(template=pod))
    )
    return RuntimePatch(
        training_runtime_spec=TrainingRuntimeSpecPatch(
            template=JobSetTemplatePatch(spec=JobSetSpecPatch(replicated_jobs=[node]))
        )
    )


def _train_call(client: TrainerClient, call: int) -> str:
    """The issue's three calls, exactly as a data scientist writes them."""
    if call == 1:
        name = client.train(trainer=CustomTrainer(func=train, resources_per_node={"gpu": 4}))
    elif call == 2:
        name = client.train(
            trainer=CustomTrainer(func=train, num_nodes=4, resources_per_node={"gpu": 2})
        )
    else:
        name = client.train(
            runtime="torch-distributed", trainer=CustomTrainer(func=train, num_nodes=2)
        )
    return str(name)


def _job(job: Any) -> dict[str, Any]:
    return {
        "name": job.name,
        "status": job.status,
        "num_nodes": job.num_nodes,
        "runtime": job.runtime.name,
        "steps": [
            {
                "name": s.name,
                "status": s.status,
                "pod_name": s.pod_name,
                "device": s.device,
                "device_count": s.device_count,
            }
            for s in job.steps
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list-runtimes")
    verbatim = sub.add_parser("train")
    verbatim.add_argument("--call", type=int, choices=(1, 2, 3), required=True)
    on = sub.add_parser("train-on")
    on.add_argument("--runtime", required=True)
    on.add_argument("--num-nodes", type=int, default=1)
    real = sub.add_parser("train-allreduce")
    real.add_argument("--runtime", required=True)
    real.add_argument("--num-nodes", type=int, default=2)
    real.add_argument("--cpu", default="500m")
    real.add_argument("--memory", default="1Gi")
    saving = sub.add_parser("train-checkpointing")
    saving.add_argument("--runtime", required=True)
    saving.add_argument("--num-nodes", type=int, default=2)
    saving.add_argument("--steps", type=int, required=True)
    saving.add_argument("--every", type=int, required=True)
    saving.add_argument("--checkpoint-dir", required=True)
    saving.add_argument("--label", action="append", default=[], help="KEY=VALUE on the pods")
    saving.add_argument("--cpu", default="500m")
    progress = sub.add_parser("train-progress")
    progress.add_argument("--runtime", required=True)
    logs = sub.add_parser("logs")
    logs.add_argument("--name", required=True)
    logs.add_argument("--step", default="node-0")
    wait = sub.add_parser("wait")
    wait.add_argument("--name", required=True)
    wait.add_argument("--status", action="append", required=True)
    wait.add_argument("--timeout", type=int, default=60)
    for name in ("get-job", "events", "delete"):
        sub.add_parser(name).add_argument("--name", required=True)
    sub.add_parser("list-jobs")
    args = parser.parse_args()

    client = TrainerClient()
    out: Any
    if args.command == "list-runtimes":
        out = [
            {
                "name": r.name,
                "framework": r.trainer.framework,
                "num_nodes": r.trainer.num_nodes,
                "device": r.trainer.device,
                "device_count": r.trainer.device_count,
            }
            for r in client.list_runtimes()
        ]
    elif args.command == "train":
        out = {"name": _train_call(client, args.call)}
    elif args.command == "train-on":
        name = client.train(
            runtime=args.runtime, trainer=CustomTrainer(func=train, num_nodes=args.num_nodes)
        )
        out = {"name": name}
    elif args.command == "train-allreduce":
        name = client.train(
            runtime=args.runtime,
            trainer=CustomTrainer(
                func=allreduce,
                num_nodes=args.num_nodes,
                resources_per_node={"cpu": args.cpu, "memory": args.memory},
            ),
        )
        out = {"name": name}
    elif args.command == "train-checkpointing":
        labels = dict(item.split("=", 1) for item in args.label)
        name = client.train(
            runtime=args.runtime,
            trainer=CustomTrainer(
                func=checkpointed,
                func_args={"steps": args.steps, "every": args.every},
                num_nodes=args.num_nodes,
                resources_per_node={"cpu": args.cpu, "memory": "1Gi"},
            ),
            options=[_checkpoint_volume(args.checkpoint_dir, labels)],
        )
        out = {"name": name}
    elif args.command == "train-progress":
        name = client.train(
            runtime=args.runtime,
            trainer=CustomTrainer(
                func=report_progress,
                num_nodes=1,
                resources_per_node={"cpu": "500m", "memory": "1Gi"},
            ),
        )
        out = {"name": name}
    elif args.command == "logs":
        out = {"lines": list(client.get_job_logs(args.name, step=args.step))}
    elif args.command == "wait":
        try:
            job = client.wait_for_job_status(
                args.name, status=set(args.status), timeout=args.timeout, polling_interval=1
            )
            out = {"job": _job(job)}
        except (RuntimeError, TimeoutError) as err:
            out = {"error": type(err).__name__, "message": str(err)}
    elif args.command == "get-job":
        out = _job(client.get_job(args.name))
    elif args.command == "events":
        out = [
            {
                "kind": e.involved_object_kind,
                "name": e.involved_object_name,
                "reason": e.reason,
                "message": e.message,
            }
            for e in client.get_job_events(args.name)
        ]
    elif args.command == "delete":
        client.delete_job(args.name)
        out = {"deleted": args.name}
    else:
        out = [{"name": j.name, "status": j.status} for j in client.list_jobs()]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
