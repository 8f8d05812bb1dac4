"""Where a pretraining run keeps its checkpoints, and what they hold.

The chief saves to ``MODEL_DIR/checkpoints/ckpt-<step>``. Saving is collective,
so the other workers of a multi-worker run save too, each to a scratch
directory of its own that is deleted when training ends. Every worker
restores from the chief's directory.
"""

from __future__ import annotations

import glob
import os
import re

import keras
import tensorflow as tf

from albert_tf import storage

CHECKPOINT_SUBDIR = "checkpoints"
INPUT_POSITIONS_SUBDIR = "input_positions"


def chief_checkpoint_dir(model_dir: str) -> str:
    """The directory every worker restores from."""
    return os.path.join(model_dir, CHECKPOINT_SUBDIR)


def checkpoint_dir(model_dir: str, chief: bool, worker: int) -> str:
    """Where this worker saves: the chief's directory, else a scratch one."""
    if chief:
        return chief_checkpoint_dir(model_dir)
    return os.path.join(model_dir, f"worker_{worker}_scratch")


def input_positions_dir(model_dir: str, workers: int) -> str:
    """Where the workers of an N-worker run keep their input positions."""
    return os.path.join(model_dir, INPUT_POSITIONS_SUBDIR, f"{workers}_workers")


def input_position_dir(model_dir: str, workers: int, worker: int) -> str:
    """Where worker ``worker`` of a ``workers``-worker run saves its input position."""
    return os.path.join(input_positions_dir(model_dir, workers), f"worker_{worker}")


def workers_without_input_position(model_dir: str, workers: int, step: int) -> list[int]:
    """The workers of an N-worker run whose input position of ``step`` is not on disk.

    Every worker asks the same files, so all of them come to the same answer.
    """
    return [
        worker
        for worker in range(workers)
        if not storage.exists(
            checkpoint_path(input_position_dir(model_dir, workers, worker), step) + ".index"
        )
    ]


def checkpoint_step(path: str) -> int:
    """The step of a checkpoint prefix ``.../ckpt-<step>``."""
    return int(path.rsplit("-", 1)[1])


def checkpoint_path(directory: str, step: int) -> str:
    """The prefix `tf.train.CheckpointManager` gives the checkpoint of ``step``."""
    return os.path.join(directory, f"ckpt-{step}")


def saved_steps(directory: str) -> list[int]:
    """The steps of the checkpoints in ``directory``, newest first."""
    return [checkpoint_step(path) for path in saved_checkpoints(directory)]


def saved_checkpoints(directory: str) -> list[str]:
    """The checkpoint prefixes in ``directory``, newest (highest step) first.

    Read from the files, not from the ``checkpoint`` state file, so a
    damaged state file hides none, and a prefix without its index (a save
    cut short before it was written) is not listed.
    """
    # Through storage, not glob: a gs:// (or file://, ram://) model_dir is listed by
    # TensorFlow's file systems, where Python's glob sees nothing and a restarted
    # run would start again at step 0 over the first run's checkpoints.
    escaped = directory if storage.is_remote(directory) else glob.escape(directory)
    steps = []
    for index in storage.glob(os.path.join(escaped, "ckpt-*.index")):
        match = re.fullmatch(r"ckpt-(\d+)\.index", os.path.basename(index))
        if match:
            steps.append(int(match.group(1)))
    return [checkpoint_path(directory, step) for step in sorted(steps, reverse=True)]


def training_checkpoint(
    model: keras.Model, optimizer: keras.optimizers.Optimizer, iterator=None
) -> tf.train.Checkpoint:
    """Model, optimizer (its step counter is the global step), input position
    and dropout's random state: all a resumed run needs to continue exactly.

    ``iterator`` None leaves the input position out: an iterator over a
    tf.data service cannot be saved.
    """
    # Keras keeps dropout's random state in SeedGenerator variables that
    # a TF checkpoint of the model does not reach; without them a resumed
    # run would draw other dropout masks than an uninterrupted one.
    rng_states = [v for v in model.variables if v.path.endswith("seed_generator_state")]
    parts = {"model": model, "optimizer": optimizer, "rng": rng_states}
    if iterator is not None:
        parts["iterator"] = iterator
    return tf.train.Checkpoint(**parts)


def holds_input_position(path: str) -> bool:
    """Whether the checkpoint at ``path`` saved its run's input iterator."""
    return any(name.startswith("iterator/") for name, _ in tf.train.list_variables(path))


def write_half_checkpoint(checkpoint: tf.train.Checkpoint, prefix: str) -> None:
    """Leaves on disk what a save of ``prefix`` cut short leaves (for fault tests).

    TensorFlow writes a checkpoint's tensors under ``<prefix>_temp/`` and then
    merges them: it moves the data file to its final name and writes the
    index last. This runs the real writer and stops between those two
    steps, so the data file is whole under its final name and the index is
    missing: the state a kill during the merge leaves.
    """
    temporary = prefix + "_temp/part"
    checkpoint.write(temporary)
    escaped = temporary if storage.is_remote(temporary) else glob.escape(temporary)
    for data in storage.glob(escaped + ".data-*"):
        shard = data[len(temporary) :]  # ".data-00000-of-00001"
        storage.replace(data, prefix + shard)
