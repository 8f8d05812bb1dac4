"""Steps with a non-finite gradient are skipped, counted, and stop the run
when they keep coming (injected through the ALBERT_TF_FAULTS hook)."""

import json

import numpy as np
import pytest
from training_utils import tiny_albert, tiny_options

from albert_tf.training.pretraining.trainer import PretrainingTrainer


def _state(trainer):
    """Weights and every optimizer variable (slots and step counter)."""
    return [np.array(v) for v in (*trainer.model.weights, *trainer.optimizer.variables)]


def test_nonfinite_step_leaves_weights_and_slots_bit_identical(tmp_path, prepared, vocab):
    trainer = PretrainingTrainer(
        tiny_albert(vocab),
        tiny_options(tmp_path / "run", prepared, num_train_steps=5, faults="nonfinite_at_step:3"),
    )
    trainer._train_one_step()
    trainer._train_one_step()
    before = _state(trainer)
    sums = trainer._train_one_step()  # the attempt at step 3: infinite loss
    assert not np.isfinite(sums["grad_norm"])
    assert trainer.step == 2
    after = _state(trainer)
    assert len(before) == len(after) > 2 * len(trainer.model.trainable_weights)
    for b, a in zip(before, after, strict=True):
        assert np.array_equal(b, a)
    trainer._train_one_step()  # the retry, on the next batch, applies
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
