"""The TF Hub style pair: `export --kind=encoder` writes an encoder and a preprocessor
that a user's Keras model composes and fine-tunes, in a process without albert_tf.

The references: the Keras model the export came from (the encoder's outputs), and
packing written here from its definition ([CLS] a [SEP] b [SEP], trimmed one piece at
a time from whichever segment is longer, padded)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.numerics import albert_budget, assert_normwise_close
from helpers.testing_utils import TWO_LAYERS, tiny_config

import albert_tf
from albert_tf.checkpoints.saved_format import save_model
from albert_tf.models.pretraining_model import AlbertPretrainingModel
from albert_tf.serving.encoder_export import export_encoder
from albert_tf.tokenizers import load_tokenizer

HERE = Path(__file__).parent
SEQ = 24


@pytest.fixture(scope="module")
def exported(prepared, tmp_path_factory):
    base = tmp_path_factory.mktemp("encoder")
    tokenizer = load_tokenizer(prepared.tokenizer_dir)
    config = tiny_config(
        **TWO_LAYERS,
        vocab_size=tokenizer.vocabulary_size,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    )
    model = AlbertPretrainingModel.from_albert_config(config)
    save_model(model, base / "model", tokenizer=tokenizer)
    command = [sys.executable, "-m", "albert_tf.export", "--kind=encoder"]
    command += [f"--checkpoint={base / 'model'}", f"--export_dir={base / 'hub'}"]
    command += [f"--seq_length={SEQ}"]
    made = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-3000:]
    user = subprocess.run(
        [sys.executable, str(HERE / "encoder_user.py"), str(base / "hub"), str(base / "user.npz")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert user.returncode == 0, user.stderr[-3000:]
    with np.load(base / "user.npz") as f:
        results = {k: f[k] for k in f.files}
    return base, tokenizer, config, made.stdout, results


def test_the_command_says_what_it_wrote(exported):
    base, *_, stdout, _ = exported
    assert f"encoder: {base / 'hub' / 'encoder'}" in stdout
    assert "mlm: yes" in stdout


def test_encoder_outputs_are_the_models(exported):
    base, _, config, _, user = exported
    model = albert_tf.load(base / "model")
    backbone_inputs = {
        "token_ids": user["packed_input_word_ids"],
        "segment_ids": user["packed_input_type_ids"],
        "padding_mask": user["packed_input_mask"],
    }
    want = model(backbone_inputs, training=False)
    budget = albert_budget(config, SEQ)
    assert_normwise_close(user["sequence"], want["sequence_output"], rtol=budget)
    assert_normwise_close(user["pooled"], want["pooled_output"], rtol=budget)
    np.testing.assert_array_equal(user["default"], user["pooled"])
    # training=False is repeatable; training=True runs the model's dropout (0.1).
    np.testing.assert_array_equal(user["inference_again"], user["pooled"])
    assert np.abs(user["training_output"] - user["pooled"]).max() > 1e-3
    # One output per layer application, the last being the sequence output.
    texts = user["texts"].tolist()
    assert user["layers"].shape == (config.num_hidden_layers, len(texts), SEQ, config.hidden_size)
    np.testing.assert_array_equal(user["layers"][-1], user["sequence"])
    mlm = model({**backbone_inputs, "mask_positions": np.array([[1, 2]] * len(texts))})
    assert_normwise_close(user["mlm_logits"], mlm["mlm_logits"], rtol=budget)


def _pack(segments: list[list[int]], seq_length: int, cls: int, sep: int, pad: int):
    """Round-robin trimming, by its definition: drop a piece from the end of the
    longest segment (the later one on ties) until the pieces fit."""
    segments = [list(s) for s in segments]
    budget = seq_length - len(segments) - 1
    while sum(map(len, segments)) > budget:
        longest = max(range(len(segments)), key=lambda i: (len(segments[i]), i))
        segments[longest].pop()
    ids, types = [cls], [0]
    for kind, segment in enumerate(segments):
        ids += [*segment, sep]
        types += [kind] * (len(segment) + 1)
    padding = seq_length - len(ids)
    return ids + [pad] * padding, [1] * len(ids) + [0] * padding, types + [0] * padding


def test_preprocessor_packs_as_defined(exported):
    _, tokenizer, _, _, user = exported
    texts = user["texts"].tolist()  # the user's sentences
    pieces = [tokenizer.tokenize(np.array([t])).numpy()[0].tolist() for t in texts]
    ids = (tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id)
    for row, text_pieces in enumerate(pieces):
        want = _pack([text_pieces], SEQ, *ids)
        got = [user[f"packed_{k}"][row].tolist() for k in ("input_word_ids", "input_mask")]
        assert got == [want[0], want[1]], texts[row]
        assert user["packed_input_type_ids"][row].tolist() == want[2]
    for row in range(2):  # pairs packed to 12: both segments are trimmed
        want = _pack([pieces[row], pieces[row + 2]], 12, *ids)
        got = [user[f"pair_{k}"][row].tolist() for k in ("input_word_ids", "input_mask")]
        assert got == [want[0], want[1]]
        assert user["pair_input_type_ids"][row].tolist() == want[2]
    special = dict(zip(user["special_names"].tolist(), user["special"].tolist(), strict=True))
    assert special == {
        "vocab_size": tokenizer.vocabulary_size,
        "start_of_sequence_id": tokenizer.cls_id,
        "end_of_segment_id": tokenizer.sep_id,
        "padding_id": tokenizer.pad_id,
        "mask_id": tokenizer.mask_id,
    }


def test_a_keras_classifier_on_the_pair_fine_tunes_the_encoder(exported):
    *_, user = exported
    # Every encoder weight trains with the classifier's own two.
    assert int(user["trainable_in_classifier"]) == int(user["trainable_in_encoder"]) + 2
    assert float(user["encoder_weights_moved"]) > 0
    # Eight sentences, memorised: the loss falls well below where it started.
    assert float(user["loss_after"]) < 0.5 * float(user["loss_before"])


def test_bad_requests_are_refused_before_writing(exported, tmp_path):
    base, *_ = exported
    with pytest.raises(ValueError, match="seq_length=100: must be 3 to max_position_embeddings"):
        export_encoder(base / "model", tmp_path / "a", seq_length=100)
    assert not (tmp_path / "a").exists()
    with pytest.raises(FileExistsError, match="not empty"):
        export_encoder(base / "model", base / "hub", seq_length=SEQ)
