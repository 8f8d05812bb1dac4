"""Span QA's preprocessing: questions and contexts → the model's windows, and
training labels on them.

Long contexts are read in windows, as the official ``run_squad`` does:
``[CLS] question [SEP] context window [SEP]``, the question cut to
``max_query_length`` pieces, each window as many context pieces as fit, the
next window starting ``doc_stride`` pieces later (`pack_qa`, in-graph: the
SavedModel runs it, and training through `encode_span_qa`, which adds each
window's answer positions). `span_qa_batches` batches windows for training and
evaluation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import numpy as np
import tensorflow as tf

from albert_tf.data.batching import padded_batches
from albert_tf.tasks.span_qa.data import Answer, QAExample
from albert_tf.tokenizers.offsets import check_offsets

#: Official ``run_squad`` defaults.
MAX_QUERY_LENGTH = 64
DOC_STRIDE = 128
#: Items packed per tokenizer call when encoding for training.
_ENCODE_CHUNK = 128
#: Windows sorted by length inside groups of this many batches when shuffling.
BUCKET_BATCHES = 16


@dataclasses.dataclass(frozen=True)
class Windowing:
    """How questions and contexts are cut into model inputs (the official
    ``run_squad`` flags): question pieces kept, and the step between windows."""

    max_seq_length: int
    max_query_length: int = MAX_QUERY_LENGTH
    doc_stride: int = DOC_STRIDE

    def __post_init__(self):
        if self.max_query_length < 1 or self.doc_stride < 1:
            raise ValueError(
                f"max_query_length ({self.max_query_length}) and doc_stride "
                f"({self.doc_stride}) must be at least 1"
            )
        if self.max_seq_length < self.max_query_length + 4:
            raise ValueError(
                f"max_seq_length={self.max_seq_length} leaves no context piece after a "
                f"question of max_query_length={self.max_query_length} pieces and [CLS], "
                "[SEP], [SEP]: raise max_seq_length or lower max_query_length"
            )


def pack_qa(
    questions: tf.Tensor, contexts: tf.Tensor, tokenizer, windowing: Windowing
) -> dict[str, tf.Tensor]:
    """Questions and contexts → model inputs in windows, and where each context piece
    came from; in-graph.

    Context ``b`` of ``L`` pieces, after a question of ``q`` pieces (at most
    ``max_query_length``), gets windows of ``W = max_seq_length - 3 - q``
    pieces starting every ``min(doc_stride, W)`` pieces, until one reaches its
    end (an empty context: one empty window).

    Returns:
        ``token_ids``, ``segment_ids`` (1 from the context on), ``padding_mask``:
        int32 [windows, S]; per window, ``window_example`` (its question's index),
        ``window_start`` (its first context piece's index among the context's
        pieces), ``context_offset`` (that piece's position in the window: ``q + 2``)
        and ``window_length`` (its context pieces); ``piece_starts``,
        ``piece_ends``: int32 ragged [B, (pieces)], each context piece's
        characters in its context (end exclusive); ``word_starts``,
        ``word_ends``: the same for the word each piece belongs to (a word: a
        piece that starts one and the pieces after it that do not, by
        `Tokenizer.word_starts`: WordPiece's "##" pieces continue a word and each
        CJK character is one; SentencePiece's "▁" pieces start one and punctuation
        is split off).
    """
    check_offsets(tokenizer, "span QA")
    questions = tf.convert_to_tensor(questions, tf.string)
    contexts = tf.convert_to_tensor(contexts, tf.string)
    question_ids = tokenizer.tokenize(questions)[:, : windowing.max_query_length]
    ids, starts, ends = tokenizer.tokenize_with_offsets(contexts)
    # Answers are whole words (the official run_squad's): each piece's word's characters.
    is_word = tokenizer.word_starts(ids).flat_values
    word_of_piece = tf.cumsum(tf.cast(is_word, tf.int32)) - 1
    num_words = tf.reduce_sum(tf.cast(is_word, tf.int32))
    word_start = tf.math.unsorted_segment_min(starts.flat_values, word_of_piece, num_words)
    word_end = tf.math.unsorted_segment_max(ends.flat_values, word_of_piece, num_words)
    question_length = tf.cast(question_ids.row_lengths(), tf.int32)
    context_length = tf.cast(ids.row_lengths(), tf.int32)
    width = windowing.max_seq_length - 3 - question_length
    step = tf.minimum(windowing.doc_stride, width)
    extra = tf.maximum(context_length - width, 0)
    windows_per_example = 1 + (extra + step - 1) // step
    example = tf.repeat(tf.range(tf.size(context_length)), windows_per_example)
    k = tf.ragged.range(windows_per_example).flat_values
    window_start = k * tf.gather(step, example)
    window_length = tf.minimum(
        tf.gather(width, example), tf.gather(context_length, example) - window_start
    )
    row_starts = tf.cast(tf.gather(ids.row_starts(), example), tf.int32)
    positions = tf.ragged.range(
        row_starts + window_start, row_starts + window_start + window_length
    )
    window_ids = tf.gather(ids.flat_values, positions)
    window_question = tf.gather(question_ids, example)
    column = tf.ones([tf.size(example), 1], tf.int32)
    cls = tf.RaggedTensor.from_tensor(column * tokenizer.cls_id)
    sep = tf.RaggedTensor.from_tensor(column * tokenizer.sep_id)
    first = tf.concat([cls, window_question, sep], axis=1)
    second = tf.concat([window_ids, sep], axis=1)
    packed = tf.concat([first, second], axis=1)
    token_ids = packed.to_tensor(default_value=tokenizer.pad_id)
    length = tf.shape(token_ids)[1]
    first_length = tf.cast(first.row_lengths(), tf.int32)
    total = tf.cast(packed.row_lengths(), tf.int32)
    return {
        "token_ids": token_ids,
        "segment_ids": tf.cast(
            tf.sequence_mask(total, length) & ~tf.sequence_mask(first_length, length), tf.int32
        ),
        "padding_mask": tf.sequence_mask(total, length, tf.int32),
        "window_example": example,
        "window_start": window_start,
        "context_offset": first_length,
        "window_length": window_length,
        "piece_starts": starts,
        "piece_ends": ends,
        "word_starts": starts.with_flat_values(tf.gather(word_start, word_of_piece)),
        "word_ends": ends.with_flat_values(tf.gather(word_end, word_of_piece)),
    }


def piece_span(starts: np.ndarray, ends: np.ndarray, answer: Answer) -> tuple[int, int] | None:
    """The first and last context piece (inclusive) an answer's characters touch;
    None if no piece does (an answer of spaces only).

    >>> piece_span(np.array([0, 4, 6]), np.array([3, 6, 9]), Answer(4, 9, "ab cd"))
    (1, 2)
    """
    inside = np.flatnonzero((ends > answer.start) & (starts < answer.end))
    if not len(inside):
        return None
    return int(inside[0]), int(inside[-1])


def encode_span_qa(items: Sequence[QAExample], tokenizer, windowing: Windowing) -> list[dict]:
    """Packs every item once: its windows with their labels, and its pieces' spans.

    Each window's ``labels`` are int32 [2]: the positions of the first and last
    piece of the first answer (in the context's order) that the window holds whole,
    else ``[0, 0]`` ([CLS]: not here, as the official ``run_squad`` trains SQuAD 2.0
    and windows without the answer). SQuAD's training questions have one answer; a
    question with several (PICO's populations) teaches each window the one it holds,
    not "no answer" where a second answer is.

    One dict per item: ``windows`` (dicts of 1-D int32 ``token_ids``,
    ``segment_ids``, ``padding_mask``, ``labels``, and ints ``window_start``,
    ``context_offset``, ``window_length``), ``piece_starts``, ``piece_ends``,
    ``word_starts``, ``word_ends`` (`pack_qa`),
    ``context``, ``answers`` (gold texts; ``[""]`` for an impossible question),
    ``labelled``, ``lang``.
    """
    encoded: list[dict] = []
    for begin in range(0, len(items), _ENCODE_CHUNK):
        chunk = items[begin : begin + _ENCODE_CHUNK]
        packed = pack_qa(
            tf.constant([item.question for item in chunk]),
            tf.constant([item.context for item in chunk]),
            tokenizer,
            windowing,
        )
        arrays = {k: packed[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask")}
        lengths = arrays["padding_mask"].sum(-1)
        info = {
            k: packed[k].numpy()
            for k in ("window_example", "window_start", "context_offset", "window_length")
        }
        starts, ends = packed["piece_starts"].to_list(), packed["piece_ends"].to_list()
        word_starts, word_ends = packed["word_starts"].to_list(), packed["word_ends"].to_list()
        for row, item in enumerate(chunk):
            piece_starts = np.array(starts[row], np.int32)
            piece_ends = np.array(ends[row], np.int32)
            spans = sorted(
                span
                for answer in item.answers
                if (span := piece_span(piece_starts, piece_ends, answer)) is not None
            )
            windows = []
            for w in np.flatnonzero(info["window_example"] == row):
                n = lengths[w]
                window = {key: value[w, :n] for key, value in arrays.items()}
                first = int(info["window_start"][w])
                offset = int(info["context_offset"][w])
                count = int(info["window_length"][w])
                labels = [0, 0]
                inside = [a for a in spans if first <= a[0] and a[1] < first + count]
                if inside:
                    labels = [offset + inside[0][0] - first, offset + inside[0][1] - first]
                window["labels"] = np.array(labels, np.int32)
                window.update(window_start=first, context_offset=offset, window_length=count)
                windows.append(window)
            encoded.append(
                {
                    "windows": windows,
                    "piece_starts": piece_starts,
                    "piece_ends": piece_ends,
                    "word_starts": np.array(word_starts[row], np.int32),
                    "word_ends": np.array(word_ends[row], np.int32),
                    "context": item.context,
                    "answers": [a.text for a in item.answers] or [""],
                    "labelled": item.labelled,
                    "lang": item.lang,
                    "id": item.id,
                }
            )
    return encoded


def span_qa_batches(
    windows: Sequence[dict], batch_size: int, shuffle: bool = False, seed: int = 0
) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray]]:
    """One pass over ``windows`` in batches padded to their own longest window;
    labels int32 [batch, 2] (start, end positions)."""
    for features, rows in padded_batches(
        windows, batch_size, shuffle=shuffle, seed=seed, bucket_batches=BUCKET_BATCHES
    ):
        yield features, np.stack([w["labels"] for w in rows])
