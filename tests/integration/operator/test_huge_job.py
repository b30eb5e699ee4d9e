"""A job at the size limit (2,000 pods) beside a small one: the operator creates the big
job's children in batches, the small job gets its pods between two batches, and the
operator's memory stays small."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.kube import condition, wait_for
from tests.integration.operator.jobs import Jobs, pytorch_job, template
from tests.integration.operator.process import OperatorProcess

#: The default admission limits (kubetrain.api.limits): 1,000 per replica type, 2,000 pods.
PER_TYPE = 1000


def _maximal_tf_job(name: str) -> dict[str, Any]:
    """2,000 pods, nothing gated (no Chief): every pod and Service can be created at once.
    CPU-only pods, which do not tolerate the GPU taint: they never take the GPU nodes the
    small job needs."""
    specs = {
        rtype: {"replicas": PER_TYPE, "template": template("tensorflow", gpus=0)}
        for rtype in ("PS", "Worker")
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"tfReplicaSpecs": specs},
    }


def _memory_kib(pid: int, field: str) -> int:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of a process, in KiB."""
    text = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    found = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    assert found is not None, f"no {field} in /proc/{pid}/status"
    return int(found.group(1))


@pytest.fixture
def own_operator(namespace: str, kubeconfig: Path, tmp_path: Path) -> Iterator[OperatorProcess]:
    """An operator process of the test's own, whose memory it reads. (Named ``operator``,
    it used to stand in for the shared operator's fixture, which then went on beside it
    in every namespace, the job's too.)"""
    started = OperatorProcess(kubeconfig, namespace, tmp_path / "operator.log").start()
    yield started
    started.stop()


def test_a_small_job_beside_a_maximal_one_gets_its_pods_between_two_batches(
    installed_crds: list[dict[str, Any]],
    namespace: str,
    jobs: Jobs,
    own_operator: OperatorProcess,
    figures: list[str],
) -> None:
    assert own_operator.proc is not None
    pid = own_operator.proc.pid
    idle_kib = _memory_kib(pid, "VmRSS")
    jobs.create(_maximal_tf_job("big"))
    wait_for(lambda: len(jobs.pods("big")), lambda n: n > 0, what="the big job's first pods")

    submitted = time.monotonic()
    jobs.create(pytorch_job("small", workers=1))
    small = jobs.wait_condition("PyTorchJob", "small", "Running", timeout=120)
    waited = time.monotonic() - submitted
    big_pods = len(jobs.pods("big"))
    # The small job did not wait for the big one's 2,000 pods.
    assert big_pods < 2 * PER_TYPE
    assert set(jobs.pods("small")) == {"small-master-0", "small-worker-0"}
    assert condition(small, "Running") is not None

    # The big job says how far its creation got, and it keeps going.
    big = jobs.wait(
        "TFJob",
        "big",
        lambda j: "of 2,000 pods so far" in str((condition(j, "Created") or {}).get("message")),
        what="the big job's Created condition to count its pods",
    )
    message = str((condition(big, "Created") or {}).get("message"))
    so_far = int(re.search(r"([\d,]+) of 2,000 pods so far", message).group(1).replace(",", ""))  # type: ignore[union-attr]
    later = wait_for(
        lambda: len(jobs.pods("big")),
        lambda n: n > big_pods,
        what="the big job's creation to go on",
    )
    assert so_far <= later
    peak_kib = _memory_kib(pid, "VmHWM")
    figures.append(
        f"huge job: small job Running {waited:.1f} s after it was submitted beside a "
        f"2,000-pod TFJob (which had {big_pods} pods then); operator RSS {idle_kib // 1024} "
        f"MiB idle, peak {peak_kib // 1024} MiB"
    )
