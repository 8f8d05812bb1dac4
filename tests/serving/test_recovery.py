"""A model directory recovered from its export: the same config, weights, tokenizer,
settings and logits as the directory the export was made from."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.mc_helpers import VOCAB, tiny_mc_config
from helpers.testing_utils import TWO_LAYERS

import albert_tf
from albert_tf.checkpoints.saved_format import read_config, read_weights
from albert_tf.serving.recovery import recover_checkpoint, recovered_config


def test_recovered_checkpoint_matches_the_exported_one(mc_models, tmp_path):
    paths = mc_models["en"]  # SentencePiece, and LayerNorms frozen into the graph
    original = tiny_mc_config(VOCAB["en"])
    model = recover_checkpoint(
        paths["saved_model"],
        tmp_path / "best",
        num_hidden_layers=TWO_LAYERS["num_hidden_layers"],
        initializer_range=original.initializer_range,
    )
    assert read_config(tmp_path / "best") == read_config(paths["model"])
    before, after = read_weights(paths["model"]), read_weights(tmp_path / "best")
    assert sorted(before) == sorted(after)
    for name, array in before.items():
        np.testing.assert_array_equal(after[name], array, err_msg=name)
    for name in ("tokenizer.json", "spiece.model"):
        assert (tmp_path / "best/tokenizer" / name).read_bytes() == (
            paths["model"] / "tokenizer" / name
        ).read_bytes()
    settings = json.loads((tmp_path / "best/finetune.json").read_text())
    assert settings == json.loads((paths["model"] / "finetune.json").read_text())

    reference = albert_tf.load_task_model(paths["model"], "multiple_choice")
    ids = np.random.RandomState(0).randint(5, VOCAB["en"], (2, 3, 16)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 2:] = 0
    inputs = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": mask}
    np.testing.assert_array_equal(np.asarray(model(inputs)), np.asarray(reference(inputs)))


def test_config_fields_the_shapes_contradict_are_refused():
    arrays = {
        "embeddings/token_embedding/embeddings": np.zeros((50, 8)),
        "embeddings/position_embedding/embeddings": np.zeros((32, 8)),
        "embeddings/segment_embedding/embeddings": np.zeros((2, 8)),
        "embeddings/projection/kernel": np.zeros((8, 16)),
        "encoder/group_0_inner_0/self_attention_layer/query/kernel": np.zeros((16, 2, 8)),
        "encoder/group_0_inner_0/feedforward_intermediate_dense/kernel": np.zeros((16, 24)),
    }
    config = recovered_config(arrays, num_hidden_layers=3, hidden_act="relu")
    assert (config.vocab_size, config.embedding_size, config.hidden_size) == (50, 8, 16)
    assert (config.num_attention_heads, config.intermediate_size) == (2, 24)
    assert (config.max_position_embeddings, config.num_hidden_layers) == (32, 3)
    with pytest.raises(ValueError, match="hidden_size=32 given, the exported weights say 16"):
        recovered_config(arrays, hidden_size=32)
