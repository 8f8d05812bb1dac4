"""What one device needs for a fine-tuning step: the task's compiled step, measured.

`plan_finetuning` is `albert_tf.training.pretraining.memory.plan_pretraining` for a
task: it compiles one replica's forward and backward pass of a `FineTuningTrainer`'s
own steps (its model with the task head, its loss, its optimizer's slots) under XLA,
in the model's precision, for micro-batches of ``m`` items at the trainer's
``max_seq_length`` (the longest a batch can be), reads XLA's buffer assignment
(`albert_tf.training.memory_plan.training_step_bytes`) and takes the largest
micro-batch per device that fits (`albert_tf.training.memory_plan.plan_batches`).

Only shapes are compiled (`tf.TensorSpec`); the model computes with the ``xla``
implementation while it is measured and with its own again afterwards.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import tensorflow as tf

from albert_tf.layers.implementations import XLA, implementation
from albert_tf.training.finetuning.trainer import FEATURES, FineTuningTrainer
from albert_tf.training.memory_plan import (
    DeviceBudget,
    MemoryPlan,
    plan_batches,
    training_step_bytes,
)

__all__ = ["finetuning_batch_specs", "plan_finetuning", "step_bytes"]


def finetuning_batch_specs(trainer: FineTuningTrainer, example, micro_batch: int):
    """``(features, labels)`` specs of one replica's micro-batch of ``micro_batch``
    items, as long as ``trainer.max_seq_length``.

    ``example`` is any ``(features, labels)`` batch the trainer makes (its `batches`):
    it gives the axes that are neither the batch nor the length (a multiple-choice
    item's number of options). The labels' shape is the trainer's ``label_spec``, its
    open axes after the first being the length (a tag per piece).
    """
    features, _ = example
    ids = np.shape(features[FEATURES[0]])
    feature_shape = (micro_batch, *ids[1:-1], trainer.max_seq_length)
    feature_specs = {
        name: tf.TensorSpec(feature_shape, trainer.ids_spec.dtype) for name in FEATURES
    }
    label_shape = [micro_batch] + [
        trainer.max_seq_length if d is None else d for d in trainer.label_spec.shape[1:]
    ]
    return feature_specs, tf.TensorSpec(label_shape, trainer.label_spec.dtype)


class _Probe:
    """The trainer's model and a step of its own, compiled for several micro-batches."""

    def __init__(self, trainer: FineTuningTrainer, example, platform: str):
        self.trainer, self.example, self.platform = trainer, example, platform
        # The trainer's steps without accumulators (`measure` adds their bytes): a
        # shallow copy shares the model, the loss and the optimizer settings.
        single = copy.copy(trainer)
        single.gradient_accumulation_steps = 1
        self.steps = single.build_steps(total_steps=1)

    def measure(self, micro_batch: int, accumulating: bool) -> int:
        features, labels = finetuning_batch_specs(self.trainer, self.example, micro_batch)
        with implementation(self.trainer.model, XLA.name):
            return training_step_bytes(
                self.steps, features, labels, accumulating=accumulating, platform=self.platform
            )


def step_bytes(trainer: FineTuningTrainer, example, micro_batch: int, platform: str = "CPU") -> int:
    """Bytes one device needs for a step of ``trainer`` on ``micro_batch`` items of
    full length (no accumulation)."""
    return _Probe(trainer, example, platform).measure(micro_batch, accumulating=False)


def plan_finetuning(
    trainer: FineTuningTrainer,
    budget: DeviceBudget,
    example,
    platform: str = "CPU",
) -> MemoryPlan:
    """The micro-batch and accumulation steps of ``trainer.batch_size`` items on
    ``budget``, by the trainer's compiled step on ``platform``'s XLA backend.

    Args:
        trainer: the task's trainer, its model built (in its strategy's scope).
        budget: the devices (`albert_tf.training.memory_plan.device_budget` or
            `parse_devices`).
        example: one ``(features, labels)`` batch of the trainer's (see
            `finetuning_batch_specs`).
        platform: the XLA backend to compile for.

    Example:
        >>> from albert_tf.training.memory_plan import parse_devices
        >>> plan = plan_finetuning(trainer, parse_devices("8x80GB"), batch)  # doctest: +SKIP
        >>> plan.micro_batch * plan.accumulation_steps * 8 == trainer.batch_size  # doctest: +SKIP
        True
    """
    probe = _Probe(trainer, example, platform)
    per_device = trainer.batch_size // max(budget.count, 1)
    plan = plan_batches(
        global_batch=trainer.batch_size,
        budget=budget,
        measure=lambda m: probe.measure(m, accumulating=m < per_device),
    )
    return dataclasses.replace(plan, measured_on=f"XLA:{platform}", precision=trainer.precision)
