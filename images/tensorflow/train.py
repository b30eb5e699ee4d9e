"""TensorFlow MultiWorkerMirroredStrategy sample for TFJob.

The strategy reads the cluster and this worker's task from ``TF_CONFIG``, which the
TFJob operator injects into the ``tensorflow`` container; without it the sample trains
as a single worker. Every worker checkpoints (that is how the strategy saves), but
only the chief writes to ``--checkpoint-dir``; the others write to scratch
directories beside it that are removed afterwards.

    python -m images.tensorflow.train --steps 50
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import tensorflow as tf

from images.common import trainkit


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the sample's options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    trainkit.add_common_arguments(parser)
    parser.add_argument(
        "--threads", type=int, default=1, help="TensorFlow CPU threads per pool (0: default)"
    )
    args = parser.parse_args(argv)
    trainkit.validate_common_arguments(args)
    return args


def task_from_env() -> tuple[str, int, int, bool]:
    """(task type, task index, rank, is chief) from ``TF_CONFIG``.

    The chief (or master) is rank 0 and workers follow it; without a chief, worker 0
    is the chief. Without ``TF_CONFIG`` this is a lone worker.
    """
    raw = os.environ.get("TF_CONFIG", "")
    if not raw:
        return "worker", 0, 0, True
    try:
        config = json.loads(raw)
        task = config["task"]
        task_type, index = str(task["type"]), int(task["index"])
        cluster = config["cluster"]
    except (ValueError, KeyError, TypeError) as error:
        raise SystemExit(
            f"TF_CONFIG={raw!r} is not valid: expected "
            '{"cluster": {...}, "task": {"type": ..., "index": ...}} '
            f"({error})"
        ) from None
    has_chief = "chief" in cluster or "master" in cluster
    is_chief = task_type in ("chief", "master") or (
        not has_chief and task_type == "worker" and index == 0
    )
    rank = index + (1 if has_chief and task_type == "worker" else 0)
    return task_type, index, rank, is_chief


def weights_digest(model: Any) -> str:
    """SHA-256 over the raw bytes of every weight, in layer order."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(weight.tobytes())
    return digest.hexdigest()


def train(args: argparse.Namespace) -> int:
    """Train, checkpointing and resuming as configured; return the process exit code."""
    if args.threads > 0:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    task_type, task_index, rank, is_chief = task_from_env()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    world_size = int(strategy.num_replicas_in_sync)
    schedule = trainkit.schedule_from_args(args, world_size)

    with strategy.scope():
        tf.keras.utils.set_random_seed(args.seed)
        model = tf.keras.Sequential(
            [
                tf.keras.Input(shape=(args.features,)),
                tf.keras.layers.Dense(args.hidden, activation="relu"),
                tf.keras.layers.Dense(args.hidden, activation="relu"),
                tf.keras.layers.Dense(args.classes),
            ]
        )
        optimizer = tf.keras.optimizers.SGD(learning_rate=schedule.base_lr, momentum=0.9)
        optimizer.build(model.trainable_variables)
        step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")

    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    teacher = tf.random.stateless_normal(
        (args.features, args.classes), seed=[args.seed, 0x5EED], dtype=tf.float32
    )

    @tf.function  # type: ignore[untyped-decorator]  # tensorflow ships no types
    def train_step(inputs: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        def replica_step(inputs: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits = model(inputs, training=True)
                loss = tf.nn.compute_average_loss(
                    loss_fn(labels, logits), global_batch_size=schedule.global_batch_size
                )
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
            return loss

        per_replica = strategy.run(replica_step, args=(inputs, labels))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step_var)
    manager: tf.train.CheckpointManager | None = None
    checkpoint_dir = Path(args.checkpoint_dir) if args.checkpoint_dir else None
    write_dir: Path | None = None
    if checkpoint_dir is not None:
        write_dir = checkpoint_dir if is_chief else checkpoint_dir / f".{task_type}-{task_index}"
        manager = tf.train.CheckpointManager(checkpoint, str(write_dir), max_to_keep=2)
        latest = tf.train.latest_checkpoint(str(checkpoint_dir))
        if latest:
            checkpoint.restore(latest)
    start_step = int(step_var.numpy())
    if start_step:
        trainkit.log(f"rank {rank}: resumed from {checkpoint_dir} at step {start_step}")

    if is_chief:
        trainkit.log_start(args, schedule, "cpu")
    meter = trainkit.ThroughputMeter()
    # The chief tells the operator each step reached and each checkpoint it wrote.
    reporter = trainkit.ProgressReporter(args.report_seconds if is_chief else 0)
    for step in range(start_step + 1, args.steps + 1):
        meter.restart()
        lr = schedule.lr_at(step)
        optimizer.learning_rate.assign(lr)
        seed = trainkit.data_seed(args.seed, rank, step)
        inputs = tf.random.stateless_normal((args.batch_size, args.features), seed=[seed, 0])
        labels = tf.argmax(tf.matmul(inputs, teacher), axis=1)
        loss = float(train_step(inputs, labels).numpy())
        step_var.assign(step)
        if is_chief:
            samples_per_sec = meter.samples_per_sec(schedule.global_batch_size)
            trainkit.log_step(step, loss, lr, samples_per_sec)
            reporter.step(step)
        if manager is not None and (step % args.checkpoint_every == 0 or step == args.steps):
            path = manager.save(checkpoint_number=step)
            if is_chief:
                trainkit.log(f"checkpoint step={step} path={path}")
                reporter.checkpoint(step, str(path))

    reporter.close()
    if write_dir is not None and not is_chief:
        shutil.rmtree(write_dir, ignore_errors=True)
    trainkit.log_final(rank, max(start_step, args.steps), weights_digest(model))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    return train(parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
