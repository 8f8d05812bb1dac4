"""Span QA's decoding: the windows' start and end logits → each question's answer, in-graph.

The one implementation the SavedModel (`SpanQAServingModule`) and the trainer's
evaluation both run, in steps:

1. `best_spans`: each window's ``k`` best spans of context pieces, at most
   ``max_answer_length`` long, by start + end logit, and its null ("no answer
   here") score, the [CLS] position's;
2. `best_answers`: each question's ``k`` best spans over all its windows (on a
   tie the earliest window, then start and end), widened to whole words, each
   span of characters once; its null score, the lowest of its windows; the
   margin by which that null score beats the best span;
3. `choose`: the answer, or none when the margin exceeds a threshold (SQuAD 2.0).

The SavedModel keeps one answer a question, the trainer the ``n_best_size`` best.

Example:
    >>> logits = tf.constant([[[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]])
    >>> spans = best_spans(logits, context_mask(4, tf.constant([1]), tf.constant([2])), 2, 1)
    >>> int(spans["start"][0, 0]), int(spans["end"][0, 0]), float(spans["score"][0, 0])
    (1, 2, 3.0)
"""

from __future__ import annotations

import tensorflow as tf

#: Official ``run_squad`` defaults.
MAX_ANSWER_LENGTH = 30
N_BEST_SIZE = 20


def context_mask(
    length: tf.Tensor, context_offset: tf.Tensor, window_length: tf.Tensor
) -> tf.Tensor:
    """bool [windows, length]: the positions of each window's context pieces."""
    return tf.sequence_mask(context_offset + window_length, length) & ~tf.sequence_mask(
        context_offset, length
    )


def best_spans(
    logits: tf.Tensor, mask: tf.Tensor, max_answer_length: int, k: int
) -> dict[str, tf.Tensor]:
    """Each window's ``k`` best answer spans; in-graph.

    A span is a first and a last position among the window's context pieces
    (``mask``), at most ``max_answer_length`` pieces long; its score is start
    logit + end logit (`best_answers` compares them across windows). Positions
    are in the window (sequence positions); equal scores keep the lower start,
    then end.

    Args:
        logits: float32 [windows, S, 2] (`AlbertSpanQA`'s output).
        mask: bool [windows, S] (`context_mask`).
        max_answer_length: longest span, in pieces.
        k: spans kept per window.

    Returns:
        ``score`` float32 [windows, k] (−inf where a window has fewer spans),
        ``start``/``end`` int32 [windows, k] (inclusive), ``probability``
        float32 [windows, k]: the start's softmax times the end's, over the
        window's [CLS] and context positions; ``null_score`` [windows]: the
        [CLS] start + end logit ("no answer here", SQuAD 2.0) and
        ``null_probability``.
    """
    logits = tf.cast(logits, tf.float32)
    length = tf.shape(logits)[1]
    start_logits, end_logits = logits[..., 0], logits[..., 1]
    scored = mask | (tf.range(length) == 0)[None]  # [CLS] and the context
    very_low = tf.fill(tf.shape(start_logits), -1e30)
    start_p = tf.nn.softmax(tf.where(scored, start_logits, very_low))
    end_p = tf.nn.softmax(tf.where(scored, end_logits, very_low))
    pairs = start_logits[:, :, None] + end_logits[:, None, :]
    first = tf.range(length)[:, None]
    last = tf.range(length)[None, :]
    band = (last >= first) & (last - first < max_answer_length)
    valid = mask[:, :, None] & mask[:, None, :] & band[None]
    pairs = tf.where(valid, pairs, tf.fill(tf.shape(pairs), -float("inf")))
    count = tf.minimum(k, length * length)
    score, index = tf.math.top_k(tf.reshape(pairs, [tf.shape(pairs)[0], -1]), count)
    start, end = index // length, index % length
    probability = tf.gather(start_p, start, batch_dims=1) * tf.gather(end_p, end, batch_dims=1)
    return {
        "score": score,
        "start": start,
        "end": end,
        "probability": tf.where(tf.math.is_finite(score), probability, 0.0),
        "null_score": start_logits[:, 0] + end_logits[:, 0],
        "null_probability": start_p[:, 0] * end_p[:, 0],
    }


def best_answers(
    spans: dict[str, tf.Tensor],
    windows: dict[str, tf.Tensor],
    word_starts: tf.RaggedTensor,
    word_ends: tf.RaggedTensor,
    k: int,
) -> dict[str, tf.Tensor]:
    """Each question's ``k`` best answers over all its windows, and its "no answer".

    Spans rank by score; on a tie the earliest window, then the earliest start and
    end win (Hugging Face's pipeline compares windows by the same score; the
    official ``run_squad`` also drops a start outside the window where it has the
    most context; this does not). Each is widened to whole words: a span that
    starts or ends inside a word takes the whole word (``run_squad``'s answers are
    words), and a span of the same characters as a better one is left out.

    Args:
        spans: `best_spans` of every window: ``score``, ``start``, ``end``,
            ``probability`` [windows, n] and ``null_score``, ``null_probability``
            [windows].
        windows: int32 [windows] each (`pack_qa`'s): ``window_example`` (its
            question; windows in question order), ``window_start`` (its first
            context piece among the context's) and ``context_offset`` (that
            piece's position in the window).
        word_starts, word_ends: int32 ragged [questions, (pieces)]: the characters
            of each context piece's word (`pack_qa`'s).
        k: answers kept per question.

    Returns:
        Ragged [questions, (at most k)], best first: ``starts``, ``ends`` int32
        (characters of the context, end exclusive), ``scores`` float32 (start +
        end logit) and ``probabilities`` float32 (`best_spans`'); per question
        [questions]: ``null_score`` (the lowest of its windows'),
        ``null_probability`` (that window's; the earliest on a tie) and
        ``margin``, null score − best span's score in float32 (+inf without a span).
    """
    num_questions = tf.cast(word_starts.nrows(), tf.int32)
    example = windows["window_example"]
    per_window = tf.shape(spans["score"])[1]

    def flat(values: tf.Tensor) -> tf.Tensor:
        return tf.reshape(values, [-1])

    # Every window's spans, in window order: only real ones (a finite score).
    found = tf.where(tf.math.is_finite(flat(spans["score"])))[:, 0]
    question = tf.gather(tf.repeat(example, per_window), found)
    shift = tf.gather(
        tf.repeat(windows["window_start"] - windows["context_offset"], per_window), found
    )
    score = tf.gather(flat(spans["score"]), found)
    # A window position → its piece among the flat pieces of all contexts → its word.
    row_start = tf.gather(tf.cast(word_starts.row_starts(), tf.int32), question)
    start = tf.gather(
        word_starts.flat_values, row_start + shift + tf.gather(flat(spans["start"]), found)
    )
    end = tf.gather(word_ends.flat_values, row_start + shift + tf.gather(flat(spans["end"]), found))
    probability = tf.gather(flat(spans["probability"]), found)

    # Best first within each question; the sorts are stable, so ties keep window
    # order, and inside a window `best_spans`' (the earlier start, then end).
    order = tf.argsort(score, direction="DESCENDING", stable=True)
    order = tf.gather(order, tf.argsort(tf.gather(question, order), stable=True))
    question, score, start, end, probability = (
        tf.gather(values, order) for values in (question, score, start, end, probability)
    )
    # Each (question, characters) once: the first of its spans, the best.
    size = tf.cast(tf.maximum(tf.reduce_max(tf.concat([end, [0]], 0)) + 1, 1), tf.int64)
    key = (tf.cast(question, tf.int64) * size + tf.cast(start, tf.int64)) * size + tf.cast(
        end, tf.int64
    )
    unique, group = tf.unique(key)
    position = tf.range(tf.size(key))
    first = tf.math.unsorted_segment_min(position, group, tf.size(unique))
    kept = tf.where(tf.gather(first, group) == position)[:, 0]
    question, score, start, end, probability = (
        tf.gather(values, kept) for values in (question, score, start, end, probability)
    )
    position = tf.range(tf.size(question))
    rank = position - tf.gather(
        tf.math.unsorted_segment_min(position, question, num_questions), question
    )
    top = tf.where(rank < k)[:, 0]
    rows = tf.cast(tf.gather(question, top), tf.int64)

    def per_question(values: tf.Tensor) -> tf.RaggedTensor:
        return tf.RaggedTensor.from_value_rowids(
            tf.gather(values, top), rows, nrows=tf.cast(num_questions, tf.int64)
        )

    # A question's null: its lowest null score, from the earliest window on a tie.
    null_score = tf.math.unsorted_segment_min(spans["null_score"], example, num_questions)
    count = tf.size(example)
    hit = spans["null_score"] == tf.gather(null_score, example)
    null_window = tf.minimum(
        tf.math.unsorted_segment_min(tf.where(hit, tf.range(count), count), example, num_questions),
        tf.maximum(count - 1, 0),
    )
    scores = per_question(score)
    best = scores.to_tensor(default_value=0.0, shape=[None, 1])[:, 0]
    return {
        "starts": per_question(start),
        "ends": per_question(end),
        "scores": scores,
        "probabilities": per_question(probability),
        "null_score": null_score,
        "null_probability": tf.gather(spans["null_probability"], null_window),
        "margin": tf.where(scores.row_lengths() > 0, null_score - best, float("inf")),
    }


def choose(
    answers: dict[str, tf.Tensor], no_answer_threshold: float | None
) -> dict[str, tf.Tensor]:
    """Each question's answer from `best_answers`: its best span, or none when it has
    no span or its ``margin`` exceeds ``no_answer_threshold`` (None: always answer).

    Returns:
        ``answered`` bool [questions]; ``start``, ``end`` int32 [questions] (−1 for
        no answer); ``probability`` float32 [questions] (for no answer, the null's).
    """
    answered = answers["starts"].row_lengths() > 0
    if no_answer_threshold is not None:
        answered &= answers["margin"] <= no_answer_threshold

    def best(key: str, default) -> tf.Tensor:
        return answers[key].to_tensor(default_value=default, shape=[None, 1])[:, 0]

    return {
        "answered": answered,
        "start": tf.where(answered, best("starts", -1), -1),
        "end": tf.where(answered, best("ends", -1), -1),
        "probability": tf.where(answered, best("probabilities", 0.0), answers["null_probability"]),
    }
