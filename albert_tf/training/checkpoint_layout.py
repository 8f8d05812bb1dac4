"""Where a pretraining run keeps its checkpoints, and what they hold.

The chief saves to ``MODEL_DIR/checkpoints/ckpt-<step>``. Saving is collective,
so the other workers of a multi-worker run save too, each to a scratch
directory of its own that is deleted when training ends. Every worker
restores from the chief's directory.
"""

from __future__ import annotations

import os

import keras
import tensorflow as tf

CHECKPOINT_SUBDIR = "checkpoints"


def chief_checkpoint_dir(model_dir: str) -> str:
    """The directory every worker restores from."""
    return os.path.join(model_dir, CHECKPOINT_SUBDIR)


def checkpoint_dir(model_dir: str, chief: bool, worker: int) -> str:
    """Where this worker saves: the chief's directory, else a scratch one."""
    if chief:
        return chief_checkpoint_dir(model_dir)
    return os.path.join(model_dir, f"worker_{worker}_scratch")


def checkpoint_path(directory: str, step: int) -> str:
    """The prefix `tf.train.CheckpointManager` gives the checkpoint of ``step``."""
    return os.path.join(directory, f"ckpt-{step}")


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
