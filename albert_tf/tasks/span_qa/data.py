"""Extractive question answering data: reading, windows over long contexts, decoding.

An example is a question, its context and its answers, each an `Answer` span
of character offsets (code points, end exclusive) into the context. Formats,
detected per file (gzip or not) from its first non-blank character:

* **SQuAD layout** (a JSON object with ``"data"``): SQuAD 1.1 and 2.0, CMRC 2018
  and DRCD ship in it: ``{"data": [{"title", "paragraphs": [{"context", "qas":
  [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"?}]}]}]}``.
  A SQuAD 2.0 question with ``"is_impossible": true`` has no answer (its
  ``plausible_answers`` are not read).
* **JSON Lines** (``../shared/data/qa``): ``{"id", "lang"?, "context",
  "question", "answers": [{"text", "answer_start"}], "is_impossible"?}`` a line.

Every answer is checked against ``context[answer_start:answer_start + len(text)]``.
A bad answer is dropped and counted; a question left without one (and not
impossible) is skipped. A question without ``"answers"`` in a file where no
question has any is read as unlabelled (a test file to answer). Bad rows are
skipped and counted by reason (`SKIP_REASONS`), never fatal.

Long contexts are read in windows, as the official ``run_squad`` does:
``[CLS] question [SEP] context window [SEP]``, the question cut to
``max_query_length`` pieces, each window as many context pieces as fit, the
next window starting ``doc_stride`` pieces later (`pack_qa`). The answer is
the best span over all windows (`best_spans`).

Example:
    >>> import json, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.json")
    >>> squad = {"data": [{"title": "t", "paragraphs": [{"context": "ALBERT shares layers.",
    ...     "qas": [{"id": "q1", "question": "What does ALBERT share?",
    ...              "answers": [{"text": "layers", "answer_start": 14}]},
    ...             {"id": "q2", "question": "Who?", "answers": [],
    ...              "is_impossible": True},
    ...             {"id": "q3", "question": "Bad?",
    ...              "answers": [{"text": "nope", "answer_start": 0}]}]}]}]}
    >>> with open(path, "w") as f:
    ...     json.dump(squad, f)
    >>> examples, skipped = read_span_qa([path])
    >>> [(e.id, [(a.start, a.end, a.text) for a in e.answers], e.impossible) for e in examples]
    [('q1', [(14, 20, 'layers')], False), ('q2', [], True)]
    >>> dict(skipped)
    {'answer_text_mismatch': 1, 'no_valid_answer': 1}
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.data.batching import bucketed_batches, padded
from albert_tf.data.chinese_wwm import is_cjk_char
from albert_tf.data.corpus import open_binary
from albert_tf.data.inputs import resolve_inputs

#: Why `read_span_qa` skips a question, or drops one of its answers.
SKIP_REASONS = (
    "invalid_json",  # a line (or file) that does not parse to an object
    "invalid_text",  # a question or context that is not valid Unicode
    "missing_context",  # no string "context"
    "missing_question",  # no string "question"
    "empty_context",  # a blank context
    "empty_question",  # a blank question
    "bad_answer",  # not {"text": non-blank str, "answer_start": int} inside the context (dropped)
    "answer_text_mismatch",  # an answer's text is not the context at answer_start (dropped)
    "no_valid_answer",  # every answer of a question that is not impossible was dropped
    "missing_answers",  # no "answers", in a file whose other questions have them
)
ACCEPTED_FORMATS = (
    'the SQuAD layout (a JSON object with "data": SQuAD 1.1/2.0, CMRC 2018, DRCD) or '
    'JSON Lines with "context", "question" and "answers": [{"text", "answer_start"}]'
)


@dataclasses.dataclass(frozen=True)
class Answer:
    """A span of the context: code points, ``end`` exclusive; ``text`` is the span."""

    start: int
    end: int
    text: str


@dataclasses.dataclass(frozen=True)
class QAExample:
    """A question about a context, and its answers (none: impossible or unlabelled)."""

    id: str
    question: str
    context: str
    answers: tuple[Answer, ...]
    impossible: bool = False
    lang: str = ""
    labelled: bool = True  # False: its source had no answers (a test file)


# -- reading -----------------------------------------------------------------

_Row = tuple[str, dict, Any]  # (fallback id, question record, context)


def _valid_text(value: Any) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800") that JSON lets through
        return False
    return True


def _example(
    item_id: str, record: dict, context: Any, labelled_file: bool, skipped: collections.Counter
) -> QAExample | None:
    """One question, or None (its reason counted in ``skipped``)."""
    question = record.get("question")
    for name, value in (("context", context), ("question", question)):
        if not isinstance(value, str):
            skipped[f"missing_{name}"] += 1
            return None
        if not value.strip():
            skipped[f"empty_{name}"] += 1
            return None
        if not _valid_text(value):
            skipped["invalid_text"] += 1
            return None
    impossible = record.get("is_impossible") is True
    raw = record.get("answers")
    if raw is None and not impossible:
        if labelled_file:
            skipped["missing_answers"] += 1
            return None
        raw_answers: list = []
        labelled = False
    else:
        raw_answers = _answer_list(raw)
        labelled = True
    answers: dict[tuple[int, int], Answer] = {}
    for answer in [] if impossible else raw_answers:
        text = answer.get("text") if isinstance(answer, dict) else None
        start = answer.get("answer_start") if isinstance(answer, dict) else None
        if not (
            isinstance(text, str)
            and text.strip()
            and isinstance(start, int)
            and not isinstance(start, bool)
            and start >= 0
            and start + len(text) <= len(context)
        ):
            skipped["bad_answer"] += 1
            continue
        if context[start : start + len(text)] != text:
            skipped["answer_text_mismatch"] += 1
            continue
        answers.setdefault((start, start + len(text)), Answer(start, start + len(text), text))
    if labelled and not impossible and not answers:
        skipped["no_valid_answer"] += 1
        return None
    item_id = str(record.get("id")) if record.get("id") not in (None, "") else item_id
    lang = record.get("lang")
    if not isinstance(lang, str):
        lang = "zh" if any(map(is_cjk_char, context[:200])) else "en"
    return QAExample(
        item_id, question, context, tuple(answers.values()), impossible, lang, labelled
    )


def _answer_list(raw: Any) -> list:
    """A question's answers as a list of ``{"text", "answer_start"}``; Hugging Face
    ``datasets``' columns (``{"text": [...], "answer_start": [...]}``) become one."""
    if isinstance(raw, list):
        return raw
    if isinstance(raw, dict) and isinstance(raw.get("text"), list):
        starts = raw.get("answer_start")
        if isinstance(starts, list) and len(starts) == len(raw["text"]):
            return [
                {"text": t, "answer_start": s} for t, s in zip(raw["text"], starts, strict=True)
            ]
    return [None]  # one bad answer, counted


def _squad_rows(data: Any, name: str, skipped: collections.Counter) -> Iterator[_Row]:
    """The questions of a SQuAD-layout object; a malformed article or paragraph is
    counted as ``invalid_json``."""
    articles = data.get("data")
    if not isinstance(articles, list):
        raise ValueError(f'{name}: "data" is not a list; expected {ACCEPTED_FORMATS}')
    for a, article in enumerate(articles):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            skipped["invalid_json"] += 1
            continue
        for p, paragraph in enumerate(paragraphs):
            if not isinstance(paragraph, dict):
                skipped["invalid_json"] += 1
                continue
            questions = paragraph.get("qas")
            if not isinstance(questions, list):
                skipped["invalid_json"] += 1
                continue
            for q, record in enumerate(questions):
                if not isinstance(record, dict):
                    skipped["invalid_json"] += 1
                    continue
                yield f"{name}:{a}.{p}.{q}", record, paragraph.get("context")


def _json_lines(text: str, name: str, skipped: collections.Counter) -> Iterator[_Row]:
    """The questions of a JSON Lines file's text (split on "\n" only, as files are read)."""
    for number, line in enumerate(text.split("\n"), 1):
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            skipped["invalid_json"] += 1
            continue
        yield f"{name}:{number}", record, record.get("context")


def _read_file(path: str) -> tuple[list[QAExample], collections.Counter]:
    name = os.path.basename(path)
    skipped: collections.Counter = collections.Counter()
    with open_binary(path) as f:
        text = f.read().decode("utf-8", errors="replace").lstrip("\ufeff")
    stripped = text.lstrip()
    if not stripped:
        raise ValueError(f"{path}: the file is empty; give {ACCEPTED_FORMATS}")
    rows: list[_Row]
    squad = None
    if stripped.startswith("{"):
        try:
            squad = json.loads(text)
        except ValueError as error:
            if len(stripped.splitlines()) == 1:  # one line that is not JSON: not JSON Lines
                raise ValueError(
                    f"{path}: not valid JSON ({error}); expected {ACCEPTED_FORMATS}"
                ) from None
            squad = None  # several objects: JSON Lines
    if isinstance(squad, dict) and "data" in squad:
        rows = list(_squad_rows(squad, name, skipped))
    elif stripped.startswith("{"):
        rows = list(_json_lines(text, name, skipped))
    else:
        raise ValueError(
            f"{path}: cannot recognise the format of {stripped[:80]!r}; accepted: "
            f"{ACCEPTED_FORMATS}"
        )
    labelled_file = any("answers" in r or r.get("is_impossible") is True for _, r, _ in rows)
    examples = []
    for fallback, record, context in rows:
        example = _example(fallback, record, context, labelled_file, skipped)
        if example is not None:
            examples.append(example)
    if not examples:
        raise ValueError(
            f"{path}: no readable questions ({sum(skipped.values())} skipped: "
            f"{dict(skipped) or 'none found'}); give {ACCEPTED_FORMATS}"
        )
    return examples, skipped


def read_span_qa(files: Sequence[str]) -> tuple[list[QAExample], collections.Counter]:
    """Reads questions in either layout above; bad ones are skipped and counted.

    Args:
        files: files, globs or folders (`albert_tf.data.inputs.resolve_inputs`).

    Returns:
        ``(examples, skipped)``: ``skipped`` counts dropped questions and answers
        by reason (`SKIP_REASONS`). A question without an id gets
        ``"<file name>:<line>"`` (JSON Lines) or ``"<file name>:<article>.<paragraph>.<question>"``.

    Raises:
        ValueError: a path matching no file, a file of no known format, or a
            file with no readable question.
    """
    try:
        paths = resolve_inputs(files, what="question answering data", samples=False)
    except FileNotFoundError as error:
        raise ValueError(str(error)) from error
    examples: list[QAExample] = []
    skipped: collections.Counter = collections.Counter()
    for path in paths:
        file_examples, file_skipped = _read_file(path)
        examples += file_examples
        skipped.update(file_skipped)
    return examples, skipped


# -- windows for the model ---------------------------------------------------

#: Official ``run_squad`` defaults.
MAX_QUERY_LENGTH = 64
DOC_STRIDE = 128
MAX_ANSWER_LENGTH = 30
N_BEST_SIZE = 20
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


def check_tokenizer(tokenizer) -> None:
    """Refuses a tokenizer that cannot give character offsets (the tagging task's check)."""
    from albert_tf.tasks.tagging.data import check_tokenizer as check_offsets

    check_offsets(tokenizer, task="span QA")


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
    check_tokenizer(tokenizer)
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
    batches = bucketed_batches(
        [len(w["token_ids"]) for w in windows],
        batch_size,
        shuffle=shuffle,
        seed=seed,
        bucket_batches=BUCKET_BATCHES,
    )
    for batch in batches:
        rows = [windows[i] for i in batch]
        features = {key: padded(rows, key) for key in ("token_ids", "segment_ids", "padding_mask")}
        yield features, np.stack([w["labels"] for w in rows])


# -- decoding ----------------------------------------------------------------


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
    logit + end logit, compared across windows as Hugging Face's pipeline
    compares them (the official ``run_squad`` also drops starts outside the
    window where they have the most context; this does not). Positions are in
    the window (sequence positions); equal scores keep the lower start, then end.

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


@dataclasses.dataclass(frozen=True)
class Prediction:
    """One candidate answer: characters of the context (end exclusive; −1 for no
    answer), its text, its start + end logit and its probability in its window."""

    text: str
    start: int
    end: int
    score: float
    probability: float


def margin(candidates: Sequence[Prediction], null: Prediction) -> float:
    """How far "no answer" beats the best candidate: ``null.score - best.score``, in
    float32 as the SavedModel computes it (inf without a candidate)."""
    if not candidates:
        return np.inf
    return float(np.float32(null.score) - np.float32(candidates[0].score))


def choose_answer(
    candidates: Sequence[Prediction], null: Prediction, no_answer_threshold: float | None
) -> Prediction:
    """The best candidate, or ``null`` (no answer) when the `margin` exceeds
    ``no_answer_threshold`` (None: always answer, SQuAD 1.1) or there is no candidate.

    >>> span, none = Prediction("x", 0, 1, 2.0, 0.5), Prediction("", -1, -1, 3.0, 0.2)
    >>> [choose_answer([span], none, t).text for t in (None, 0.5, 1.0)]
    ['x', '', 'x']
    >>> choose_answer([], none, None).start
    -1
    """
    if not candidates:
        return null
    if no_answer_threshold is not None and margin(candidates, null) > np.float32(
        no_answer_threshold
    ):
        return null
    return candidates[0]
