# mypy: ignore-errors
"""Records the TrainJobs the real Kubeflow SDK (PyPI ``kubeflow==0.5.0``) creates, as data
for kubetrain's tests (``trainjobs.json``).

Not a test and not run by the tests: the SDK pins ``kubernetes<36``, which the project's
own environment does not, so it runs from a separate virtualenv, against a control plane
with kubetrain's Trainer CRDs and upstream's runtimes applied:

    python -m venv /tmp/sdk && /tmp/sdk/bin/pip install kubeflow==0.5.0
    make cluster-up; kubetrain crds --kind TrainJob --kind TrainingRuntime \
        --kind ClusterTrainingRuntime | kubectl apply --server-side -f -
    kubectl apply --server-side -f tests/data/upstream/trainer-v2.3.0/manifests/base/runtimes/
    /tmp/sdk/bin/python tests/data/kubeflow-sdk-0.5.0/record.py KUBECONFIG NAMESPACE

Each call goes through the SDK's public API (``TrainerClient.train``) and its Kubernetes
backend unchanged; the body it POSTs is copied on its way to the API server (the request
itself is made), so what is recorded is exactly what the SDK sends.
"""

import json
import sys
from pathlib import Path

from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import (
    BuiltinTrainer,
    CustomTrainer,
    CustomTrainerContainer,
    HuggingFaceDatasetInitializer,
    HuggingFaceModelInitializer,
    Initializer,
    TorchTuneConfig,
    TrainerClient,
)
from kubeflow.trainer.options import (
    ActiveDeadlineSeconds,
    Annotations,
    Labels,
    Name,
    RuntimePatch,
)
from kubeflow.trainer.options.kubernetes import (
    ContainerPatch,
    JobSetSpecPatch,
    JobSetTemplatePatch,
    JobSpecPatch,
    JobTemplatePatch,
    PodSpecPatch,
    PodTemplatePatch,
    ReplicatedJobPatch,
    TrainingRuntimeSpecPatch,
)


def train():  # the user's training function, as in the SDK's examples
    import os

    import torch.distributed as dist

    dist.init_process_group(backend="gloo")
    print(f"rank {dist.get_rank()} of {dist.get_world_size()} in {os.environ['HOME']}")


def main(kubeconfig: str, namespace: str) -> None:
    client = TrainerClient(KubernetesBackendConfig(config_file=kubeconfig, namespace=namespace))
    sent: list[tuple[str, dict]] = []
    current = [""]  # the call being made
    api = client.backend.custom_api
    create = api.create_namespaced_custom_object

    def recording(group, version, ns, plural, body, **kwargs):
        sent.append((current[0], json.loads(json.dumps(body))))
        return create(group, version, ns, plural, body, **kwargs)

    api.create_namespaced_custom_object = recording
    patch = RuntimePatch(
        training_runtime_spec=TrainingRuntimeSpecPatch(
            template=JobSetTemplatePatch(
                metadata={"labels": {"team": "ml"}},
                spec=JobSetSpecPatch(
                    replicated_jobs=[
                        ReplicatedJobPatch(
                            name="node",
                            template=JobTemplatePatch(
                                spec=JobSpecPatch(
                                    template=PodTemplatePatch(
                                        metadata={"annotations": {"a": "b"}},
                                        spec=PodSpecPatch(
                                            service_account_name="trainer",
                                            node_selector={"pool": "gpu"},
                                            tolerations=[
                                                {
                                                    "key": "nvidia.com/gpu",
                                                    "operator": "Exists",
                                                    "effect": "NoSchedule",
                                                }
                                            ],
                                            volumes=[{"name": "data", "emptyDir": {}}],
                                            containers=[
                                                ContainerPatch(
                                                    name="node",
                                                    volume_mounts=[
                                                        {"name": "data", "mountPath": "/data"}
                                                    ],
                                                )
                                            ],
                                            scheduling_gates=[{"name": "example.com/gate"}],
                                        ),
                                    )
                                )
                            ),
                        )
                    ]
                ),
            )
        )
    )
    calls = {
        # The three calls of kubetrain issue 13, verbatim.
        "gpu-4": lambda: client.train(
            trainer=CustomTrainer(func=train, resources_per_node={"gpu": 4})
        ),
        "nodes-4-gpu-2": lambda: client.train(
            trainer=CustomTrainer(func=train, num_nodes=4, resources_per_node={"gpu": 2})
        ),
        "runtime-nodes-2": lambda: client.train(
            runtime="torch-distributed", trainer=CustomTrainer(func=train, num_nodes=2)
        ),
        # The facts file's example: packages, env, function arguments.
        "packages-env-args": lambda: client.train(
            trainer=CustomTrainer(
                func=train,
                num_nodes=2,
                resources_per_node={"gpu": 2},
                packages_to_install=["transformers[torch]"],
                env={"FOO": "bar"},
                func_args={"lr": 0.1},
            )
        ),
        "cpu-memory": lambda: client.train(
            trainer=CustomTrainer(func=train, resources_per_node={"cpu": 2, "memory": "8Gi"})
        ),
        "mpi-deepspeed": lambda: client.train(
            runtime="deepspeed-distributed",
            trainer=CustomTrainer(func=train, num_nodes=2, resources_per_node={"gpu": 1}),
        ),
        "container-image": lambda: client.train(
            trainer=CustomTrainerContainer(image="example.com/train:1", num_nodes=2)
        ),
        "initializers": lambda: client.train(
            initializer=Initializer(
                dataset=HuggingFaceDatasetInitializer(
                    storage_uri="hf://tatsu-lab/alpaca", ignore_patterns=["*.bin"]
                ),
                model=HuggingFaceModelInitializer(
                    storage_uri="hf://meta-llama/Llama-3.2-1B-Instruct", access_token="hf_x"
                ),
            ),
            trainer=CustomTrainer(func=train),
        ),
        "options": lambda: client.train(
            trainer=CustomTrainer(func=train, num_nodes=2),
            options=[
                Name("sdk-options"),
                Labels({"kueue.x-k8s.io/queue-name": "team-a"}),
                Annotations({"example.com/owner": "alice"}),
                ActiveDeadlineSeconds(3600),
                patch,
            ],
        ),
        "torchtune": lambda: client.train(
            runtime="torchtune-llama3.2-1b",
            trainer=BuiltinTrainer(config=TorchTuneConfig(epochs=1, batch_size=2)),
        ),
    }
    for label, call in calls.items():
        current[0] = label
        call()
    out = Path(__file__).with_name("trainjobs.json")
    out.write_text(json.dumps(dict(sent), indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(sent)} TrainJobs to {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
