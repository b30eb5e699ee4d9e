"""The bounds kubetrain puts on what it reads and on what a job may ask for.

Input limits keep ``load_job``, ``kubetrain validate`` and ``kubetrain run`` bounded in
time and memory whatever they are given (deeply nested YAML, alias bombs, huge files);
replica limits bound what one job may make the operator create, and are enforced twice
with one message: by the CRDs' CEL rules and by ``kubetrain validate``.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Largest manifest file read. The API server refuses request bodies over 3 MiB, so a job
#: larger than this could never be submitted; a stream of several jobs must be split.
MAX_FILE_BYTES = 3 * 1024 * 1024

#: Deepest nesting of mappings and lists in a job. The deepest field a job can have is 16
#: levels down (a pod template's affinity term values); 64 leaves room for metadata such as
#: ``managedFields`` and stays far from Python's recursion limit.
MAX_DEPTH = 64

#: Most values (mappings, lists and scalars, keys included) in one job once YAML aliases are
#: expanded. A large real job has a few thousand; this bounds the work an alias bomb causes.
MAX_NODES = 100_000

#: Longest text quoted from the input in an error message (keys, values, paths).
MAX_QUOTED = 200

#: Most errors listed in a rejection message (all of them stay in ``errors``).
MAX_LISTED_ERRORS = 50

#: Integers the API server can hold: JSON numbers are parsed as 64-bit integers.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

#: The largest JSON float the API server accepts where its schema wants an integer.
MAX_EXACT_FLOAT_INT = 2**53 - 1


@dataclass(frozen=True, kw_only=True)
class ReplicaLimits:
    """Admission limits on the size of one job, set by the platform team.

    Defaults: 1,000 replicas per replica type and 2,000 pods per job. 1,000 nodes of 8 GPUs
    is 8,000 GPUs, more than all but the very largest training runs use; twice that in
    total leaves room for parameter servers, evaluators and a master next to the workers.
    A typo such as ``replicas: 10000`` or an autoscaler gone wrong is refused at admission
    instead of making the operator create (and hold in memory) thousands of pods.
    """

    max_replicas_per_type: int = 1000
    """Most ``replicas`` one replica type may ask for. Default: 1,000."""
    max_pods_per_job: int = 2000
    """Most pods one job may ask for, summed over its replica types. Default: 2,000."""

    def __post_init__(self) -> None:
        if not 1 <= self.max_replicas_per_type <= 2**31 - 1:
            raise ValueError(
                f"max_replicas_per_type ({self.max_replicas_per_type}) must be between 1 and "
                f"{2**31 - 1} (an int32 replica count)"
            )
        if not self.max_replicas_per_type <= self.max_pods_per_job <= 2**31 - 1:
            raise ValueError(
                f"max_pods_per_job ({self.max_pods_per_job}) must be between "
                f"max_replicas_per_type ({self.max_replicas_per_type}) and {2**31 - 1}"
            )

    def per_type_message(self) -> str:
        """The rejection message of the per-replica-type limit (shared by CEL and Python)."""
        return (
            f"replicas must be at most {self.max_replicas_per_type} per replica type "
            "(the cluster's limit, set in the job CRDs by the platform team)"
        )

    def per_job_message(self) -> str:
        """The rejection message of the per-job limit (shared by CEL and Python)."""
        return (
            f"a job may have at most {self.max_pods_per_job} pods in total, summed over its "
            "replica types (the cluster's limit, set in the job CRDs by the platform team)"
        )


DEFAULT_REPLICA_LIMITS = ReplicaLimits()
