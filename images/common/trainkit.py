"""Framework-neutral pieces shared by the sample training programs.

Every sample (PyTorch DDP, Horovod, TensorFlow) uses the same command-line options,
the same learning-rate schedule (the linear scaling rule with gradual warmup, Goyal et
al. 2017, "Accurate, Large Minibatch SGD") and the same log line format, so their
logs read alike and the tests parse them with one pattern. This module imports nothing
outside the standard library; each image copies it next to its ``train.py``.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from dataclasses import dataclass

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
