"""PyTorch pieces shared by the PyTorch DDP and Horovod samples.

The task is synthetic and needs no download: inputs are Gaussian, and the label of
an input is the class a fixed random "teacher" network scores highest. The student
is a small MLP that can learn the teacher exactly, so its loss falls steadily from
about ln(classes).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from images.common.trainkit import data_seed

CHECKPOINT_FILE = "checkpoint.pt"


def build_model(features: int, hidden: int, classes: int, seed: int) -> nn.Module:
    """The student MLP, initialised identically on every rank from ``seed``."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(features, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, classes),
    )


@dataclass(frozen=True)
class SyntheticTask:
    """A teacher that labels Gaussian inputs; the same on every rank for a seed."""

    features: int
    classes: int
    seed: int

    def teacher(self) -> torch.Tensor:
        """The teacher's weights (features x classes)."""
        generator = torch.Generator().manual_seed(self.seed ^ 0x5EED)
        return torch.randn(self.features, self.classes, generator=generator)

    def batch(self, rank: int, step: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch ``rank`` trains on at ``step``: (inputs, labels) on the CPU."""
        generator = torch.Generator().manual_seed(data_seed(self.seed, rank, step))
        inputs = torch.randn(size, self.features, generator=generator)
        labels = (inputs @ self.teacher()).argmax(dim=1)
        return inputs, labels


def parameters_digest(model: nn.Module) -> str:
    """SHA-256 over the raw bytes of every parameter, in registration order.

    Replicas that stayed in sync print the same digest.
    """
    digest = hashlib.sha256()
    for parameter in model.parameters():
        flat = parameter.detach().to("cpu").contiguous().reshape(-1)
        digest.update(bytes(flat.view(torch.uint8).tolist()))
    return digest.hexdigest()


def save_checkpoint(
    directory: Path, *, step: int, model: nn.Module, optimizer: torch.optim.Optimizer
) -> Path:
    """Write the checkpoint for ``step`` atomically and return its path.

    The file is written beside its final name and renamed into place, so a job killed
    mid-write leaves the previous checkpoint intact.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CHECKPOINT_FILE
    partial = directory / f".{CHECKPOINT_FILE}.{os.getpid()}.tmp"
    state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    torch.save(state, partial)
    os.replace(partial, path)
    return path


def load_checkpoint(directory: Path) -> dict[str, Any] | None:
    """The saved state (``step``, ``model``, ``optimizer``), or None if there is none."""
    path = directory / CHECKPOINT_FILE
    if not path.is_file():
        return None
    state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state.get("step"), int):
        raise ValueError(f"checkpoint {path} has no integer 'step': it was not written here")
    return state


def configure_cpu_threads(threads: int) -> None:
    """Limit intra-op threads; replicas sharing a node otherwise contend for cores."""
    if threads > 0:
        torch.set_num_threads(threads)
