"""Multiple-choice data: reading, in-graph packing, length-bucketed batches.

Three input formats, detected per file from its content (gzip or not):

* **JSON Lines** (``multiple_choice/`` of the shared data folder, docs/data.md): one item a line,
  ``{"id", "lang", "source", "context", "question", "options": [...], "label": int}``
  (without ``"label"``: an item to answer, ``label=-1``);
* **RACE**: ``{"id", "article", "questions": [...], "options": [[...], ...],
  "answers": ["A", ...]}`` per file (the official ``.txt`` files) or per line;
* **C3**: a JSON array of ``[[context lines], [{"question", "choice": [...],
  "answer": str}, ...], id]``.

Every option becomes one sequence, as google-research/albert's ``run_race``
builds it: ``[CLS] context [SEP] qa [SEP]`` where ``qa`` is the question with
``_`` replaced by the option when it has a blank, else ``question + " " +
option``; ``qa`` keeps its *last* ``max_qa_length`` pieces and the context is
cut to fit ``max_seq_length``, keeping its start (``context_keep="start"``, as
for a reading passage) or its end (``"end"``, for "what comes next?" items,
whose best clue is the text just before the options). `pack_multiple_choice` does this with
TensorFlow / tensorflow-text ops only, so fine-tuning and the exported
SavedModel share one implementation.

Example:
    >>> import json, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "mc.jsonl")
    >>> with open(path, "w") as f:
    ...     _ = f.write(json.dumps({"id": "a", "context": "It rains.", "question":
    ...         "Take an _ .", "options": ["umbrella", "ice cream"], "label": 0}) + "\\n")
    ...     _ = f.write("not json\\n")
    >>> items, skipped = read_multiple_choice([path])
    >>> items[0].options, items[0].label, dict(skipped)
    (['umbrella', 'ice cream'], 0, {'invalid_json': 1})
    >>> build_qa("Take an _ .", "umbrella"), build_qa("Why?", "Rain")
    ('Take an umbrella .', 'Why? Rain')
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.data.batching import bucketed_batches
from albert_tf.data.corpus import open_binary
from albert_tf.data.inputs import resolve_inputs
from albert_tf.tasks.multiple_choice.settings import CONTEXT_KEEP

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclasses.dataclass
class MultipleChoiceExample:
    """One question: ``options[label]`` is the answer (``label=-1``: unknown)."""

    id: str
    context: str
    question: str
    options: list[str]
    label: int = -1
    lang: str = ""
    source: str = ""

    @property
    def group(self) -> str:
        """What a split keeps in one part (`albert_tf.data.splits`): the context (RACE's
        article), else the item alone."""
        return f"context:{self.context}" if self.context.strip() else f"id:{self.id}"


def build_qa(question: str, option: str) -> str:
    """The official run_race rule (Python twin of the in-graph version)."""
    if "_" in question:
        return question.replace("_", option)
    return " ".join([question, option])


# -- reading -----------------------------------------------------------------


def _read_text(path: str) -> str:
    # The corpus reader's opener: gzip is detected by content, not by name.
    with open_binary(path) as f:
        return f.read().decode("utf-8", errors="replace")


def _check_item(
    item_id: str, context: Any, question: Any, options: Any, label: Any
) -> tuple[str | None, MultipleChoiceExample | None]:
    if not isinstance(context, str) or not isinstance(question, str):
        return "invalid_record", None
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        return "invalid_record", None
    if len(options) < 2:
        return "too_few_options", None
    if any(not o.strip() for o in options):
        # An empty string means "absent option" to the packer and the SavedModel.
        return "empty_option", None
    if label is None:  # no "label": an item to answer (a test file), label -1
        label = -1
    elif isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(options):
        return "bad_label", None
    if "\ufffd" in context + question + "".join(options):
        return "invalid_utf8", None
    return None, MultipleChoiceExample(str(item_id), context, question, list(options), label)


def _from_record(record: Any, where: str) -> Iterator[tuple[str | None, Any]]:
    """Items of one JSON value in our format or RACE's (one article, many questions)."""
    if not isinstance(record, dict):
        yield "invalid_record", None
        return
    if "article" in record:  # RACE
        questions = record.get("questions", [record.get("question")])
        options = record.get("options")
        answers = record.get("answers", [record.get("answer")])
        if "question" in record and "questions" not in record:
            options = [options]
        if not (
            isinstance(questions, list)
            and isinstance(options, list)
            and isinstance(answers, list)
            and len(questions) == len(options) == len(answers)
        ):
            yield "invalid_record", None
            return
        base = str(record.get("id", record.get("example_id", where)))
        for i, (q, opts, ans) in enumerate(zip(questions, options, answers, strict=True)):
            label = LETTERS.index(ans) if isinstance(ans, str) and ans in LETTERS[:26] else -1
            if label < 0:
                yield "bad_label", None
                continue
            reason, item = _check_item(f"{base}-{i}", record["article"], q, opts, label)
            if item is not None:
                item.lang, item.source = "en", "race"
            yield reason, item
        return
    if "options" in record:
        reason, item = _check_item(
            record.get("id", where),
            record.get("context", ""),
            record.get("question", ""),
            record.get("options"),
            record.get("label"),
        )
        if item is not None:
            item.lang = str(record.get("lang", ""))
            item.source = str(record.get("source", ""))
        yield reason, item
        return
    yield "invalid_record", None


def _from_c3(data: Any, where: str) -> Iterator[tuple[str | None, Any]]:
    if not isinstance(data, list):
        yield "invalid_record", None
        return
    for n, entry in enumerate(data):
        try:
            lines, questions = entry[0], entry[1]
            doc_id = entry[2] if len(entry) > 2 else f"{where}:{n}"
            context = "\n".join(lines)
        except (TypeError, IndexError, KeyError):
            yield "invalid_record", None
            continue
        if not isinstance(questions, list):
            yield "invalid_record", None
            continue
        for i, q in enumerate(questions):
            if not isinstance(q, dict) or q.get("answer") not in (q.get("choice") or []):
                yield "bad_label", None
                continue
            reason, item = _check_item(
                q.get("id", f"{doc_id}-{i}"),
                context,
                q.get("question", ""),
                q.get("choice"),
                q["choice"].index(q["answer"]),
            )
            if item is not None:
                item.lang, item.source = "zh", "c3"
            yield reason, item


def read_multiple_choice(
    paths: str | Sequence[str],
) -> tuple[list[MultipleChoiceExample], collections.Counter]:
    """Reads items in any of the three formats; bad input is skipped and counted.

    Args:
        paths: files, globs or directories (a comma-separated string works too),
            as `albert_tf.data.inputs.resolve_inputs` expands them.

    Returns:
        ``(items, skipped)``: ``skipped`` counts dropped input by reason
        (``invalid_json``, ``invalid_record``, ``too_few_options``,
        ``empty_option``, ``bad_label``, ``invalid_utf8``).

    Raises:
        FileNotFoundError: a path matching no file.
    """
    items: list[MultipleChoiceExample] = []
    skipped: collections.Counter = collections.Counter()
    for path in resolve_inputs(paths, what="multiple-choice data", samples=False):
        text = _read_text(path)
        stripped = text.lstrip()
        if stripped.startswith("["):  # C3: one JSON array per file
            try:
                results: Iterable = _from_c3(json.loads(text), path)
            except ValueError:
                results = [("invalid_json", None)]
        else:

            def per_line(text: str = text, path: str = path) -> Iterator:
                for number, line in enumerate(text.splitlines(), 1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except ValueError:
                        yield "invalid_json", None
                        continue
                    yield from _from_record(record, f"{os.path.basename(path)}:{number}")

            results = per_line()
        for reason, item in results:
            if item is None:
                skipped[reason] += 1
            else:
                items.append(item)
    return items, skipped


# -- packing (in-graph) -------------------------------------------------------


def _keep_range(rt: tf.RaggedTensor, start: tf.Tensor, stop: tf.Tensor) -> tf.RaggedTensor:
    """Row i keeps positions [start[i], stop[i]) (clipped to its length)."""
    positions = tf.ragged.range(tf.cast(rt.row_lengths(), tf.int32))
    keep = (positions >= start[:, None]) & (positions < stop[:, None])
    return tf.ragged.boolean_mask(rt, keep)


def fill_qa(question: tf.Tensor, options: tf.Tensor) -> tf.Tensor:
    """In-graph `build_qa`: tf.string ``question`` [B] and ``options`` [B, C] → [B, C]."""
    questions = tf.broadcast_to(question[:, None], tf.shape(options))
    flat_q = tf.reshape(questions, [-1])
    flat_o = tf.reshape(options, [-1])
    parts = tf.strings.split(flat_q, sep="_")  # k blanks → k + 1 parts
    position = tf.ragged.range(parts.row_lengths()).values
    last = position == tf.gather(parts.row_lengths(), parts.value_rowids()) - 1
    glue = tf.where(last, "", tf.gather(flat_o, parts.value_rowids()))
    filled = tf.strings.reduce_join(
        parts.with_values(tf.strings.join([parts.values, glue])), axis=1
    )
    has_blank = tf.strings.regex_full_match(flat_q, "(?s).*_.*")
    joined = tf.strings.join([flat_q, flat_o], separator=" ")
    return tf.reshape(tf.where(has_blank, filled, joined), tf.shape(options))


def pack_multiple_choice(
    tokenizer,
    context: tf.Tensor,
    question: tf.Tensor,
    options: tf.Tensor,
    *,
    max_seq_length: int,
    max_qa_length: int,
    context_keep: str = "start",
) -> dict[str, tf.Tensor]:
    """Raw text → model inputs, in-graph (usable inside a SavedModel).

    Args:
        tokenizer: any `albert_tf.tokenizers.Tokenizer`.
        context, question: tf.string [B].
        options: tf.string [B, C]; an empty string is an absent option.
        max_seq_length: longest packed sequence (``[CLS] ... [SEP] ... [SEP]``).
        max_qa_length: pieces of question+option kept (the last ones).
        context_keep: which end of a too-long context is kept, ``"start"`` or
            ``"end"``.

    Returns:
        ``token_ids``, ``segment_ids``, ``padding_mask``: int32 [B, C, S] with
        S the longest packed option of this batch (not a fixed maximum);
        absent options are all-zero rows. ``present``: bool [B, C];
        ``context_truncated`` / ``qa_truncated``: bool [B, C]; ``num_context_pieces``
        / ``num_qa_pieces``: int32 [B, C], the lengths before truncation.
    """
    if context_keep not in CONTEXT_KEEP:
        raise ValueError(f"context_keep must be one of {CONTEXT_KEEP}, got {context_keep!r}")
    if not 0 < max_qa_length <= max_seq_length - 3:
        raise ValueError(
            f"need 0 < max_qa_length <= max_seq_length - 3, got {max_qa_length} "
            f"and {max_seq_length}"
        )
    context = tf.convert_to_tensor(context, tf.string)
    question = tf.convert_to_tensor(question, tf.string)
    options = tf.convert_to_tensor(options, tf.string)
    shape = tf.shape(options)  # [B, C]
    present = tf.reshape(tf.strings.length(options) > 0, [-1])  # [B*C]
    owner = tf.repeat(tf.range(shape[0]), shape[1])  # item of each option

    qa = tokenizer.tokenize(tf.reshape(fill_qa(question, options), [-1]))
    qa_len = tf.cast(qa.row_lengths(), tf.int32)
    qa_stop = tf.where(present, qa_len, 0)
    qa = _keep_range(qa, tf.maximum(qa_len - max_qa_length, 0), qa_stop)
    kept_qa = tf.cast(qa.row_lengths(), tf.int32)

    ctx = tf.gather(tokenizer.tokenize(context), owner)
    ctx_len = tf.cast(ctx.row_lengths(), tf.int32)
    budget = tf.where(present, max_seq_length - 3 - kept_qa, 0)
    if context_keep == "end":
        ctx = _keep_range(ctx, tf.maximum(ctx_len - budget, 0), ctx_len)
    else:
        ctx = _keep_range(ctx, tf.zeros_like(budget), budget)
    kept_ctx = tf.cast(ctx.row_lengths(), tf.int32)

    n = tf.size(present)
    cls = tf.RaggedTensor.from_tensor(tf.fill([n, 1], tokenizer.cls_id))
    sep = tf.RaggedTensor.from_tensor(tf.fill([n, 1], tokenizer.sep_id))
    ids = tf.concat([cls, ctx, sep, qa, sep], axis=1)
    segments = tf.concat(
        [tf.zeros_like(cls), tf.zeros_like(ctx), tf.zeros_like(sep), qa * 0 + 1, sep * 0 + 1],
        axis=1,
    )
    ids = tf.ragged.boolean_mask(ids, tf.ones_like(ids, tf.bool) & present[:, None])
    segments = tf.ragged.boolean_mask(segments, tf.ones_like(segments, tf.bool) & present[:, None])
    token_ids = ids.to_tensor(default_value=tokenizer.pad_id)
    width = tf.shape(token_ids)[1]
    mask = tf.sequence_mask(ids.row_lengths(), width, tf.int32)
    token_ids = tf.where(mask > 0, token_ids, tokenizer.pad_id)

    def fold(x):
        return tf.reshape(x, tf.concat([shape, tf.shape(x)[1:]], 0))

    return {
        "token_ids": fold(token_ids),
        "segment_ids": fold(segments.to_tensor(0)),
        "padding_mask": fold(mask),
        "present": fold(present),
        "context_truncated": fold(present & (kept_ctx < ctx_len)),
        "qa_truncated": fold(present & (kept_qa < qa_len)),
        "num_context_pieces": fold(tf.where(present, ctx_len, 0)),
        "num_qa_pieces": fold(tf.where(present, qa_len, 0)),
    }


# -- encoding and batching for training ---------------------------------------


def encode_multiple_choice(
    items: Sequence[MultipleChoiceExample],
    tokenizer,
    *,
    max_seq_length: int,
    max_qa_length: int,
    context_keep: str = "start",
    chunk_size: int = 128,
) -> list[dict[str, np.ndarray]]:
    """Packs every item once (in chunks, with `pack_multiple_choice`).

    Returns one dict per item: ``token_ids`` / ``segment_ids`` int32
    [options, length] (length = the item's longest option), ``padding_mask``,
    and ``label``.
    """
    encoded: list[dict[str, np.ndarray]] = []
    for start in range(0, len(items), chunk_size):
        chunk = items[start : start + chunk_size]
        width = max(len(item.options) for item in chunk)
        options = [item.options + [""] * (width - len(item.options)) for item in chunk]
        packed = pack_multiple_choice(
            tokenizer,
            tf.constant([item.context for item in chunk]),
            tf.constant([item.question for item in chunk]),
            tf.constant(options),
            max_seq_length=max_seq_length,
            max_qa_length=max_qa_length,
            context_keep=context_keep,
        )
        arrays = {k: packed[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask")}
        for row, item in enumerate(chunk):
            count = len(item.options)
            length = int(arrays["padding_mask"][row, :count].sum(-1).max())
            encoded.append(
                {k: v[row, :count, :length] for k, v in arrays.items()}
                | {"label": np.int32(item.label)}
            )
    return encoded


def collate(encoded: Sequence[dict[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Pads items to the batch's most options and longest sequence."""
    options = max(e["token_ids"].shape[0] for e in encoded)
    length = max(e["token_ids"].shape[1] for e in encoded)
    features = {
        key: np.zeros((len(encoded), options, length), np.int32)
        for key in ("token_ids", "segment_ids", "padding_mask")
    }
    for row, e in enumerate(encoded):
        c, s = e["token_ids"].shape
        for key in features:
            features[key][row, :c, :s] = e[key]
    return features, np.array([e["label"] for e in encoded], np.int32)


def multiple_choice_batches(
    encoded: Sequence[dict[str, np.ndarray]],
    batch_size: int,
    *,
    shuffle: bool = False,
    seed: int = 0,
    bucket_batches: int = 50,
) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray]]:
    """One pass over ``encoded`` in batches padded to their own longest item.

    With ``shuffle``, items are shuffled, then sorted by length inside windows
    of ``bucket_batches`` batches (so a batch holds items of similar length and
    little padding), and the batches are shuffled again.

    >>> enc = [{"token_ids": np.ones((2, n), "int32"), "segment_ids": np.zeros((2, n), "int32"),
    ...         "padding_mask": np.ones((2, n), "int32"), "label": 0} for n in (3, 9, 4, 8)]
    >>> [f["token_ids"].shape for f, _ in multiple_choice_batches(enc, 2, shuffle=True)]
    [(2, 2, 4), (2, 2, 9)]
    """
    batches = bucketed_batches(
        [e["token_ids"].size for e in encoded],
        batch_size,
        shuffle=shuffle,
        seed=seed,
        bucket_batches=bucket_batches,
    )
    for batch in batches:
        yield collate([encoded[i] for i in batch])
