"""Restarting over a damaged newest checkpoint falls back to an intact one."""

import os

import numpy as np
import pytest
import tensorflow as tf
from helpers.training_utils import flat_weights, tiny_albert, tiny_options

from albert_tf.training.pretraining import checkpoint_layout
from albert_tf.training.pretraining.trainer import PretrainingTrainer


def _trainer(tmp_path, prepared, vocab, steps):
    options = tiny_options(
        tmp_path / "run", prepared, num_train_steps=steps, save_checkpoints_steps=2
    )
    return PretrainingTrainer(tiny_albert(vocab), options)


def _data_file(tmp_path, step):
    return tmp_path / "run" / "checkpoints" / f"ckpt-{step}.data-00000-of-00001"


def _index_file(tmp_path, step):
    return tmp_path / "run" / "checkpoints" / f"ckpt-{step}.index"


def _truncate(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 2)


def _corrupt(path):
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage,file",
    [(_truncate, _data_file), (_corrupt, _data_file), (_truncate, _index_file)],
    ids=["truncated_data", "corrupted_data", "truncated_index"],
)
def test_resume_skips_a_damaged_newest_checkpoint(tmp_path, prepared, vocab, damage, file):
    first = _trainer(tmp_path, prepared, vocab, steps=4)
    first.train(log=lambda *_: None)  # saves ckpt-2 and ckpt-4
    damage(file(tmp_path, 4))
    # The weights ckpt-2 holds, from a second run of the same recipe.
    reference = _trainer(tmp_path / "ref", prepared, vocab, steps=4)
    reference.train_one_step()
    reference.train_one_step()

    resumed = _trainer(tmp_path, prepared, vocab, steps=6)
    logged = []
    assert resumed.restore(log=logged.append) == 2
    assert any("ckpt-4" in line and "damaged" in line for line in logged), logged
    assert resumed.restored_from.endswith("ckpt-2")
    np.testing.assert_array_equal(flat_weights(resumed.model), flat_weights(reference.model))
    resumed.train(log=lambda *_: None)
    assert resumed.step == 6


def test_no_intact_checkpoint_is_an_error_not_a_fresh_start(tmp_path, prepared, vocab):
    _trainer(tmp_path, prepared, vocab, steps=4).train(log=lambda *_: None)
    for step in (2, 4):
        _truncate(_data_file(tmp_path, step))
    again = _trainer(tmp_path, prepared, vocab, steps=6)
    with pytest.raises(RuntimeError, match="No intact checkpoint .*ckpt-4.*ckpt-2"):
        again.train(log=lambda *_: None)
    assert again.step == 0


@pytest.mark.parametrize("root", ["ram://albert_tf_test", "file://{tmp}", "{tmp}"])
def test_checkpoints_are_found_behind_a_url(tmp_path, root):
    # A gs:// model_dir is listed by TensorFlow's file systems; Python's glob saw
    # nothing there, so a restarted run began again at step 0.
    directory = root.format(tmp=tmp_path) + "/run/checkpoints"
    variable = tf.Variable([1.0, 2.0])
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable), directory, 3)
    for step in (2, 4, 10):
        manager.save(checkpoint_number=step)
    want = [checkpoint_layout.checkpoint_path(directory, s) for s in (10, 4, 2)]
    assert checkpoint_layout.saved_checkpoints(directory) == want
    assert checkpoint_layout.saved_checkpoints(directory + "_none") == []
