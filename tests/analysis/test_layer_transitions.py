"""Layer transitions (the paper's Figure 1): numbers, inputs, and the command."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.paths import REPO
from helpers.testing_utils import random_batch, tiny_config

from albert_tf.analysis.layer_transitions import (
    analyze_model,
    encode_documents,
    measure,
    with_hidden_states,
)
from albert_tf.models.backbone import AlbertBackbone


def _states_layer_by_layer(backbone: AlbertBackbone, batch: dict) -> list[np.ndarray]:
    """Hidden states without output_hidden_states: the embedding, then each applied
    layer of the sharing plan called by hand."""
    encoder = backbone.encoder
    # transformer_layers were created in plan order, one per new (attention, FFN) pair.
    pairs = list(dict.fromkeys((slot.attention, slot.feedforward) for slot in encoder.plan))
    layer_of = dict(zip(pairs, encoder.transformer_layers, strict=True))
    x = backbone.embeddings(batch["token_ids"], batch["segment_ids"], training=False)
    states = [np.asarray(x)]
    for slot in encoder.plan:
        x = layer_of[(slot.attention, slot.feedforward)](
            x, padding_mask=batch["padding_mask"], training=False
        )
        states.append(np.asarray(x))
    return states


def _means_token_by_token(states: list[np.ndarray], mask: np.ndarray):
    """Mean L2 distance, cosine and angle (degrees) per layer, one real token at a time."""
    l2, cosine, angle = [], [], []
    for before, after in itertools.pairwise(states):
        distances, cosines = [], []
        for b, t in zip(*np.nonzero(mask), strict=True):
            x = [float(v) for v in before[b, t]]
            y = [float(v) for v in after[b, t]]
            distances.append(math.sqrt(sum((q - p) ** 2 for p, q in zip(x, y, strict=True))))
            dot = sum(p * q for p, q in zip(x, y, strict=True))
            norms = math.sqrt(sum(p * p for p in x)) * math.sqrt(sum(q * q for q in y))
            cosines.append(dot / norms)
        l2.append(sum(distances) / len(distances))
        cosine.append(sum(cosines) / len(cosines))
        angle.append(sum(math.degrees(math.acos(c)) for c in cosines) / len(cosines))
    return l2, cosine, angle


@pytest.mark.parametrize(
    "overrides",
    [
        dict(share="all"),  # one layer object applied 4 times
        dict(share="none"),
        dict(num_hidden_groups=2, inner_group_num=2),  # 8 applied layers
    ],
)
def test_transitions_equal_a_token_by_token_computation(overrides):
    config = tiny_config(initializer_range=0.3, **overrides)
    backbone = AlbertBackbone(config)
    batch = random_batch(config.vocab_size, batch=3, seq=12)
    # Batches of 2 rows: sums must carry over batches, padding rows included.
    sums = measure(backbone, batch, batch_size=2)

    states = _states_layer_by_layer(backbone, batch)
    l2, cosine, angle = _means_token_by_token(states, batch["padding_mask"])
    applied = config.num_hidden_layers * config.inner_group_num
    assert len(l2) == applied == len(sums.l2)
    assert sums.tokens == int(batch["padding_mask"].sum())
    np.testing.assert_allclose(sums.l2 / sums.tokens, l2, rtol=1e-5)
    np.testing.assert_allclose(sums.cosine / sums.tokens, cosine, rtol=1e-5)
    np.testing.assert_allclose(sums.angle / sums.tokens, angle, rtol=1e-5)
    # Padding counts for nothing: averaging over every position differs.
    everything = _means_token_by_token(states, np.ones_like(batch["padding_mask"]))[0]
    assert not np.allclose(sums.l2 / sums.tokens, everything, rtol=1e-5)


def test_hidden_states_copy_keeps_weights_and_outputs():
    config = tiny_config(share="none")
    backbone = AlbertBackbone(config)
    batch = random_batch(config.vocab_size)
    copy = with_hidden_states(backbone)
    assert copy is not backbone and copy.output_hidden_states
    assert with_hidden_states(copy) is copy
    for a, b in zip(backbone.weights, copy.weights, strict=True):
        assert a.path == b.path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    ours, theirs = backbone(batch, training=False), copy(batch, training=False)
    np.testing.assert_allclose(ours["sequence_output"], theirs["sequence_output"], atol=1e-6)
    np.testing.assert_allclose(theirs["hidden_states"][-1], theirs["sequence_output"])


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from albert_tf.data import iter_sentences, sample_path
    from albert_tf.tokenizers import train_sentencepiece

    lines = list(itertools.islice(iter_sentences([sample_path("en")]), 600))
    return train_sentencepiece(
        lines, tmp_path_factory.mktemp("sp"), vocab_size=400, shrink_vocab=True
    )


def test_documents_become_cls_pieces_sep_rows(tokenizer):
    import tensorflow as tf

    documents = [["One short sentence.", "And another one here."], ["A second document."]]
    inputs = encode_documents(tokenizer, documents, max_seq_length=8, max_sequences=100)
    ids, mask = inputs["token_ids"], inputs["padding_mask"]
    rows = []
    for document in documents:
        pieces = tokenizer.tokenize(tf.constant(document)).flat_values.numpy().tolist()
        rows += [pieces[i : i + 6] for i in range(0, len(pieces), 6)]
    assert len(ids) == len(rows)
    for row, expected in zip(ids, rows, strict=True):
        n = len(expected) + 2
        assert row[:n].tolist() == [tokenizer.cls_id, *expected, tokenizer.sep_id]
        assert (row[n:] == tokenizer.pad_id).all()
    np.testing.assert_array_equal(mask, ids != tokenizer.pad_id)
    assert not inputs["segment_ids"].any()
    assert len(encode_documents(tokenizer, documents, max_seq_length=8, max_sequences=2)[
        "token_ids"
    ]) == 2  # fmt: skip
    with pytest.raises(ValueError, match="no text"):
        encode_documents(tokenizer, [], max_seq_length=8, max_sequences=2)


def _save_model(directory: Path, tokenizer, share: str, seed: int) -> None:
    import keras

    import albert_tf

    keras.utils.set_random_seed(seed)
    config = tiny_config(vocab_size=tokenizer.vocabulary_size, share=share, initializer_range=0.3)
    model = albert_tf.AlbertPretrainingModel.from_albert_config(config)
    albert_tf.save_model(model, directory, tokenizer=tokenizer)


def test_command_writes_json_and_png_for_two_models(tokenizer, tmp_path):
    _save_model(tmp_path / "shared" / "final", tokenizer, "all", seed=1)
    _save_model(tmp_path / "not_shared" / "final", tokenizer, "none", seed=2)
    corpus = tmp_path / "held_out.txt"
    corpus.write_text(
        "The first held-out sentence is here.\nIt has a second sentence.\n\n"
        "Another document follows it.\n"
    )
    out = tmp_path / "layers"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [
            sys.executable, "-m", "albert_tf.analyze_layers",
            f"--model={tmp_path / 'shared' / 'final'}",
            f"--model={tmp_path / 'not_shared' / 'final'}",
            f"--corpus={corpus}", f"--output={out}", "--max_seq_length=16",
        ],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((out / "layer_transitions.json").read_text())
    assert [(m["label"], m["share"]) for m in record["models"]] == [
        ("shared", "all"),
        ("not_shared", "none"),
    ]
    for entry in record["models"]:
        expected = analyze_model(entry["model_dir"], str(corpus), max_seq_length=16)
        assert entry["tokens"] == expected.tokens > 0
        np.testing.assert_allclose(entry["l2_distance"], expected.l2_distance, rtol=1e-6)
        np.testing.assert_allclose(
            entry["cosine_similarity"], expected.cosine_similarity, rtol=1e-6
        )
        assert len(entry["l2_distance"]) == 4
    png = (out / "layer_transitions.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_a_model_without_tokenizer_is_named(tmp_path):
    import albert_tf

    model = albert_tf.AlbertPretrainingModel.from_albert_config(tiny_config())
    albert_tf.save_model(model, tmp_path / "m")
    with pytest.raises(FileNotFoundError, match="no tokenizer/"):
        analyze_model(tmp_path / "m", "sample:en")
