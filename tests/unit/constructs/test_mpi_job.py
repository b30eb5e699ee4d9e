"""MPIJob construct: launcher mpirun over the workers' slots, workers running sshd."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.constructs.mpi_job import MPIJob, MPIJobProps
from kubetrain.manifest import dump_all
from tests.k8s_schema import assert_valid
from tests.snapshot import assert_snapshot
from tests.unit.constructs.jobs_helpers import TRAINER, synth


def build(**props: Any) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "image": TRAINER,
        "command": ("python", "-m", "images.horovod.train"),
    }
    (obj,) = synth(lambda chart: MPIJob(chart, "Horovod", MPIJobProps(**{**defaults, **props})))
    return obj


def test_two_workers_eight_gpus() -> None:
    obj = build(workers=2, gpus_per_node=8, env={"NCCL_DEBUG": "WARN"}, args=("--steps", "100"))
    spec = obj["spec"]
    assert spec["slotsPerWorker"] == 8
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"] == [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        "16",
        "-bind-to",
        "none",
        "-map-by",
        "slot",
        "-x",
        "NCCL_DEBUG",
        "python",
        "-m",
        "images.horovod.train",
        "--steps",
        "100",
    ]
    assert "nvidia.com/gpu" not in launcher["resources"].get("limits", {})
    worker = spec["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2
    worker_container = worker["template"]["spec"]["containers"][0]
    assert worker_container["command"] == ["/usr/sbin/sshd", "-De"]
    assert worker_container["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert_valid([obj])
    assert_snapshot("constructs/mpijob-2x8.yaml", dump_all([obj]))


def test_intel_mpi_uses_hydra_options() -> None:
    obj = build(workers=2, slots_per_worker=4, mpi_implementation="Intel")
    launcher = obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"][:5] == ["mpirun", "-n", "8", "-ppn", "4"]


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"gpus_per_node": 3, "slots_per_worker": 8},
            "gpus_per_node (3) must divide slots_per_worker (8): use 1, 2, 4 or 8",
        ),
        ({"workers": 0}, "workers (0) must be >= 1"),
        ({"command": ()}, "command (empty) must name the program mpirun runs"),
        ({"mpi_implementation": "MVAPICH"}, "mpi_implementation ('MVAPICH') must be OpenMPI"),
    ],
    ids=["gpus-divide-slots", "no-workers", "no-command", "bad-implementation"],
)
def test_fails_on_bad_props(props: dict[str, Any], message: str) -> None:
    defaults: dict[str, Any] = {"image": TRAINER, "command": ("python", "train.py")}
    with pytest.raises(ValueError) as caught:
        MPIJobProps(**{**defaults, **props})
    assert message in str(caught.value)
