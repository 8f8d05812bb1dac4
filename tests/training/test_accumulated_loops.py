"""Gradient accumulation inside the compiled loop (`TrainingSteps.train_loop`): optimizer
steps of k micro-batches run in one call are the steps `TrainingSteps.train` takes one
call each, and the steps of one batch k times larger; a non-finite micro-batch skips
its step alike.

The tolerance on the weights comes from the arithmetic. The optimizer here is AdamW
with epsilon 1, no decay and no trust ratio, whose update m / (√v + 1) moves by at most
twice the largest change of any gradient it has seen: the moments change by at most
that change (m is a weighted mean of gradients, √v a weighted 2-norm of them) and the
denominator is at least 1, with |m| ≤ 1 after clipping at 1. (LAMB's and Adam's
epsilon of 1e-6 would turn a rounding change of a gradient element near zero into a
change of its update up to 10⁶ times larger: no rounding bound survives that.)
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.numerics import albert_depth_and_width, float32_budget
from helpers.testing_utils import TWO_LAYERS, random_batch, tiny_config

from albert_tf.models.pretraining_model import AlbertPretrainingModel
from albert_tf.training.optimization import AlbertOptimizer
from albert_tf.training.pretraining.options import PretrainingOptions
from albert_tf.training.pretraining.steps import PretrainingSteps

STEPS, K, MICRO, SEQ, PREDICTIONS = 4, 2, 4, 16, 3
LEARNING_RATE, CLIP = 0.01, 1.0
# No dropout: a batch split in two would draw other masks than the whole batch.
CONFIG = tiny_config(
    **TWO_LAYERS,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
    classifier_dropout_prob=0.0,
)


def _micro_batch(index: int, seq: int = SEQ, poisoned: bool = False):
    rng = np.random.RandomState(100 + index)
    features = random_batch(CONFIG.vocab_size, batch=MICRO, seq=seq, seed=index)
    features["mask_positions"] = np.sort(
        np.stack([rng.choice(seq // 2, PREDICTIONS, replace=False) for _ in range(MICRO)]), 1
    ).astype("int32")
    weights = np.ones((MICRO, PREDICTIONS), "float32")
    weights[-1, -1] = 0.0  # a padded prediction
    if poisoned:
        weights[0, 0] = np.nan
    labels = {
        "mask_ids": rng.randint(5, CONFIG.vocab_size, (MICRO, PREDICTIONS)).astype("int32"),
        "mask_weights": weights,
        "sentence_order_label": rng.randint(0, 2, MICRO).astype("int32"),
    }
    return features, labels


def _micro_batches(seqs=None, poisoned=()):
    seqs = seqs or [SEQ] * (STEPS * K)
    return [_micro_batch(i, seq, i in poisoned) for i, seq in enumerate(seqs)]


def _dataset(batches):
    """The batches in order; their shapes may differ."""
    dataset = tf.data.Dataset.from_tensors(batches[0])
    for batch in batches[1:]:
        dataset = dataset.concatenate(tf.data.Dataset.from_tensors(batch))
    return dataset


def _joined(batches):
    """Each step's K micro-batches as one batch of K · MICRO rows."""
    return [
        tf.nest.map_structure(lambda *parts: np.concatenate(parts), *batches[i : i + K])
        for i in range(0, len(batches), K)
    ]


def _steps(accumulation: int) -> PretrainingSteps:
    keras.utils.set_random_seed(3)
    model = AlbertPretrainingModel.from_albert_config(CONFIG)
    optimizer = AlbertOptimizer(
        LEARNING_RATE, weight_decay_rate=0.0, layer_adaptation=False, epsilon=1.0
    )
    options = PretrainingOptions(
        "unused",
        "unused",
        max_seq_length=SEQ,
        clip_norm=CLIP,
        gradient_accumulation_steps=accumulation,
        precision="float32",
        jit_compile=False,
    )
    return PretrainingSteps(model, optimizer, tf.distribute.get_strategy(), options)


def _weights(steps) -> np.ndarray:
    return np.concatenate([np.ravel(v.numpy()) for v in steps.variables])


def _one_call_a_step(batches, accumulation: int):
    steps = _steps(accumulation)
    totals: dict[str, float] = {}
    if accumulation == 1:
        batches = _joined(batches)
    for i in range(0, len(batches), accumulation):
        out = steps.train(batches[i : i + accumulation])
        if bool(out.pop("applied")):
            for k, v in out.items():
                totals[k] = totals.get(k, 0.0) + float(v)
    return steps, totals


def _loops(batches, steps_per_loop: int):
    steps = _steps(K)
    iterator = iter(_dataset(batches))
    totals: dict[str, float] = {}
    calls = []
    for _ in range(STEPS // steps_per_loop):
        out = {k: v.numpy() for k, v in steps.train_loop(iterator, steps_per_loop).items()}
        calls.append({k: out.pop(k) for k in ("attempts", "applied_steps", "consecutive_skipped")})
        for k, v in out.items():
            totals[k] = totals.get(k, 0.0) + float(v)
    assert steps.train_loop_fn.experimental_get_tracing_count() == 1
    return steps, totals, calls


def _budget() -> float:
    """What rounding may move the weights by: per step, the gradient's float32 budget
    (forward and backward pass, relative to its largest element, at most CLIP after
    clipping; clipping's own scale moves as much again), twice that through the update,
    times the learning rate; doubled for the later steps' gradients being taken at
    weights already that close (their change is the learning rate times the loss's
    curvature, well below 1 at this rate)."""
    depth, width = albert_depth_and_width(CONFIG, SEQ)
    gradient = 2 * float32_budget(depth=2 * depth, width=width) * CLIP
    return 2 * STEPS * LEARNING_RATE * 2 * gradient


def _assert_sums_close(actual, desired):
    depth, width = albert_depth_and_width(CONFIG, SEQ)
    rtol = float32_budget(depth=2 * depth, width=width)
    assert set(actual) == set(desired)
    for key in desired:
        assert actual[key] == pytest.approx(desired[key], rel=rtol, abs=1e-6), key


@pytest.fixture(scope="module")
def initial():
    return _weights(_steps(1))


def test_accumulated_steps_in_loops_are_the_steps_of_one_call_each_and_of_one_batch(initial):
    batches = _micro_batches()
    looped, looped_sums, calls = _loops(batches, steps_per_loop=2)
    accumulated, accumulated_sums = _one_call_a_step(batches, K)
    whole, whole_sums = _one_call_a_step(batches, 1)
    assert calls == [{"attempts": 2, "applied_steps": 2, "consecutive_skipped": 0}] * 2
    assert int(looped.optimizer.iterations) == STEPS == int(whole.optimizer.iterations)
    assert looped_sums["examples"] == whole_sums["examples"] == STEPS * K * MICRO
    _assert_sums_close(looped_sums, accumulated_sums)
    _assert_sums_close(looped_sums, whole_sums)
    bound = _budget()
    moved = np.abs(_weights(whole) - initial).max()
    assert moved > 10 * bound, (moved, bound)  # training moved the weights far more ...
    for other in (accumulated, whole):  # ... than the orders of the sums may
        assert np.abs(_weights(looped) - _weights(other)).max() <= bound


def test_micro_batches_of_other_lengths_in_one_step():
    # A token budget (or batches padded to their own length) gives each micro-batch
    # its own shape: the loop holds them all the same.
    batches = _micro_batches(seqs=[SEQ, SEQ - 4, SEQ - 2, SEQ] * (STEPS * K // 4))
    looped, looped_sums, _ = _loops(batches, steps_per_loop=STEPS)
    accumulated, accumulated_sums = _one_call_a_step(batches, K)
    _assert_sums_close(looped_sums, accumulated_sums)
    assert np.abs(_weights(looped) - _weights(accumulated)).max() <= _budget()


def test_a_nonfinite_micro_batch_skips_its_step_in_the_loop_as_in_one_call(initial):
    # The second micro-batch of step 2 has a NaN weight: that step's gradient is NaN.
    batches = _micro_batches(poisoned={3})
    looped, looped_sums, calls = _loops(batches, steps_per_loop=2)
    accumulated, accumulated_sums = _one_call_a_step(batches, K)
    assert calls == [
        {"attempts": 2, "applied_steps": 1, "consecutive_skipped": 1},
        {"attempts": 2, "applied_steps": 2, "consecutive_skipped": 0},
    ]
    assert int(looped.optimizer.iterations) == STEPS - 1 == int(accumulated.optimizer.iterations)
    # The skipped step's sums are left out, as they are by the host.
    assert looped_sums["examples"] == (STEPS - 1) * K * MICRO
    assert all(np.isfinite(v) for v in looped_sums.values())
    _assert_sums_close(looped_sums, accumulated_sums)
    assert np.abs(_weights(looped) - _weights(accumulated)).max() <= _budget()
    assert np.abs(_weights(looped) - initial).max() > 0
