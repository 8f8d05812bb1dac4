"""Span QA's decoding (the SavedModel's and the trainer's) against trying every span:
each window's best spans, and each question's answers over all its windows (ties,
words, repeats across windows, the null score and the threshold)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.span_qa.decoding import best_answers, best_spans, choose, context_mask


def _brute_force(start: np.ndarray, end: np.ndarray, allowed: np.ndarray, longest: int):
    """The best (score, first, last) by trying every pair: the reference for `best_spans`."""
    best = (-np.inf, -1, -1)
    for i in np.flatnonzero(allowed):
        for j in np.flatnonzero(allowed):
            if i <= j < i + longest and start[i] + end[j] > best[0]:
                best = (start[i] + end[j], i, j)
    return best


def test_best_spans_equal_trying_every_pair():
    rng = np.random.RandomState(0)
    logits = rng.normal(size=(6, 20, 2)).astype("float32")
    offsets = np.array([3, 5, 2, 7, 4, 19])
    lengths = np.array([10, 14, 1, 12, 0, 0])
    mask = context_mask(20, tf.constant(offsets), tf.constant(lengths)).numpy()
    found = best_spans(tf.constant(logits), tf.constant(mask), 4, 3)
    for w in range(6):
        allowed = np.zeros(20, bool)
        allowed[offsets[w] : offsets[w] + lengths[w]] = True
        assert (mask[w] == allowed).all()
        score, first, last = _brute_force(logits[w, :, 0], logits[w, :, 1], allowed, 4)
        if first < 0:
            assert not np.isfinite(found["score"][w, 0])
            continue
        assert (found["start"][w, 0], found["end"][w, 0]) == (first, last)
        np.testing.assert_allclose(found["score"][w, 0], score, rtol=1e-6)
        ranked = found["score"][w].numpy()
        assert (ranked[:-1] >= ranked[1:]).all()  # best first
    np.testing.assert_allclose(found["null_score"], logits[:, 0, 0] + logits[:, 0, 1], rtol=1e-6)


SEQ = 12
LONGEST = 3


def _questions(rng: np.random.RandomState, pieces_per_word: int):
    """Random contexts of pieces grouped into words, cut into windows as `pack_qa`
    cuts them: per question its words' characters per piece, and per window its
    question, first piece, offset and length."""
    questions, windows = [], []
    for q in range(9):
        count = rng.randint(0, 21) if q else 0  # the first context is empty
        word_of_piece = np.cumsum(rng.randint(0, pieces_per_word, count) == 0)
        word_of_piece[:1] = 1  # a context's first piece starts a word
        lengths = rng.randint(1, 4, count)
        starts = np.cumsum(lengths) - lengths + word_of_piece  # a space before each word
        ends = starts + lengths
        word_start = {w: starts[word_of_piece == w].min() for w in set(word_of_piece)}
        word_end = {w: ends[word_of_piece == w].max() for w in set(word_of_piece)}
        questions.append(
            (
                np.array([word_start[w] for w in word_of_piece], np.int32),
                np.array([word_end[w] for w in word_of_piece], np.int32),
            )
        )
        offset = rng.randint(2, 6)  # [CLS] and a question of 1 to 4 pieces
        width = SEQ - offset - 1
        step = rng.randint(1, width + 1)
        first = 0
        while True:
            windows.append((q, first, offset, min(width, count - first)))
            if first + width >= count:
                break
            first += step
    return questions, windows


def _reference(logits, questions, windows, k, threshold):
    """Every span of every window tried: per question its k best distinct character
    spans (score, window, start, end order), null score and probability, answer."""
    out = []
    for q, (word_starts, word_ends) in enumerate(questions):
        spans, nulls = [], []
        for w, (question, first, offset, length) in enumerate(windows):
            if question != q:
                continue
            start, end = logits[w, :, 0], logits[w, :, 1]
            scored = np.r_[0, offset : offset + length]

            def softmax(x, scored=scored):
                e = np.exp(x[scored] - x[scored].max())
                return dict(zip(scored, e / e.sum(), strict=True))

            p_start, p_end = softmax(start), softmax(end)
            nulls.append((start[0] + end[0], w, p_start[0] * p_end[0]))
            for i in range(offset, offset + length):
                for j in range(i, min(offset + length, i + LONGEST)):
                    chars = (word_starts[first + i - offset], word_ends[first + j - offset])
                    spans.append((-(start[i] + end[j]), w, i, j, chars, p_start[i] * p_end[j]))
        ranked, seen = [], set()
        for negative, _, _, _, chars, probability in sorted(spans, key=lambda s: s[:4]):
            if chars not in seen:
                seen.add(chars)
                ranked.append((*chars, -negative, probability))
        null_score, _, null_probability = min(nulls, key=lambda n: n[:2])
        margin = null_score - ranked[0][2] if ranked else np.inf
        answered = bool(ranked) and (threshold is None or margin <= np.float32(threshold))
        out.append((ranked[:k], null_score, null_probability, margin, answered))
    return out


@pytest.mark.parametrize(
    ("pieces_per_word", "integer_logits"),
    [(1, False), (1, True), (3, False), (3, True)],
    ids=["pieces", "pieces_ties", "words", "words_ties"],
)
def test_answers_over_windows_equal_trying_every_span(pieces_per_word, integer_logits):
    rng = np.random.RandomState(pieces_per_word + 10 * integer_logits)
    questions, windows = _questions(rng, pieces_per_word)
    assert len(windows) > len(questions)  # long contexts have several windows
    shape = (len(windows), SEQ, 2)
    # Small integers tie often, and their float32 sums tie exactly.
    logits = rng.randint(-2, 3, shape) if integer_logits else rng.normal(size=shape)
    logits = logits.astype(np.float32)
    k = 4
    columns = np.array(windows, np.int32).T
    spans = best_spans(tf.constant(logits), context_mask(SEQ, columns[2], columns[3]), LONGEST, k)
    answers = best_answers(
        spans,
        {"window_example": columns[0], "window_start": columns[1], "context_offset": columns[2]},
        tf.ragged.constant([s for s, _ in questions], tf.int32, ragged_rank=1),
        tf.ragged.constant([e for _, e in questions], tf.int32, ragged_rank=1),
        k,
    )
    margins = answers["margin"].numpy()
    finite = margins[np.isfinite(margins)]
    for threshold in (None, 0.0, float(np.median(finite)), -1e30):
        want = _reference(logits, questions, windows, k, threshold)
        chosen = {key: value.numpy() for key, value in choose(answers, threshold).items()}
        for q, (ranked, null_score, null_probability, margin, answered) in enumerate(want):
            got = list(
                zip(
                    answers["starts"][q].numpy(),
                    answers["ends"][q].numpy(),
                    answers["scores"][q].numpy(),
                    strict=True,
                )
            )
            # Past the first, a word's other spans may hide a k-th best: compare all k
            # where a piece is a word, the best where words have several pieces.
            n = len(ranked) if pieces_per_word == 1 else min(len(ranked), 1)
            assert [tuple(r[:3]) for r in ranked[:n]] == got[:n], q
            assert len(got) == len(ranked) or pieces_per_word > 1
            assert len({(s, e) for s, e, _ in got}) == len(got)  # each span once
            np.testing.assert_allclose(
                answers["probabilities"][q].numpy()[:n], [r[3] for r in ranked[:n]], rtol=1e-5
            )
            assert answers["null_score"][q] == null_score
            np.testing.assert_allclose(answers["null_probability"][q], null_probability, rtol=1e-5)
            assert margins[q] == margin
            assert chosen["answered"][q] == answered
            if answered:
                assert (chosen["start"][q], chosen["end"][q]) == ranked[0][:2]
                np.testing.assert_allclose(chosen["probability"][q], ranked[0][3], rtol=1e-5)
            else:
                assert chosen["start"][q] == chosen["end"][q] == -1
                np.testing.assert_allclose(chosen["probability"][q], null_probability, rtol=1e-5)
        if threshold is None:
            assert not chosen["answered"][0] and chosen["answered"][1:].any()  # empty: none
        if threshold == -1e30:
            assert not chosen["answered"].any()
