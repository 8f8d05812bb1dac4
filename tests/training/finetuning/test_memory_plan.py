"""The fine-tuning memory plan (`albert_tf.training.finetuning.memory`): on a faked device
budget it picks the micro-batch the task's compiled step fits in, and the next size
would not fit; the batch shapes follow the task's (options, a label per piece)."""

import keras
import numpy as np
import tensorflow as tf
from helpers.testing_utils import TWO_LAYERS, random_batch, tiny_config

from albert_tf.layers.implementations import model_implementation
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.training.finetuning.memory import finetuning_batch_specs, plan_finetuning, step_bytes
from albert_tf.training.finetuning.trainer import FEATURES, FineTuningTrainer
from albert_tf.training.memory_plan import DeviceBudget

CONFIG = tiny_config(**TWO_LAYERS, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
SEQ = 64


class _Tokenizer:
    vocabulary_size = CONFIG.vocab_size


class _PairScorer(FineTuningTrainer):
    """The least a task needs here: two classes from the pooled output."""

    def loss_sums(self, logits, labels):
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        correct = tf.reduce_sum(
            tf.cast(tf.argmax(logits, -1, output_type=tf.int32) == labels, tf.float32)
        )
        return tf.reduce_sum(losses), correct


def _trainer(tmp_path, batch_size=64):
    keras.utils.set_random_seed(0)
    inputs = {name: keras.Input((None,), dtype="int32", name=name) for name in FEATURES}
    pooled = AlbertBackbone(CONFIG)(inputs)["pooled_output"]
    model = keras.Model(inputs, keras.layers.Dense(2)(pooled))
    model.config = CONFIG
    return _PairScorer(
        model,
        _Tokenizer(),
        output_dir=tmp_path,
        max_seq_length=SEQ,
        batch_size=batch_size,
        progress=False,
        fused_kernels=False,
    )


def _example():
    features = random_batch(CONFIG.vocab_size, batch=2, seq=20)
    return features, np.array([0, 1], "int32")


def test_plan_fits_by_the_compiled_step_and_one_step_larger_would_not(tmp_path):
    trainer = _trainer(tmp_path)
    example = _example()
    before = model_implementation(trainer.model)
    one, two = (step_bytes(trainer, example, m) for m in (1, 2))
    per_example = two - one
    assert per_example > 0
    # A faked device that holds about 5 items' activations: micro-batch 4 of 8 per
    # device (64 over 8 devices) must be chosen, with 2 accumulation steps.
    budget = DeviceBudget(8, int((one + 4.5 * per_example) / 0.9), "8 faked")
    plan = plan_finetuning(trainer, budget, example)
    assert (plan.micro_batch, plan.accumulation_steps) == (4, 2)
    assert plan.micro_batch * plan.accumulation_steps * budget.count == trainer.batch_size
    assert step_bytes(trainer, example, 4) <= budget.usable_bytes
    assert step_bytes(trainer, example, 8) > budget.usable_bytes
    assert plan.next_larger[0] == 8
    assert plan.precision == "float32" and plan.measured_on == "XLA:CPU"
    # Measured under XLA; the trainer's model computes as it did.
    assert model_implementation(trainer.model) == before == "stock"


def test_batch_specs_follow_the_task(tmp_path):
    trainer = _trainer(tmp_path)
    # A multiple-choice batch: [batch, options, length] ids.
    features = {name: np.zeros((2, 4, 20), "int32") for name in FEATURES}
    ids, labels = finetuning_batch_specs(trainer, (features, np.zeros(2, "int32")), 3)
    assert ids["token_ids"].shape == (3, 4, SEQ) and labels.shape == (3,)
    # A tag per piece: the labels' open axis is the length.
    trainer.label_spec = tf.TensorSpec([None, None], tf.int32)
    _, labels = finetuning_batch_specs(trainer, _example(), 3)
    assert labels.shape == (3, SEQ)
