"""Builders and data for the Trainer v2 tests: small TrainJobs and runtimes, upstream
v2.3.0's own manifests (tests/data/upstream/trainer-v2.3.0) and the TrainJobs the real
Kubeflow SDK 0.5.0 posts (tests/data/kubeflow-sdk-0.5.0)."""

from __future__ import annotations

import copy
import json
from typing import Any

from kubetrain.manifest import parse_yaml, parse_yaml_all
from tests.conftest import EXAMPLES, REPO_ROOT

API_VERSION = "trainer.kubeflow.org/v1alpha1"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
UPSTREAM_TRAINER = REPO_ROOT / "tests" / "data" / "upstream" / "trainer-v2.3.0"
SDK_BODIES = REPO_ROOT / "tests" / "data" / "kubeflow-sdk-0.5.0" / "trainjobs.json"
TRAINER_KINDS = ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime")


def trainjob(name: str = "job", **spec: Any) -> dict[str, Any]:
    """A TrainJob of the torch-distributed ClusterTrainingRuntime; ``spec`` adds fields."""
    base: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
    }
    base["spec"].update(copy.deepcopy(spec))
    return base


def rjob(
    name: str = "node",
    step: str | None = "trainer",
    containers: tuple[str, ...] = ("node",),
    *,
    image: str = "trainer:1",
    backoff_limit: int | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A replicated job; ``step`` is its ancestor label (none when None); its Job template
    has ``backoff_limit`` if given."""
    template: dict[str, Any] = {
        "spec": {
            "template": {"spec": {"containers": [{"name": c, "image": image} for c in containers]}}
        }
    }
    if backoff_limit is not None:
        template["spec"]["backoffLimit"] = backoff_limit
    if step is not None:
        template["metadata"] = {"labels": {ANCESTOR: step}}
    return {"name": name, "template": template, **fields}


def initializer_rjob(step: str = "dataset-initializer") -> dict[str, Any]:
    """An initializer replicated job as upstream's runtimes have it: its container, named
    after the step, mounts the ``initializer`` volume (upstream refuses one without)."""
    job = rjob(step, step=step, containers=(step,))
    (container,) = job["template"]["spec"]["template"]["spec"]["containers"]
    container["volumeMounts"] = [{"name": "initializer", "mountPath": "/workspace"}]
    return job


def runtime(
    kind: str = "ClusterTrainingRuntime",
    name: str = "torch",
    rjobs: list[dict[str, Any]] | None = None,
    *,
    uid: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A torch runtime with one trainer replicated job (``rjobs`` replaces them)."""
    base: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {"spec": {"replicatedJobs": rjobs if rjobs is not None else [rjob()]}},
        },
    }
    if uid is not None:
        base["metadata"]["uid"] = uid
    base["spec"].update(copy.deepcopy(spec))
    return base


def torch_runtime(*, num_nodes: int = 2, backoff_limit: int | None = None) -> dict[str, Any]:
    """The ClusterTrainingRuntime ``torch`` the operator's unit tests observe (one ``node``
    replicated job); ``backoff_limit`` sets the node Job template's ``backoffLimit``."""
    node = rjob(image="t:1", backoff_limit=backoff_limit)
    return runtime(
        name="torch", rjobs=[node], uid="rt", mlPolicy={"numNodes": num_nodes, "torch": {}}
    )


def upstream_documents() -> list[tuple[str, dict[str, Any]]]:
    """(id, document) of every document of upstream v2.3.0's copied manifests."""
    out = []
    for path in sorted(UPSTREAM_TRAINER.rglob("*.yaml")):
        docs = [d for d in parse_yaml_all(path.read_text()) if d]
        for index, doc in enumerate(docs):
            name = str(path.relative_to(UPSTREAM_TRAINER))
            out.append((f"{name}#{index}" if len(docs) > 1 else name, doc))
    return out


def sdk_bodies() -> dict[str, dict[str, Any]]:
    """The TrainJobs the Kubeflow SDK 0.5.0 posted, by call (see record.py beside them)."""
    bodies: dict[str, dict[str, Any]] = json.loads(SDK_BODIES.read_text())
    return bodies


def trainer_examples() -> list[tuple[str, dict[str, Any]]]:
    """(file name, document) of kubetrain's Trainer examples."""
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        doc = parse_yaml(path.read_text())
        if doc.get("kind") in TRAINER_KINDS:
            out.append((path.name, doc))
    return out
