"""An elastic TrainJob under Kueue grows only once Kueue has admitted its new size.

Kueue (v0.15) sizes a TrainJob's Workload from ``numNodes`` and admits it whole. When an
admitted, running TrainJob's ``numNodes`` grows, its Workload no longer matches: Kueue
suspends the job, makes a Workload of the new size and resumes the job once that is
admitted. Pods made for the new nodes in between would run on quota nobody admitted (or
wait unschedulable). So each node pod of a queued elastic TrainJob records the node count
in force when it was made (``kubetrain.dev/admitted-nodes``), and nodes beyond the count
the running pods record are not made: the new size waits for Kueue. A job with no node
pod (first start, or resumed by Kueue) is made at its full ``numNodes``. A pod recreated
by a restart takes the count of the pods beside it, so a restart is never held.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.api import keys as K
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.frameworks.pytorch import trainjob_elastic


def queued(job: ResolvedTrainJob) -> bool:
    """Whether Kueue manages the job (its queue-name label; Kueue's LocalQueue defaulting
    writes the label too)."""
    labels = job.metadata.labels or {}
    return bool(labels.get(K.KUEUE_QUEUE_NAME_LABEL))


def admitted_nodes(job: ResolvedTrainJob, pods: Mapping[str, Mapping[str, Any]]) -> int | None:
    """How many nodes the job may have pods for now; None: no limit (not elastic, or not
    queued)."""
    if trainjob_elastic(job) is None or not queued(job):
        return None
    key = job.spec.trainer_job
    recorded = [
        int(value)
        for pod in pods.values()
        if ((pod.get("metadata") or {}).get("labels") or {}).get(K.REPLICA_TYPE) == key
        and str(
            value := ((pod.get("metadata") or {}).get("annotations") or {}).get(
                K.ADMITTED_NODES_ANNOTATION, ""
            )
        ).isdigit()
    ]
    return max(recorded) if recorded else job.pods_of(key)
