"""The scale sweep's reading of the operator's metrics and its job mix."""

from __future__ import annotations

from benchmarks.operator_sweep import mix, parse_metrics, pods_of

EXPOSITION = """\
# HELP kubetrain_api_requests_total API requests sent, by verb and HTTP status code.
# TYPE kubetrain_api_requests_total counter
kubetrain_api_requests_total{code="201",verb="create"} 428.0
kubetrain_api_requests_total{code="200",verb="patch"} 250.0
kubetrain_api_requests_total{code="409",verb="create"} 2.0
kubetrain_api_requests_created{code="201",verb="create"} 1.7e+09
kubetrain_reconcile_duration_seconds_count{kind="MPIJob",result="ok"} 128.0
kubetrain_reconcile_duration_seconds_sum{kind="MPIJob",result="ok"} 13.0
kubetrain_reconcile_duration_seconds_count{kind="MPIJob",result="requeue"} 50.0
kubetrain_reconcile_duration_seconds_sum{kind="MPIJob",result="requeue"} 15.5
kubetrain_reconcile_duration_seconds_bucket{kind="MPIJob",le="0.1",result="ok"} 3.0
"""


def test_requests_and_reconciles_are_summed_over_their_labels() -> None:
    assert parse_metrics(EXPOSITION) == (178.0, 28.5, 680.0)


def test_the_mix_keeps_its_proportions_and_pod_count() -> None:
    names = mix(5000)
    kinds = [kind for kind, _ in names]
    assert (kinds.count("PyTorchJob"), kinds.count("MPIJob"), kinds.count("TrainJob")) == (
        2000,
        1000,
        2000,
    )
    assert sum(pods_of(kind) for kind in kinds) == 19_000
    assert len({name for _, name in names}) == 5000
