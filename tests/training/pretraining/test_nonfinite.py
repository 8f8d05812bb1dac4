"""Steps with a non-finite gradient are skipped, counted, and stop the run
when they keep coming (injected through the ALBERT_TF_FAULTS hook)."""

import json

import numpy as np
import pytest
import tensorflow as tf
from helpers.training_utils import tiny_albert, tiny_options

from albert_tf.training.pretraining.hooks import TrainerHook
from albert_tf.training.pretraining.trainer import PretrainingTrainer


def _state(trainer):
    """Weights and every optimizer variable (slots and step counter)."""
    return [np.array(v) for v in (*trainer.model.weights, *trainer.optimizer.variables)]


def test_nonfinite_step_leaves_weights_and_slots_bit_identical(tmp_path, prepared, vocab):
    trainer = PretrainingTrainer(
        tiny_albert(vocab),
        tiny_options(tmp_path / "run", prepared, num_train_steps=5, faults="nonfinite_at_step:3"),
    )
    trainer.train_one_step()
    trainer.train_one_step()
    before = _state(trainer)
    sums = trainer.train_one_step()  # the attempt at step 3: infinite loss
    assert not np.isfinite(sums["grad_norm"])
    assert trainer.step == 2
    after = _state(trainer)
    assert len(before) == len(after) > 2 * len(trainer.model.trainable_weights)
    for b, a in zip(before, after, strict=True):
        assert np.array_equal(b, a)
    trainer.train_one_step()  # the retry, on the next batch, applies
    assert trainer.step == 3
    assert any(not np.array_equal(b, a) for b, a in zip(before, _state(trainer), strict=True))


def test_skipped_step_is_counted_and_training_continues(tmp_path, prepared, vocab):
    trainer = PretrainingTrainer(
        tiny_albert(vocab),
        tiny_options(
            tmp_path / "run",
            prepared,
            num_train_steps=5,
            log_every_steps=1,
            faults="nonfinite_at_step:3",
        ),
    )
    logged = []
    trainer.train(log=logged.append)
    assert trainer.step == 5
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3, 4, 5]
    assert [r["skipped_steps"] for r in lines] == [0, 0, 1, 0, 0]
    assert all(np.isfinite(r["mlm_loss"]) for r in lines)
    assert any("step 3: non-finite" in m for m in logged)
    assert all(np.isfinite(w).all() for w in _state(trainer))


def test_consecutive_nonfinite_steps_stop_the_run(tmp_path, prepared, vocab):
    trainer = PretrainingTrainer(
        tiny_albert(vocab),
        tiny_options(
            tmp_path / "run",
            prepared,
            num_train_steps=10,
            max_consecutive_nonfinite_steps=3,
            faults="nonfinite_from_step:3",
        ),
    )
    with pytest.raises(FloatingPointError, match=r"3 steps in a row .* at step 3") as error:
        trainer.train(log=lambda *_: None)
    assert "--learning_rate" in str(error.value) and "float32" in str(error.value)
    assert trainer.step == 2


class _NonfiniteAttempts(TrainerHook):
    """Makes the loss infinite at the chosen attempts (counted in the graph, so it
    works inside a compiled loop, where the fault-injection hook cannot act)."""

    def __init__(self, attempts):
        self.bad = tf.constant(sorted(attempts), tf.int64)
        self.count = tf.Variable(0, dtype=tf.int64)

    def install(self, steps):
        def transform(loss):
            self.count.assign_add(1)
            hit = tf.reduce_any(tf.equal(self.bad, self.count))
            # A factor, as the fault-injection hook does: the gradient is inf too.
            return loss * tf.where(hit, float("inf"), 1.0)

        steps.loss_transforms.append(transform)


def _run_with_skips(tmp_path, prepared, vocab, steps_per_loop, bad, limit, name):
    trainer = PretrainingTrainer(
        tiny_albert(vocab),
        tiny_options(
            tmp_path / name,
            prepared,
            num_train_steps=8,
            log_every_steps=8,
            steps_per_loop=steps_per_loop,
            max_consecutive_nonfinite_steps=limit,
        ),
        hooks=[_NonfiniteAttempts(bad)],
    )
    try:
        trainer.train(log=lambda *_: None)
        error = None
    except FloatingPointError as e:
        error = str(e)
    path = tmp_path / name / "metrics.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    return trainer, error, lines


@pytest.mark.parametrize("steps_per_loop", [1, 8])
def test_skips_inside_compiled_loops_count_and_stop_as_one_step_a_call(
    tmp_path, prepared, vocab, steps_per_loop
):
    # Attempts 3-6 are non-finite: four in a row in the middle of a loop of 8.
    trainer, error, lines = _run_with_skips(
        tmp_path, prepared, vocab, steps_per_loop, bad=range(3, 7), limit=5, name="under"
    )
    assert error is None and trainer.step == 8
    assert [r["skipped_steps"] for r in lines] == [4.0]
    # The same run with a limit of 4: it stops at the fourth skip in a row, at step 3,
    # whether the skips come one call each or in the middle of one loop.
    trainer, error, _ = _run_with_skips(
        tmp_path, prepared, vocab, steps_per_loop, bad=range(3, 7), limit=4, name="limit"
    )
    assert error is not None and error.startswith("4 steps in a row"), error
    assert "at step 3" in error
    assert trainer.step == 2


@pytest.mark.parametrize(
    "spec, message",
    [
        ("explode:3", "unknown fault 'explode'"),
        ("nonfinite_at_step:0", "needs a step >= 1"),
        ("kill_before_save:x", "needs a step >= 1"),
    ],
)
def test_a_bad_fault_spec_is_refused_by_the_options(tmp_path, prepared, spec, message):
    # The options are where a spec is checked: the pretrain command does not parse it again.
    options = tiny_options(tmp_path / "run", prepared, faults=spec)
    with pytest.raises(ValueError, match=message):
        options.validate(num_replicas=1)
