"""PyTorch DistributedDataParallel sample for PyTorchJob.

The process group is initialised only from the environment the operator injects
(``init_method="env://"``): ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` and
``RANK`` for one process per pod, or the same variables set by ``torchrun`` from the
``PET_*`` variables when a pod runs several processes (``nprocPerNode`` > 1). Without
``WORLD_SIZE`` (or with ``WORLD_SIZE=1``) it trains as a single process.

Run from the repository root or the image's working directory::

    python -m images.pytorch.train --steps 50
    torchrun -m images.pytorch.train --steps 50     # nprocPerNode > 1
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from images.common import torchkit, trainkit


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the sample's options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    trainkit.add_common_arguments(parser)
    parser.add_argument(
        "--backend",
        choices=["auto", "gloo", "nccl"],
        default="auto",
        help="torch.distributed backend; auto picks nccl with CUDA, gloo without",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="intra-op CPU threads per process (0: default)"
    )
    parser.add_argument("--dist-timeout", type=int, default=300, help="seconds to wait for peers")
    parser.add_argument(
        "--step-delay",
        type=float,
        default=0.0,
        help="seconds to sleep after each step: the pace of a larger model at this one's "
        "cost (to watch or test an elastic job scale while it trains)",
    )
    args = parser.parse_args(argv)
    trainkit.validate_common_arguments(args)
    if args.step_delay < 0:
        raise SystemExit(f"--step-delay ({args.step_delay}) must be >= 0")
    return args


def env_int(name: str, default: int) -> int:
    """An integer from the environment, with an error naming the variable if malformed."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"environment variable {name}={raw!r} must be an integer") from None


def setup_distributed(backend: str, timeout_s: int) -> tuple[int, int, torch.device]:
    """Join the process group described by the environment; return (rank, world, device)."""
    world_size = env_int("WORLD_SIZE", 1)
    local_rank = env_int("LOCAL_RANK", 0)
    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    if world_size <= 1:
        return 0, 1, device
    for required in ("MASTER_ADDR", "MASTER_PORT", "RANK"):
        if not os.environ.get(required):
            raise SystemExit(
                f"WORLD_SIZE={world_size} but {required} is not set: the PyTorchJob "
                "operator (or torchrun) sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK"
            )
    chosen = backend if backend != "auto" else ("nccl" if use_cuda else "gloo")
    dist.init_process_group(
        backend=chosen, init_method="env://", timeout=timedelta(seconds=timeout_s)
    )
    return dist.get_rank(), dist.get_world_size(), device


def global_mean_and_stop(value: torch.Tensor, stop: bool, world_size: int) -> tuple[float, bool]:
    """The mean of ``value`` over all ranks, and whether any rank was asked to stop: one
    all-reduce carries both, so every rank stops at the same step (a drain evicts the pods
    of one node; the others learn of it here, not from a broken collective later)."""
    both = torch.stack([value.detach().float().cpu(), torch.tensor(1.0 if stop else 0.0)])
    if world_size > 1:
        both = both.to(value.device)
        dist.all_reduce(both, op=dist.ReduceOp.SUM)
        both = both.cpu()
    return float(both[0].item()) / world_size, bool(both[1].item() > 0)


def load_shared_checkpoint(directory: Path, rank: int, world_size: int) -> dict[str, Any] | None:
    """The checkpoint rank 0 reads, sent to every rank: all resume from the same step even
    where only rank 0 sees the directory (a node that joined an elastic job later, without
    shared storage)."""
    state = torchkit.load_checkpoint(directory) if rank == 0 else None
    if world_size > 1:
        box: list[dict[str, Any] | None] = [state]
        dist.broadcast_object_list(box, src=0)
        state = box[0]
    return state


def train(args: argparse.Namespace) -> int:
    """Train, checkpointing and resuming as configured; return the process exit code."""
    torchkit.configure_cpu_threads(args.threads)
    stop = trainkit.StopRequest()
    rank, world_size, device = setup_distributed(args.backend, args.dist_timeout)
    schedule = trainkit.schedule_from_args(args, world_size)
    task = torchkit.SyntheticTask(args.features, args.classes, args.seed)
    model = torchkit.build_model(args.features, args.hidden, args.classes, args.seed).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=schedule.base_lr, momentum=0.9)

    checkpoint_dir = Path(args.checkpoint_dir) if args.checkpoint_dir else None
    start_step = 0
    if checkpoint_dir is not None:
        state = load_shared_checkpoint(checkpoint_dir, rank, world_size)
        if state is not None:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            start_step = state["step"]
            trainkit.log(f"rank {rank}: resumed from {checkpoint_dir} at step {start_step}")
            if rank == 0:
                # After an elastic re-rendezvous: where training continues, in which group,
                # and the rate the linear scaling rule gives that group.
                # And after the operator restarted the gang: which attempt, and why.
                restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
                trainkit.log(
                    f"resume step={start_step} world_size={world_size} "
                    f"peak_lr={schedule.peak_lr:.6f} restart={restart}"
                    f"{trainkit.attempt_note()}{trainkit.checkpoint_note()}"
                )

    ddp: nn.Module = (
        DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        if world_size > 1
        else model
    )
    if rank == 0:
        trainkit.log_start(args, schedule, device)

    loss_fn = nn.CrossEntropyLoss()
    meter = trainkit.ThroughputMeter()
    # Rank 0 tells the operator each step reached and each checkpoint (its hang
    # detection and the restart's resume point); a hung rank stops it reporting.
    reporter = trainkit.ProgressReporter(args.report_seconds if rank == 0 else 0)
    for step in range(start_step + 1, args.steps + 1):
        meter.restart()
        lr = schedule.lr_at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        inputs, labels = task.batch(rank, step, args.batch_size)
        inputs, labels = inputs.to(device), labels.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(inputs), labels)
        loss.backward()
        optimizer.step()
        mean_loss, stopping = global_mean_and_stop(loss, stop.requested, world_size)
        if rank == 0:
            samples_per_sec = meter.samples_per_sec(schedule.global_batch_size)
            trainkit.log_step(step, mean_loss, lr, samples_per_sec)
            reporter.step(step)
        if args.step_delay:
            time.sleep(args.step_delay)
        due = step % args.checkpoint_every == 0 or step == args.steps or stopping
        if checkpoint_dir is not None and due:
            if rank == 0:
                path = torchkit.save_checkpoint(
                    checkpoint_dir, step=step, model=model, optimizer=optimizer
                )
                why = " on=SIGTERM" if stopping else ""
                trainkit.log(f"checkpoint step={step} path={path}{why}")
                reporter.checkpoint(step, str(path))
            if world_size > 1:
                # Nobody runs ahead of a checkpoint it might be asked to resume from.
                dist.barrier()
        if stopping and step < args.steps:
            # Asked to stop (this pod or a peer's got SIGTERM): the step is finished and,
            # with a checkpoint directory, saved; the pod's restart resumes after it.
            trainkit.log(f"rank {rank}: stopped after step {step} on SIGTERM")
            reporter.close()
            if world_size > 1:
                dist.destroy_process_group()
            return stop.exit_code

    reporter.close()
    trainkit.log_final(rank, max(start_step, args.steps), torchkit.parameters_digest(model))
    if world_size > 1:
        # Every rank is done with every collective before any tears its connections down
        # (CI once saw rank 0 abort in teardown after its final step, a peer already gone).
        dist.barrier()
        dist.destroy_process_group()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    return train(parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
