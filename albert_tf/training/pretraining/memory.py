"""What one device needs for a pretraining step: the compiled step, measured.

`step_bytes` compiles one replica's forward and backward pass (the trainer's own
`PretrainingSteps`, under XLA, in the run's precision and with its ``recompute``)
for a micro-batch of ``m`` examples and reads XLA's buffer assignment
(`albert_tf.training.compiled_memory`): weights and the batch (arguments), the
gradients (outputs) and the activations and scratch (temporaries). The optimizer's
slots and the gradient accumulators live outside that program and are added.
`plan_pretraining` feeds it to `albert_tf.training.memory_plan.plan_batches`.

Only shapes are compiled (`tf.TensorSpec`): planning ALBERT-base at 4096 × 512
allocates nothing of that size.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.data.masking import default_max_predictions
from albert_tf.layers.encoder import set_recompute
from albert_tf.layers.implementations import XLA, set_implementation
from albert_tf.models.pretraining_model import AlbertPretrainingModel
from albert_tf.training.memory_plan import (
    DeviceBudget,
    MemoryPlan,
    plan_batches,
    training_step_bytes,
)
from albert_tf.training.precision import dtype_policy
from albert_tf.training.pretraining.options import PretrainingOptions

__all__ = ["plan_pretraining", "step_bytes"]


def batch_specs(micro_batch: int, seq: int, predictions: int):
    """``(features, labels)`` specs of one replica's micro-batch (the pipeline's)."""
    ints = lambda *shape: tf.TensorSpec(shape, tf.int32)  # noqa: E731
    features = {
        "token_ids": ints(micro_batch, seq),
        "segment_ids": ints(micro_batch, seq),
        "padding_mask": ints(micro_batch, seq),
        "mask_positions": ints(micro_batch, predictions),
    }
    labels = {
        "mask_ids": ints(micro_batch, predictions),
        "mask_weights": tf.TensorSpec((micro_batch, predictions), tf.float32),
        "sentence_order_label": ints(micro_batch),
    }
    return features, labels


class _Probe:
    """One model and optimizer, compiled for several micro-batch sizes."""

    def __init__(self, config: AlbertConfig, options: PretrainingOptions, platform: str):
        from albert_tf.training.pretraining.build import build_optimizer
        from albert_tf.training.pretraining.steps import PretrainingSteps

        self.options = dataclasses.replace(options, gradient_accumulation_steps=1, jit_compile=True)
        self.platform = platform
        self.model = AlbertPretrainingModel.from_albert_config(
            config, dtype=dtype_policy(options.precision)
        )
        set_implementation(self.model, XLA.name)
        set_recompute(self.model, options.recompute)
        strategy = tf.distribute.get_strategy()
        self.steps = PretrainingSteps(self.model, build_optimizer(options), strategy, self.options)
        self.seq = options.max_seq_length
        self.predictions = options.max_predictions_per_seq or default_max_predictions(self.seq)

    def measure(self, micro_batch: int, accumulating: bool) -> int:
        features, labels = batch_specs(micro_batch, self.seq, self.predictions)
        return training_step_bytes(
            self.steps, features, labels, accumulating=accumulating, platform=self.platform
        )


def step_bytes(
    config: AlbertConfig, options: PretrainingOptions, micro_batch: int, platform: str = "CPU"
) -> int:
    """Bytes one device needs for a step on ``micro_batch`` examples (no accumulation)."""
    return _Probe(config, options, platform).measure(micro_batch, accumulating=False)


def plan_pretraining(
    config: AlbertConfig,
    options: PretrainingOptions,
    budget: DeviceBudget,
    platform: str = "CPU",
) -> MemoryPlan:
    """The micro-batch and accumulation steps of ``options.train_batch_size`` on
    ``budget``, by the compiled step's memory on ``platform``'s XLA backend."""
    probe = _Probe(config, options, platform)
    per_device = options.train_batch_size // max(budget.count, 1)
    plan = plan_batches(
        global_batch=options.train_batch_size,
        budget=budget,
        measure=lambda m: probe.measure(m, accumulating=m < per_device),
    )
    return dataclasses.replace(plan, measured_on=f"XLA:{platform}")
