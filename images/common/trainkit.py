"""Framework-neutral pieces shared by the sample training programs.

Every sample (PyTorch DDP, Horovod, TensorFlow) uses the same command-line options,
the same learning-rate schedule (the linear scaling rule with gradual warmup, Goyal et
al. 2017, "Accurate, Large Minibatch SGD") and the same log line format, so their
logs read alike and the tests parse them with one pattern. This module imports nothing
outside the standard library; each image copies it next to its ``train.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime

#: A per-step log line, e.g. ``step=12 loss=0.8123 lr=0.100000 samples_per_sec=2210.4``.
STEP_LINE = re.compile(
    r"^step=(?P<step>\d+) loss=(?P<loss>[0-9.eE+-]+|nan|inf) lr=(?P<lr>[0-9.eE+-]+) "
    r"samples_per_sec=(?P<samples_per_sec>[0-9.eE+-]+)$"
)
#: The line every rank prints when it finishes, used to check replicas agree.
FINAL_LINE = re.compile(
    r"^final rank=(?P<rank>\d+) step=(?P<step>\d+) params_sha256=(?P<digest>[0-9a-f]{64})$"
)


@dataclass(frozen=True, kw_only=True)
class LearningRateSchedule:
    """The linear scaling rule with gradual warmup.

    ``base_lr`` is the learning rate tuned for ``base_batch_size`` samples per step.
    With a global batch of ``global_batch_size`` the target rate is
    ``base_lr * global_batch_size / base_batch_size``; during the first
    ``warmup_steps`` steps the rate rises linearly from ``base_lr`` to that target, so
    the first large-batch updates do not diverge. After warmup the rate stays at the
    target.
    """

    base_lr: float
    base_batch_size: int
    global_batch_size: int
    warmup_steps: int = 0

    def __post_init__(self) -> None:
        if self.base_lr <= 0:
            raise ValueError(f"base_lr ({self.base_lr}) must be > 0")
        if self.base_batch_size <= 0:
            raise ValueError(f"base_batch_size ({self.base_batch_size}) must be > 0")
        if self.global_batch_size <= 0:
            raise ValueError(
                f"global_batch_size ({self.global_batch_size}) must be > 0: it is the "
                "per-process batch size times the number of processes"
            )
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps ({self.warmup_steps}) must be >= 0")

    @property
    def peak_lr(self) -> float:
        """The learning rate after warmup: the base rate scaled by the batch ratio."""
        return self.base_lr * self.global_batch_size / self.base_batch_size

    def lr_at(self, step: int) -> float:
        """The learning rate for ``step`` (1-based: the first update is step 1)."""
        if step < 1:
            raise ValueError(f"step ({step}) must be >= 1: steps are counted from 1")
        if self.warmup_steps == 0 or step >= self.warmup_steps:
            return self.peak_lr
        fraction = step / self.warmup_steps
        return self.base_lr + (self.peak_lr - self.base_lr) * fraction


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options every sample understands to ``parser``."""
    parser.add_argument("--steps", type=int, default=100, help="total optimizer steps")
    parser.add_argument("--batch-size", type=int, default=32, help="samples per process per step")
    parser.add_argument(
        "--base-lr",
        type=float,
        default=0.05,
        help="learning rate tuned for --base-batch-size samples per step",
    )
    parser.add_argument(
        "--base-batch-size",
        type=int,
        default=32,
        help="global batch size that --base-lr was tuned for (linear scaling rule)",
    )
    parser.add_argument("--warmup-steps", type=int, default=10, help="gradual warmup steps")
    parser.add_argument(
        "--checkpoint-dir",
        default=os.environ.get("CHECKPOINT_DIR", ""),
        help="directory to checkpoint to and resume from (default: $CHECKPOINT_DIR; "
        "empty disables checkpointing)",
    )
    parser.add_argument(
        "--checkpoint-every", type=int, default=50, help="steps between checkpoints"
    )
    parser.add_argument(
        "--report-seconds",
        type=float,
        default=2.0,
        help="seconds between progress reports (the step reached) to the operator's "
        "progress server, when the pod has one (0: none)",
    )
    parser.add_argument("--seed", type=int, default=1234, help="seed for data and weights")
    parser.add_argument("--features", type=int, default=32, help="input features")
    parser.add_argument("--hidden", type=int, default=64, help="hidden units")
    parser.add_argument("--classes", type=int, default=10, help="output classes")


def validate_common_arguments(args: argparse.Namespace) -> None:
    """Reject option values that cannot work, naming the option and the value."""
    for option in ("steps", "batch_size", "checkpoint_every", "features", "hidden", "classes"):
        value = getattr(args, option)
        if value < 1:
            flag = "--" + option.replace("_", "-")
            raise SystemExit(f"{flag} ({value}) must be >= 1")


def schedule_from_args(args: argparse.Namespace, world_size: int) -> LearningRateSchedule:
    """The learning-rate schedule for ``world_size`` processes with these options."""
    return LearningRateSchedule(
        base_lr=args.base_lr,
        base_batch_size=args.base_batch_size,
        global_batch_size=args.batch_size * world_size,
        warmup_steps=args.warmup_steps,
    )


def data_seed(seed: int, rank: int, step: int) -> int:
    """The seed of the synthetic batch that ``rank`` trains on at ``step``.

    Each (rank, step) pair gets its own batch, so ranks see different data (the data
    is sharded) and a resumed run sees the same batches an uninterrupted one would.
    """
    return (seed * 1_000_003 + rank * 100_003 + step) % (2**31 - 1)


class ThroughputMeter:
    """Measures samples per second over one step at a time."""

    def __init__(self) -> None:
        self._started = time.perf_counter()

    def restart(self) -> None:
        """Start timing a new step."""
        self._started = time.perf_counter()

    def samples_per_sec(self, samples: int) -> float:
        """Samples per second since the last restart."""
        elapsed = time.perf_counter() - self._started
        return samples / elapsed if elapsed > 0 else float("inf")


def log_start(args: argparse.Namespace, schedule: LearningRateSchedule, device: object) -> None:
    """The line rank 0 prints before training: the job's size and learning-rate plan."""
    world_size = schedule.global_batch_size // args.batch_size
    log(
        f"training: world_size={world_size} batch_size={args.batch_size} "
        f"global_batch={schedule.global_batch_size} peak_lr={schedule.peak_lr:.6f} "
        f"warmup_steps={schedule.warmup_steps} steps={args.steps} device={device}"
    )


def log(message: str) -> None:
    """Write one line and flush, so logs stream even when stdout is a pipe.

    The line goes out in a single write: processes sharing a pipe (torchrun's, mpirun's)
    then never split each other's lines.
    """
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def log_step(step: int, loss: float, lr: float, samples_per_sec: float) -> None:
    """Print the per-step line (see :data:`STEP_LINE`)."""
    log(f"step={step} loss={loss:.4f} lr={lr:.6f} samples_per_sec={samples_per_sec:.1f}")


def log_final(rank: int, step: int, digest: str) -> None:
    """Print the closing line with a digest of this rank's parameters."""
    log(f"final rank={rank} step={step} params_sha256={digest}")


class StopRequest:
    """SIGTERM asks the training loop to stop at its next step boundary.

    The kubelet sends it when it stops a pod: a drain's or an API eviction, a preemption,
    the operator deleting the old gang of a restart. The sample then checkpoints the step
    it finished and exits with 128 + the signal's number, within the pod's termination
    grace (``terminationGracePeriodSeconds``, the constructs' ``termination_grace_seconds``),
    so the restarted job loses no step. Only the first signal is recorded; a second one
    changes nothing (the kubelet's SIGKILL at the end of the grace cannot be caught).
    """

    def __init__(self) -> None:
        self.signal: int | None = None
        signal.signal(signal.SIGTERM, self._record)

    def _record(self, signum: int, _frame: object) -> None:
        if self.signal is None:
            self.signal = signum

    @property
    def requested(self) -> bool:
        """Whether a stop signal arrived."""
        return self.signal is not None

    @property
    def exit_code(self) -> int:
        """The shell's code for a process ended by the signal (143 for SIGTERM)."""
        return 128 + (self.signal or signal.SIGTERM)


#: The gang attempt and why it started, as the kubetrain operator sets them on the pods of
#: a restarted job (``kubetrain.api.env_names``; the images carry no kubetrain package).
RESTART_ATTEMPT_ENV = "KUBETRAIN_RESTART_ATTEMPT"
RESTART_REASON_ENV = "KUBETRAIN_RESTART_REASON"


def attempt_note() -> str:
    """`` attempt=N reason=R`` of a pod the operator restarted, else ``""``."""
    attempt = os.environ.get(RESTART_ATTEMPT_ENV)
    if not attempt:
        return ""
    return f" attempt={attempt} reason={os.environ.get(RESTART_REASON_ENV) or '-'}"


#: Where the operator's progress server is, its CA and the pod's token (the Kubeflow SDK's
#: variables; kubetrain sets them in TrainJobs' trainer pods and in v1 jobs that report).
SERVER_URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
SERVER_CA_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
SERVER_TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
#: The last checkpoint the job reported, as the operator tells a restarted or resumed pod.
CHECKPOINT_STEP_ENV = "KUBETRAIN_CHECKPOINT_STEP"
CHECKPOINT_PATH_ENV = "KUBETRAIN_CHECKPOINT_PATH"


def checkpoint_note() -> str:
    """`` checkpoint_reported=N`` when the operator told the pod its last checkpoint."""
    step = os.environ.get(CHECKPOINT_STEP_ENV)
    return f" checkpoint_reported={step}" if step else ""


class ProgressReporter:
    """Reports the training step and each checkpoint to the operator's progress server
    (kubetrain's extension of the Kubeflow SDK's report: ``{"kubetrain": {"step": N,
    "checkpoint": {...}}}``), from a thread of its own so a slow server never slows a step.

    Steps are sent at most every ``interval`` seconds, and only when the step advanced: a
    rank stuck in a collective stops reporting, which is what the operator's hang
    detection waits for. Checkpoints are sent as they complete; ``close`` sends what is
    left (a checkpoint written on SIGTERM) before the process exits. Without the server's
    variables (a local run without it, another operator) nothing is sent. A refused or
    failed report is logged once per kind of error, and training goes on.
    """

    def __init__(self, interval: float = 2.0) -> None:
        self.url = os.environ.get(SERVER_URL_ENV, "")
        self.interval = interval
        self._step: int | None = None
        self._sent_step: int | None = None
        self._checkpoints: list[dict[str, object]] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._errors: set[str] = set()
        self._thread: threading.Thread | None = None
        if self.url and interval > 0:
            self._context = ssl.create_default_context(cafile=os.environ.get(SERVER_CA_ENV))
            self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
            self._thread.start()

    @property
    def enabled(self) -> bool:
        return self._thread is not None

    def step(self, step: int) -> None:
        """The step just finished (sent with the next report)."""
        with self._lock:
            self._step = step

    def checkpoint(self, step: int, location: str) -> None:
        """A checkpoint just completed (sent at once)."""
        completed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self._lock:
            self._step = max(step, self._step or step)
            self._checkpoints.append(
                {"step": step, "location": location, "completedTime": completed}
            )
        self._wake.set()

    def close(self, timeout: float = 3.0) -> None:
        """Send what is pending and stop (within ``timeout`` seconds)."""
        if self._thread is None:
            return
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            self._flush()
            if self._stop.is_set():
                return

    def _flush(self) -> None:
        with self._lock:
            checkpoints, self._checkpoints = self._checkpoints, []
            step = self._step
        for point in checkpoints:
            self._send({"kubetrain": {"step": point["step"], "checkpoint": point}})
        if (
            step is not None
            and step != self._sent_step
            and self._send({"kubetrain": {"step": step}})
        ):
            self._sent_step = step

    def _send(self, body: dict[str, object]) -> bool:
        try:
            with open(os.environ.get(SERVER_TOKEN_ENV, ""), encoding="utf-8") as handle:
                token = handle.read().strip()
            request = urllib.request.Request(
                self.url,
                data=json.dumps(body).encode(),
                method="POST",
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            )
            with urllib.request.urlopen(request, timeout=5, context=self._context) as reply:
                reply.read()
            return True
        except urllib.error.HTTPError as err:
            self._once(f"HTTP {err.code}", err.read().decode(errors="replace")[:300])
        except (OSError, ValueError) as err:
            self._once(type(err).__name__, str(err))
        return False

    def _once(self, kind: str, detail: str) -> None:
        if kind not in self._errors:
            self._errors.add(kind)
            log(f"progress report failed ({kind}): {detail}")
