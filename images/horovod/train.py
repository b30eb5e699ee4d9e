"""Horovod (PyTorch) sample for MPIJob.

Horovod takes its rank and size from the launcher that started it: ``mpirun`` (the
MPIJob launcher, which the operator points at ``/etc/mpi/hostfile`` through
``OMPI_MCA_orte_default_hostfile``) or ``horovodrun``. Nothing else configures it.

    mpirun -np 2 python -m images.horovod.train --steps 50
    horovodrun --gloo -np 2 python -m images.horovod.train --steps 50
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import horovod.torch as hvd
import torch
from torch import nn

from images.common import torchkit, trainkit


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the sample's options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    trainkit.add_common_arguments(parser)
    parser.add_argument(
        "--threads", type=int, default=1, help="intra-op CPU threads per process (0: default)"
    )
    args = parser.parse_args(argv)
    trainkit.validate_common_arguments(args)
    return args


def train(args: argparse.Namespace) -> int:
    """Train, checkpointing and resuming as configured; return the process exit code."""
    torchkit.configure_cpu_threads(args.threads)
    hvd.init()
    rank: int = hvd.rank()
    world_size: int = hvd.size()
    device = torch.device("cpu")
    if torch.cuda.is_available():
        device = torch.device("cuda", hvd.local_rank())
        torch.cuda.set_device(device)

    schedule = trainkit.schedule_from_args(args, world_size)
    task = torchkit.SyntheticTask(args.features, args.classes, args.seed)
    model = torchkit.build_model(args.features, args.hidden, args.classes, args.seed).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=schedule.base_lr, momentum=0.9)

    # Rank 0 reads the checkpoint; everyone else receives its state by broadcast, so
    # the checkpoint only has to be visible to the first worker.
    checkpoint_dir = Path(args.checkpoint_dir) if args.checkpoint_dir else None
    start_step = 0
    if checkpoint_dir is not None and rank == 0:
        state = torchkit.load_checkpoint(checkpoint_dir)
        if state is not None:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            start_step = state["step"]
            trainkit.log(f"rank {rank}: resumed from {checkpoint_dir} at step {start_step}")
    start_step = int(hvd.broadcast_object(start_step, root_rank=0, name="start_step"))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    distributed: Any = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters()
    )
    if rank == 0:
        trainkit.log_start(args, schedule, device)

    loss_fn = nn.CrossEntropyLoss()
    meter = trainkit.ThroughputMeter()
    # Rank 0 tells the operator each step reached and each checkpoint it wrote (the
    # server's variables reach the ranks through mpirun: kubetrain forwards them).
    reporter = trainkit.ProgressReporter(args.report_seconds if rank == 0 else 0)
    for step in range(start_step + 1, args.steps + 1):
        meter.restart()
        lr = schedule.lr_at(step)
        for group in distributed.param_groups:
            group["lr"] = lr
        inputs, labels = task.batch(rank, step, args.batch_size)
        inputs, labels = inputs.to(device), labels.to(device)
        distributed.zero_grad()
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        distributed.step()
        mean_loss = float(hvd.allreduce(loss.detach(), name="loss", op=hvd.Average).item())
        if rank == 0:
            samples_per_sec = meter.samples_per_sec(schedule.global_batch_size)
            trainkit.log_step(step, mean_loss, lr, samples_per_sec)
            reporter.step(step)
        if checkpoint_dir is not None and (step % args.checkpoint_every == 0 or step == args.steps):
            if rank == 0:
                path = torchkit.save_checkpoint(
                    checkpoint_dir, step=step, model=model, optimizer=optimizer
                )
                trainkit.log(f"checkpoint step={step} path={path}")
                reporter.checkpoint(step, str(path))
            hvd.barrier()

    reporter.close()
    trainkit.log_final(rank, max(start_step, args.steps), torchkit.parameters_digest(model))
    hvd.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    return train(parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
