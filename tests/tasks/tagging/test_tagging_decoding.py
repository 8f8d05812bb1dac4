"""Tagging's decoding (the SavedModel's, the trainer's and the CoNLL reader's) against
seqeval's chunking: random BIO, IOB1 and BIOES sequences, ill-formed ones among them,
tags in any order, texts side by side in one batch; spans and scores from words."""

from __future__ import annotations

import random

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.tagging.decoding import (
    chunk,
    chunks,
    chunks_batch,
    decode_entities,
    tag_names,
    tag_scheme,
)

get_entities = pytest.importorskip("seqeval.metrics.sequence_labeling").get_entities

TYPES = ("A", "B", "C")


def _random_tags(rng: random.Random, scheme: str, length: int) -> list[str]:
    """Tags drawn independently: I- after O, type switches and lone E- all occur."""
    prefixes = {"BIO": "OOBII", "IOB1": "OOIIIB", "BIOES": "OOBIIES"}[scheme]
    return [
        "O" if (prefix := rng.choice(prefixes)) == "O" else f"{prefix}-{rng.choice(TYPES)}"
        for _ in range(length)
    ]


def test_tag_names():
    assert tag_names([]) == ["O"]
    assert tag_names(["PER", "LOC", "ORG", "LOC"]) == [
        "O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]  # fmt: skip


@pytest.mark.parametrize("scheme", ["BIO", "IOB1", "BIOES"])
def test_chunks_equal_seqeval(scheme):
    rng = random.Random(scheme)
    sequences = [_random_tags(rng, scheme, rng.randrange(0, 16)) for _ in range(400)]
    assert chunks_batch(sequences) == [get_entities(tags) for tags in sequences]
    for tags in sequences[:50]:
        assert chunks(tags) == get_entities(tags)
    ill_formed = sum(
        any(t.startswith("I-") and (i == 0 or tags[i - 1] == "O") for i, t in enumerate(tags))
        for tags in sequences
    )
    assert ill_formed > 50  # the repair rules are exercised


def test_chunks_by_hand():
    # Last index inclusive; an I- after O opens one (IOB1); a text's end closes one.
    assert chunks(["B-A", "I-A", "O", "B-B"]) == [("A", 0, 1), ("B", 3, 3)]
    assert chunks(["O", "I-A"]) == [("A", 1, 1)]
    assert chunks(["I-A", "I-B", "B-B", "I-B"]) == [("A", 0, 0), ("B", 1, 1), ("B", 2, 3)]
    assert chunks(["B-A", "E-A", "I-A", "S-A", "E-A"]) == [
        ("A", 0, 1), ("A", 2, 2), ("A", 3, 3), ("A", 4, 4)]  # fmt: skip
    assert chunks([]) == [] and chunks(["O", "O"]) == []


def test_chunk_keeps_texts_apart_whatever_the_tag_order():
    # A tagger's tags in any order (a converted one's id2label), BIOES here; an entity
    # that runs to the end of one text does not go on into the next one's I- tags.
    rng = random.Random(1)
    names = ["O", *(f"{prefix}-{kind}" for prefix in "BIES" for kind in TYPES)]
    rng.shuffle(names)
    scheme = tag_scheme(names)
    texts = [_random_tags(rng, "BIOES", rng.randrange(0, 12)) for _ in range(60)]
    texts[1:3] = [["B-A", "I-A"], ["I-A", "E-A"]]
    ids = tf.ragged.constant([[names.index(t) for t in tags] for tags in texts], tf.int32)
    found = {key: value.numpy().tolist() for key, value in chunk(ids, scheme).items()}
    got = [[] for _ in texts]
    for row, first, last, kind in zip(*found.values(), strict=True):
        got[row].append((scheme.types[kind], first, last))
    assert got == [get_entities(tags) for tags in texts]
    assert got[1:3] == [[("A", 0, 1)], [("A", 0, 1)]]


def test_entities_are_word_spans_with_their_mean_tag_probability():
    names = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    # Two texts: 江泽民 | 在 | 北京 as words, then "Smith Jones" as two words.
    tags = [[1, 2, 0, 3], [1, 2]]
    rng = np.random.RandomState(0)
    probabilities = []
    for text in tags:
        p = rng.uniform(0.0, 0.1, (len(text), len(names)))
        p[np.arange(len(text)), text] = rng.uniform(0.5, 0.9, len(text))
        probabilities.append(p.astype(np.float32))
    starts = tf.ragged.constant([[0, 2, 3, 4], [0, 6]], tf.int32)
    ends = tf.ragged.constant([[2, 3, 4, 6], [5, 11]], tf.int32)
    found = decode_entities(
        tf.RaggedTensor.from_row_lengths(np.concatenate(probabilities), [4, 2]),
        starts,
        ends,
        tag_scheme(names),
    )
    assert found["tags"].to_list() == tags
    assert found["starts"].to_list() == [[0, 4], [0]]
    assert found["ends"].to_list() == [[3, 6], [11]]
    assert found["labels"].to_list() == [[b"PER", b"LOC"], [b"PER"]]
    want = [
        [probabilities[0][[0, 1], [1, 2]].mean(), probabilities[0][3, 3]],
        [probabilities[1][[0, 1], [1, 2]].mean()],
    ]
    for got, expected in zip(found["scores"].to_list(), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    empty = decode_entities(
        tf.RaggedTensor.from_row_lengths(np.zeros((0, len(names)), np.float32), [0, 0]),
        tf.ragged.constant([[], []], tf.int32),
        tf.ragged.constant([[], []], tf.int32),
        tag_scheme(names),
    )
    assert empty["starts"].to_list() == [[], []] and empty["tags"].to_list() == [[], []]
