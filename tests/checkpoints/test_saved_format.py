import json
import subprocess
import sys

import h5py
import numpy as np
import pytest
from helpers.testing_utils import random_batch, tiny_config

import albert_tf
from albert_tf.checkpoints.saved_format import CheckpointError, named_weights


@pytest.mark.parametrize("where", ["local", "ram://albert_tf_saved_format/m"])
def test_round_trip_is_bit_exact(tmp_path, where, monkeypatch):
    # A URL (gs:// on a cloud run; ram:// here) goes through TensorFlow's file
    # systems: bit-exact too, and nothing lands in a local folder named "ram:".
    monkeypatch.chdir(tmp_path)
    directory = str(tmp_path / "m") if where == "local" else where
    model = albert_tf.AlbertPretrainingModel.from_albert_config(
        tiny_config(num_hidden_groups=2, inner_group_num=2, hidden_act="relu")
    )
    albert_tf.save_model(model, directory)
    loaded = albert_tf.load(directory)
    assert [p.name for p in tmp_path.iterdir()] == (["m"] if where == "local" else [])
    assert loaded.config == model.config
    before, after = named_weights(model), named_weights(loaded)
    assert before.keys() == after.keys()
    for name in before:
        np.testing.assert_array_equal(np.asarray(before[name]), np.asarray(after[name]))
    batch = random_batch(120)
    for key, value in model(batch).items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(loaded(batch)[key]))


def test_weights_are_stored_by_stable_name(tmp_path):
    model = albert_tf.AlbertPretrainingModel.from_albert_config(tiny_config(share="attention"))
    albert_tf.save_model(model, tmp_path / "m")
    with h5py.File(tmp_path / "m" / "weights.h5") as f:
        assert "backbone/encoder/layer_0_inner_0/self_attention_layer/query/kernel" in f
        # Shared attention is stored once, by its owner only.
        assert "self_attention_layer" not in f["backbone/encoder/layer_1_inner_0"]
        assert "mlm_head/output_bias" in f
    meta = json.loads((tmp_path / "m" / "albert_tf.json").read_text())
    assert meta["heads"] == ["mlm_head", "sop_head"]


def test_loading_into_an_incompatible_config_names_the_weights(tmp_path):
    model = albert_tf.AlbertPretrainingModel.from_albert_config(tiny_config())
    albert_tf.save_model(model, tmp_path / "m")
    config_path = tmp_path / "m" / "config.json"
    data = json.loads(config_path.read_text())
    data["intermediate_size"] = 64
    config_path.write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match="feedforward_intermediate_dense/kernel"):
        albert_tf.load(tmp_path / "m")


def test_missing_directory_says_how_to_make_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="albert_tf.convert"):
        albert_tf.load(tmp_path / "nothing")


def test_multiple_choice_from_pretraining_checkpoint_keeps_backbone(tmp_path):
    model = albert_tf.AlbertPretrainingModel.from_albert_config(tiny_config())
    albert_tf.save_model(model, tmp_path / "m")
    choice = albert_tf.load_task_model(tmp_path / "m", "multiple_choice")
    for a, b in zip(model.backbone.weights, choice.backbone.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_params_cli_last_line():
    out = (
        subprocess.run(
            [sys.executable, "-m", "albert_tf.params", "--preset", "albert_base_v2"],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .splitlines()
    )
    assert out[-1] == "total_parameters: 11683584"


def test_params_cli_table_matches_paper_counts():
    out = subprocess.run(
        [sys.executable, "-m", "albert_tf.params"], capture_output=True, text=True, check=True
    ).stdout
    # Exact figures the issue derives from the paper's shapes (V=30000).
    for row, count in [
        ("albert_base_v2", "11,683,584"),
        ("albert_large_v2", "17,683,968"),
        ("albert_xlarge_v2", "58,724,864"),
        ("albert_xxlarge_v2", "222,595,584"),
        ("bert_base_shaped", "109,081,344"),
    ]:
        line = next(line for line in out.splitlines() if line.startswith(row + " "))
        assert count in line
