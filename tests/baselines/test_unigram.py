"""The unigram baseline against a plain-Python count of the same shards."""

import glob
import math
from collections import Counter

import pytest
import tensorflow as tf
from helpers.training_utils import scoring_batches

from albert_tf.baselines.unigram import unigram_baseline
from albert_tf.tokenizers import load_tokenizer


def test_unigram_baseline_matches_a_python_count(prepared, vocab):
    specials = load_tokenizer(prepared.tokenizer_dir).special_ids
    counts = Counter()
    for raw in tf.data.TFRecordDataset(sorted(glob.glob(prepared.train_files))):
        example = tf.train.Example.FromString(raw.numpy())
        counts.update(example.features.feature["token_ids"].int64_list.value)
    for special in specials:
        counts.pop(special, None)
    mode = max(sorted(counts), key=lambda i: counts[i])  # lowest id among ties, as argmax
    total = sum(counts.values())

    hits = n = 0
    nll = 0.0
    for _, labels in scoring_batches(prepared.eval_files):
        ids = labels["mask_ids"].numpy().ravel()
        weights = labels["mask_weights"].numpy().ravel()
        for i, w in zip(ids, weights, strict=True):
            if w:
                hits += int(i == mode)
                nll -= math.log((counts[int(i)] + 1) / (total + vocab))
                n += 1

    result = unigram_baseline(
        prepared.train_files,
        prepared.eval_files,
        vocab_size=vocab,
        special_ids=specials,
        max_seq_length=32,
        batch_size=8,
    )
    assert result["unigram_mode_id"] == mode
    assert result["unigram_mlm_accuracy"] == pytest.approx(hits / n, abs=1e-12)
    assert result["unigram_mlm_loss"] == pytest.approx(nll / n, rel=1e-9)
    assert 0.0 < hits / n < 0.5
