"""Kueue quota the GPU stacks ship (the ``queues`` chart): two teams sharing one GPU pool.

Each team has a namespace with a LocalQueue named ``default`` (so Kueue queues every job
created there, TrainJobs from the Kubeflow SDK included, without a label), pointing at the
team's ClusterQueue. The two ClusterQueues own half of the pool's nodes each and share
one cohort: ``team-a`` may borrow up to 2 more nodes, ``team-b`` lends at most 1 of its
own. Either takes back what it lent by preempting borrowers (any priority), and within a
team a higher-priority job preempts lower ones. Two WorkloadPriorityClasses, ``high`` and
``low``, sit above and below the pool's PriorityClass (1000), which jobs without a Kueue
priority label get.
"""

from __future__ import annotations

from kubetrain.constructs.queues import (
    BorrowWithinCohort,
    ClusterQueueProps,
    FlavorQuota,
    LocalQueueProps,
    Preemption,
    Quota,
    ReclaimWithinCohort,
    WithinClusterQueue,
    WorkloadPriorityClassProps,
)
from kubetrain.constructs.queues.common import scaled
from kubetrain.gitops.stack import Queues, StackFlavor

TEAMS = ("team-a", "team-b")
PREEMPTION = Preemption(
    reclaim_within_cohort=ReclaimWithinCohort.ANY,
    borrow_within_cohort=BorrowWithinCohort.LOWER_PRIORITY,
    within_cluster_queue=WithinClusterQueue.LOWER_PRIORITY,
)
PRIORITIES = (
    WorkloadPriorityClassProps(
        name="high", value=10000, description="Deadline work: admitted first, preempts low."
    ),
    WorkloadPriorityClassProps(
        name="low", value=100, description="Experiments: run on spare quota, preempted first."
    ),
)


def team_queues(
    pool: str, *, nodes_per_team: int, cpu_per_node: int, memory_per_node: str
) -> Queues:
    """Two teams' queues on ``pool``: each owns ``nodes_per_team`` nodes (their GPUs and
    fabric devices) and the CPU and memory of those nodes."""
    cluster_queues = tuple(
        ClusterQueueProps(
            name=team,
            cohort=pool,
            namespaces=(team,),
            preemption=PREEMPTION,
            quotas=(
                FlavorQuota(
                    flavor=pool,
                    nodes=nodes_per_team,
                    cpu=Quota.of(cpu_per_node * nodes_per_team),
                    memory=Quota(
                        nominal=scaled("memory_per_node", memory_per_node, nodes_per_team)
                    ),
                    borrowing_nodes=2 if team == "team-a" else None,
                    lending_nodes=1 if team == "team-b" else None,
                ),
            ),
        )
        for team in TEAMS
    )
    local_queues = tuple(
        LocalQueueProps(namespace=team, cluster_queue=team, create_namespace=True) for team in TEAMS
    )
    return Queues(
        flavors=(StackFlavor(pool),),
        cluster_queues=cluster_queues,
        local_queues=local_queues,
        priority_classes=PRIORITIES,
    )
