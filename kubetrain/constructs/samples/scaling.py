"""The linear scaling rule with gradual warmup, as arguments for the sample trainers.

Goyal et al. (2017): when the global batch grows k-fold, multiply the learning rate by k,
and ramp up to it over a warmup period so the first large-batch steps do not diverge.
The sample programs (``images/*/train.py``) compute their rate as
``base_lr x global_batch / base_batch_size``; passing the per-process batch as
``--base-batch-size`` makes that exactly ``base_lr x world size``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubetrain.api import keys as K

LR_ANNOTATION = K.LEARNING_RATE_ANNOTATION


@dataclass(frozen=True, kw_only=True)
class LinearScaling:
    """Training length and learning rate of a sample job."""

    base_lr: float = 0.05
    """Learning rate tuned for one process with ``batch_size`` samples per step."""
    batch_size: int = 32
    """Samples per process per step."""
    steps: int = 500
    """Optimizer steps."""
    warmup_steps: int | None = None
    """Warmup steps. Default: 5% of ``steps`` (at least 10), in the spirit of the paper's
    5 warmup epochs out of 90."""

    def __post_init__(self) -> None:
        if self.base_lr <= 0:
            raise ValueError(f"base_lr ({self.base_lr}) must be > 0")
        if self.batch_size < 1:
            raise ValueError(f"batch_size ({self.batch_size}) must be >= 1")
        if self.steps < 1:
            raise ValueError(f"steps ({self.steps}) must be >= 1")
        if self.warmup_steps is not None and not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(
                f"warmup_steps ({self.warmup_steps}) must be between 0 and steps ({self.steps})"
            )

    @property
    def warmup(self) -> int:
        if self.warmup_steps is not None:
            return self.warmup_steps
        return min(self.steps, max(10, self.steps // 20))

    def peak_lr(self, world_size: int) -> float:
        """The learning rate after warmup for ``world_size`` processes."""
        if world_size < 1:
            raise ValueError(f"world_size ({world_size}) must be >= 1")
        return self.base_lr * world_size

    def args(self) -> tuple[str, ...]:
        """Trainer arguments (the same for every replica: each reads its world size)."""
        return (
            "--steps",
            str(self.steps),
            "--batch-size",
            str(self.batch_size),
            "--base-lr",
            f"{self.base_lr:g}",
            "--base-batch-size",
            str(self.batch_size),
            "--warmup-steps",
            str(self.warmup),
        )

    def describe(self, world_size: int) -> str:
        """The annotation text: how the rate was derived from the job's size."""
        return (
            f"{self.base_lr:g} x {world_size} processes = {self.peak_lr(world_size):g} "
            f"after {self.warmup} warmup steps (global batch {self.batch_size * world_size})"
        )
