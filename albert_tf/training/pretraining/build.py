"""What a pretraining run is built from its options: the model, the optimizer and the
input pipeline (with the tf.data service job it may read from).

`albert_tf.training.pretraining.trainer.PretrainingTrainer` builds its run with these,
under its strategy's scope; benchmarks and the memory plan build the same parts alone.
"""

from __future__ import annotations

import hashlib
import json
import os

import keras
import tensorflow as tf

from albert_tf import storage
from albert_tf.config import AlbertConfig
from albert_tf.data.pipeline import PipelineConfig, pretraining_dataset
from albert_tf.layers.encoder import set_recompute
from albert_tf.layers.implementations import choose_implementation, set_implementation
from albert_tf.models.pretraining_model import AlbertPretrainingModel
from albert_tf.training import optimization
from albert_tf.training.devices import Devices
from albert_tf.training.precision import dtype_policy
from albert_tf.training.pretraining.options import PretrainingOptions

__all__ = ["build_inputs", "build_model", "build_optimizer", "data_service_job_name"]


def data_service_job_name(options: PretrainingOptions) -> str:
    """The tf.data service job of a run's training data.

    Stable, so a restarted run rejoins its job while the dispatcher keeps it;
    derived from the directory and everything that shapes the batches, so two
    runs (or one run with another input) never share a job.
    """
    model_dir = options.model_dir
    key = [
        model_dir if storage.is_remote(model_dir) else os.path.abspath(model_dir),
        options.train_files,
        options.seed,
        options.max_seq_length,
        options.max_predictions_per_seq,
        options.micro_batch_size,
        options.micro_batch_tokens,
        options.data_service_mode,
    ]
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
    return f"albert_tf_pretrain_{digest}"


def build_model(
    config: AlbertConfig, options: PretrainingOptions, devices: Devices | None = None
) -> AlbertPretrainingModel:
    """The model a run trains, in the run's (resolved) precision, with the layers'
    implementation chosen for ``devices`` (default: this process's) and the run's
    XLA and fused-kernel options. Call it under the strategy's scope."""
    model = AlbertPretrainingModel.from_albert_config(config, dtype=dtype_policy(options.precision))
    devices = devices or Devices.detect()
    name = choose_implementation(
        accelerator=devices.accelerator,
        jit_compile=bool(options.jit_compile),
        fused_kernels=options.fused_kernels,
    )
    set_implementation(model, name)
    set_recompute(model, options.recompute)
    return model


def build_optimizer(options: PretrainingOptions) -> keras.optimizers.Optimizer:
    """LAMB (or AdamW) with warm-up and polynomial decay; float16 wraps it in loss
    scaling. Call it under the strategy's scope."""
    return optimization.build_optimizer(
        options.learning_rate,
        options.num_train_steps,
        options.num_warmup_steps,
        weight_decay_rate=options.weight_decay_rate,
        optimizer=options.optimizer,
        precision=options.precision,
    )


def build_inputs(
    options: PretrainingOptions,
    num_replicas: int = 1,
    worker_rows: tuple[int, int] | None = None,
) -> tf.data.Dataset:
    """The run's masked global batches (features, labels), each a multiple of
    ``num_replicas`` examples; with ``worker_rows`` ``(num_workers, index)``,
    this worker's rows of each."""
    config = PipelineConfig(
        batch_size=options.micro_batch_size,
        max_seq_length=options.max_seq_length,
        max_predictions_per_seq=options.max_predictions_per_seq,
        seed=options.seed,
        tokens_per_batch=options.micro_batch_tokens,
        batch_size_multiple=num_replicas,
        worker_rows=worker_rows,
        data_service=options.data_service,
        data_service_mode=options.data_service_mode,
        job_name=data_service_job_name(options) if options.data_service else None,
    )
    return pretraining_dataset(options.train_files, config)
