"""Sentence and sentence-pair classification data: reading, in-graph packing, batches.

Formats, detected per file (gzip or not, from the content):

* **JSON Lines**, ours (``classification/`` of the shared data folder, docs/data.md):
  one item a line, ``{"id", "lang", "source", "text", "text_pair"?, "label"}``, the
  label an int or a string;
* **CLUE JSON Lines**: TNEWS ``{"sentence", "label", "label_desc", "keywords"}``
  (the label is a code such as ``"102"``), IFLYTEK ``{"sentence", "label",
  "label_des"}``, AFQMC and the other pair tasks ``{"sentence1", "sentence2",
  "label"}``;
* **GLUE TSV** (a ``.tsv`` name, or a first line with tabs): the columns are
  found by header name: SST-2 ``sentence``; MRPC ``#1 String`` / ``#2 String``
  with the label in ``Quality``; MNLI ``sentence1`` / ``sentence2`` /
  ``gold_label``; QNLI ``question`` / ``sentence``; RTE, WNLI ``sentence1`` /
  ``sentence2``; QQP ``question1`` / ``question2`` / ``is_duplicate``; STS-B
  ``score`` (for regression). CoLA has no header: four columns ``source,
  label, original mark, sentence``. An ``index`` (or ``id``) column gives the
  ids, as GLUE's submission files expect.

Rows without a label get ``label=-1`` when no row of their file has one (a test
file); elsewhere they are skipped. Bad rows are skipped and counted by reason.

Sequences are google-research/albert's ``run_classifier`` ones: ``[CLS] text
[SEP]``, or ``[CLS] text [SEP] text_pair [SEP]`` with segment ids 1 from the
pair on, a too-long pair cut by ``_truncate_seq_pair`` (pieces dropped from the
end of the longer text). `pack_classification` does this with TensorFlow /
tensorflow-text ops only, so fine-tuning and the exported SavedModel share one
implementation.

Example:
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with open(os.path.join(folder, "train.tsv"), "w") as f:
    ...     _ = f.write("sentence\\tlabel\\ngood movie !\\t1\\nbad plot\\t0\\nno label\\n")
    >>> items, skipped, names = read_classification([folder])
    >>> [(i.id, i.text, i.label) for i in items], dict(skipped), names
    ([('train.tsv:2', 'good movie !', 1), ('train.tsv:3', 'bad plot', 0)], \
{'wrong_column_count': 1}, ['0', '1'])
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "movie", "plot", "!"]
    >>> with open(os.path.join(folder, "vocab.txt"), "w") as f:
    ...     _ = f.write("\\n".join(vocab) + "\\n")
    >>> from albert_tf.tokenizers import WordPieceTokenizer
    >>> tok = WordPieceTokenizer(os.path.join(folder, "vocab.txt"))
    >>> packed = pack_classification(
    ...     tf.constant(["good movie !", "bad"]), tf.constant(["", "plot"]), tok, 8)
    >>> packed["token_ids"].numpy().tolist(), packed["segment_ids"].numpy().tolist()
    ([[2, 5, 7, 9, 3], [2, 6, 3, 8, 3]], [[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]])
    >>> encoded = encode_classification(items, tok, max_seq_length=8)
    >>> [(f["token_ids"].shape, y.tolist()) for f, y in classification_batches(encoded, 2)]
    [((2, 5), [1, 0])]
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.data.batching import bucketed_batches
from albert_tf.data.corpus import open_binary
from albert_tf.data.inputs import DATA_SUFFIXES, resolve_inputs

#: Why `read_classification` skips a row (the keys of its ``skipped`` counter).
SKIP_REASONS = (
    "invalid_json",
    "missing_text",
    "empty_text",
    "missing_label",
    "unknown_label",
    "bad_score",
    "wrong_column_count",
)

#: GLUE header names: (text column, pair column or None), first match wins.
GLUE_TEXT_COLUMNS = (
    ("sentence1", "sentence2"),  # MNLI, RTE, WNLI, STS-B
    ("question", "sentence"),  # QNLI
    ("#1 String", "#2 String"),  # MRPC
    ("question1", "question2"),  # QQP
    ("sentence", None),  # SST-2, CoLA's test file
)
#: GLUE label columns; MNLI's ``gold_label`` comes before its ``label1..5`` votes.
GLUE_LABEL_COLUMNS = ("gold_label", "label", "Quality", "is_duplicate", "score")
ID_COLUMNS = ("index", "id")

#: Length-sorting windows of `classification_batches`, in batches.
BUCKET_BATCHES = 50
_ENCODE_CHUNK = 128
_INTEGER = re.compile(r"[+-]?\d+")


@dataclasses.dataclass
class ClassificationExample:
    """One text (or text pair) and its label."""

    id: str
    text: str
    text_pair: str = ""  # "" = a single text
    label: int | float = -1  # index into label_names; a float score for regression; -1 = unknown
    lang: str = ""
    source: str = ""

    @property
    def group(self) -> str:
        """What a split keeps in one part (`albert_tf.data.splits`): the text with its
        pair, so that a repeated text is never in two parts."""
        return f"text:{self.text}\x00{self.text_pair}"


# -- reading -----------------------------------------------------------------


@dataclasses.dataclass
class _Row:
    """A parsed row before labels are mapped (they need every file's labels)."""

    id: str
    text: str
    text_pair: str
    raw_label: str | None  # None: no label in the row
    lang: str
    source: str


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)``, split on "\\n" only: ``str.splitlines`` would also
    split on U+2028 and friends, which JSON writers leave raw inside strings."""
    with open_binary(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if number == 1:
                line = line.removeprefix("\ufeff")
            if line.strip():
                yield number, line


def _label_text(value: Any) -> str | None | bool:
    """A JSON label as the string it is compared by; None if absent, False if
    it cannot be a label (a list, an object, true/false)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return False
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 1.0 is the label "1"
    text = str(value).strip()
    return text or None


def _texts(text: Any, pair: Any, pair_required: bool) -> tuple[str | None, str, str]:
    """``(skip reason, text, text_pair)`` of a row's raw text fields."""
    if not isinstance(text, str) or (pair_required and not isinstance(pair, str)):
        return "missing_text", "", ""
    if pair is None:
        pair = ""
    if not isinstance(pair, str):
        return "missing_text", "", ""
    if not text.strip() or (pair_required and not pair.strip()):
        return "empty_text", "", ""
    return None, text, pair if pair.strip() else ""


def _json_rows(path: str, regression: bool) -> Iterator[tuple[str | None, _Row | None]]:
    name = os.path.basename(path)
    for number, line in _lines(path):
        try:
            record = json.loads(line)
        except ValueError:
            yield "invalid_json", None
            continue
        if not isinstance(record, dict):
            yield "invalid_json", None
            continue
        if "text" in record:  # ours
            reason, text, pair = _texts(record["text"], record.get("text_pair"), False)
            lang, source = str(record.get("lang", "")), str(record.get("source", ""))
        elif "sentence1" in record:  # CLUE pairs (AFQMC, CMNLI, OCNLI...)
            reason, text, pair = _texts(record["sentence1"], record.get("sentence2"), True)
            lang, source = str(record.get("lang", "zh")), str(record.get("source", "clue"))
        else:  # CLUE single texts (TNEWS, IFLYTEK); no "sentence" is a missing text
            reason, text, pair = _texts(record.get("sentence"), None, False)
            lang, source = str(record.get("lang", "zh")), str(record.get("source", "clue"))
        if reason is not None:
            yield reason, None
            continue
        label = _label_text(record.get("label"))
        if label is False:
            yield ("bad_score" if regression else "unknown_label"), None
            continue
        item_id = record.get("id")
        item_id = f"{name}:{number}" if item_id is None or item_id == "" else str(item_id)
        yield None, _Row(item_id, text, pair, label, lang, source)


def _tsv_rows(path: str) -> Iterator[tuple[str | None, _Row | None]]:
    name = os.path.basename(path)
    lines = _lines(path)
    first = next(lines, None)
    if first is None:
        return
    header = first[1].split("\t")
    columns = next(((t, p) for t, p in GLUE_TEXT_COLUMNS if t in header), None)
    if columns is not None:
        text_at = header.index(columns[0])
        pair_at = header.index(columns[1]) if columns[1] in header else None
        label_at = next((header.index(c) for c in GLUE_LABEL_COLUMNS if c in header), None)
        id_at = next((header.index(c) for c in ID_COLUMNS if c in header), None)
        width, rows = len(header), lines
    elif len(header) == 4 and header[1] in ("0", "1"):  # CoLA: no header line
        text_at, pair_at, label_at, id_at = 3, None, 1, None
        width, rows = 4, [first, *lines]
    else:
        raise ValueError(
            f"{path}: unknown TSV layout; a header naming one of "
            f"{sorted({c for pair in GLUE_TEXT_COLUMNS for c in pair if c})} was expected, "
            f"or CoLA's 4 columns without header, got {first[1][:200]!r}"
        )
    for number, line in rows:
        fields = line.split("\t")  # GLUE's TSVs are unquoted (run_classifier: quotechar=None)
        if len(fields) != width:
            yield "wrong_column_count", None
            continue
        reason, text, pair = _texts(
            fields[text_at], None if pair_at is None else fields[pair_at], pair_at is not None
        )
        if reason is not None:
            yield reason, None
            continue
        label = (fields[label_at].strip() or None) if label_at is not None else None
        item_id = fields[id_at].strip() if id_at is not None else ""
        yield None, _Row(item_id or f"{name}:{number}", text, pair, label, "en", "glue")


def _is_tsv(path: str) -> bool:
    if path.removesuffix(".gz").endswith(".tsv"):
        return True
    first = next(_lines(path), (0, ""))[1]
    return not first.lstrip().startswith("{") and "\t" in first


def _label_names(labels: Sequence[str]) -> list[str]:
    """Names collected from the data: numeric order if all are integers (so 0/1
    stay indexes 0/1 and "10" follows "9"), else sorted strings."""
    unique = set(labels)
    if all(_INTEGER.fullmatch(label) for label in unique):
        return sorted(unique, key=lambda label: (int(label), label))
    return sorted(unique)


def read_classification(
    files: Sequence[str], *, label_names: Sequence[str] | None = None, regression: bool = False
) -> tuple[list[ClassificationExample], collections.Counter, list[str]]:
    """Reads items in any of the formats above; bad rows are skipped and counted.

    Args:
        files: files, globs or folders (``.tsv`` files included), as
            `albert_tf.data.inputs.resolve_inputs` expands them.
        label_names: the label map of a trained model (for dev and test files,
            so that indexes match): a label must be one of them, compared as
            strings. Without it, the names are collected from the data.
        regression: labels are float scores (STS-B); ``label_names`` is ``[]``.

    Returns:
        ``(items, skipped, label_names)``: ``skipped`` counts dropped rows by
        reason (`SKIP_REASONS`). A row without an id gets ``"<file name>:<line>"``.

    Raises:
        FileNotFoundError: a path matching no file.
        ValueError: a TSV file of no known layout; ``label_names`` with ``regression``.
    """
    if regression and label_names:
        raise ValueError(f"regression takes no label_names, got {list(label_names)}")
    skipped: collections.Counter = collections.Counter()
    rows: list[_Row] = []
    suffixes = (*DATA_SUFFIXES, ".tsv")
    for path in resolve_inputs(files, what="classification data", samples=False, suffixes=suffixes):
        results = _tsv_rows(path) if _is_tsv(path) else _json_rows(path, regression)
        file_rows = []
        for reason, row in results:
            if row is None:
                skipped[reason] += 1
            else:
                file_rows.append(row)
        # A file with no label at all is a test file: its rows are kept, unlabelled.
        test_file = all(row.raw_label is None for row in file_rows)
        for row in file_rows:
            if row.raw_label is None and not test_file:
                skipped["missing_label"] += 1
            else:
                rows.append(row)

    if regression:
        names: list[str] = []
    elif label_names is not None:
        names = [str(name) for name in label_names]
    else:
        names = _label_names([row.raw_label for row in rows if row.raw_label is not None])
    index = {name: i for i, name in enumerate(names)}
    items: list[ClassificationExample] = []
    for row in rows:
        label: int | float = -1.0 if regression else -1
        if row.raw_label is not None and regression:
            try:
                label = float(row.raw_label)
            except ValueError:
                label = math.nan
            if not math.isfinite(label):
                skipped["bad_score"] += 1
                continue
        elif row.raw_label is not None:
            if row.raw_label not in index:
                skipped["unknown_label"] += 1
                continue
            label = index[row.raw_label]
        items.append(
            ClassificationExample(row.id, row.text, row.text_pair, label, row.lang, row.source)
        )
    return items, skipped, names


# -- packing (in-graph) -------------------------------------------------------


def pack_classification(
    texts: tf.Tensor, text_pairs: tf.Tensor, tokenizer, max_seq_length: int
) -> dict[str, tf.Tensor]:
    """Raw text → model inputs, in-graph (usable inside a SavedModel).

    Args:
        texts: tf.string [B].
        text_pairs: tf.string [B]; a text with no pieces (``""``) makes the row a
            single text. A batch may mix single texts and pairs.
        tokenizer: any `albert_tf.tokenizers.Tokenizer`.
        max_seq_length: longest packed sequence, special tokens included: at least
            3 for single texts, 4 for pairs.

    Returns:
        ``token_ids``, ``segment_ids``, ``padding_mask``: int32 [B, S] with S the
        batch's longest packed sequence (not a fixed maximum).

    Raises:
        ValueError: ``max_seq_length`` too small (for pairs: when they are known
            eagerly; in a graph the check fails at run time), or texts and pairs
            of different batch sizes.
    """
    if max_seq_length < 3:
        raise ValueError(
            f"max_seq_length must be at least 3 ([CLS] text [SEP]), 4 for text pairs; "
            f"got {max_seq_length}"
        )
    texts = tf.convert_to_tensor(texts, tf.string)
    text_pairs = tf.convert_to_tensor(text_pairs, tf.string)
    if not texts.shape[:1].is_compatible_with(text_pairs.shape[:1]):
        raise ValueError(f"{texts.shape[0]} texts but {text_pairs.shape[0]} text pairs")
    first = tokenizer.tokenize(texts)
    second = tokenizer.tokenize(text_pairs)
    is_pair = second.row_lengths() > 0
    if max_seq_length < 4:
        has_pair = tf.reduce_any(is_pair)
        message = f"text pairs need max_seq_length >= 4, got {max_seq_length}"
        if tf.get_static_value(has_pair) is None:  # graph: check when it runs
            tf.debugging.assert_equal(has_pair, False, message=message)
        elif tf.get_static_value(has_pair):
            raise ValueError(message)

    # The pair's closing [SEP] is trimmed as a segment of its own, placed first:
    # round robin gives it its one piece before any text piece, so singles share
    # max_seq_length - 2 and pairs max_seq_length - 3 between their texts, as
    # run_classifier does. RoundRobinTrimmer's allocation (the first segment gets
    # the odd piece) is _truncate_seq_pair's (pop from the longer, from b on a tie).
    end = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(tf.cast(is_pair, tf.int32))], tf.constant(tokenizer.sep_id)),
        tf.cast(is_pair, second.row_splits.dtype),
    )
    end, first, second = tf_text.RoundRobinTrimmer(max_seq_length - 2).trim([end, first, second])

    n = first.nrows()
    cls = tf.RaggedTensor.from_tensor(tf.fill([n, 1], tf.constant(tokenizer.cls_id)))
    sep = tf.RaggedTensor.from_tensor(tf.fill([n, 1], tf.constant(tokenizer.sep_id)))
    cls, sep = (t.with_row_splits_dtype(first.row_splits.dtype) for t in (cls, sep))
    ids = tf.concat([cls, first, sep, second, end], axis=1)
    segments = tf.concat(
        [cls * 0, first * 0, sep * 0, second * 0 + 1, end * 0 + 1],
        axis=1,
    )
    token_ids = ids.to_tensor(default_value=tokenizer.pad_id)
    mask = tf.sequence_mask(ids.row_lengths(), tf.shape(token_ids)[1], tf.int32)
    return {
        "token_ids": token_ids,
        "segment_ids": segments.to_tensor(0),
        "padding_mask": mask,
    }


# -- encoding and batching for training ---------------------------------------


def encode_classification(
    items: Sequence[ClassificationExample], tokenizer, max_seq_length: int
) -> list[dict[str, np.ndarray]]:
    """Packs every item once (in chunks, with `pack_classification`).

    Returns one dict per item: 1-D int32 ``token_ids``, ``segment_ids`` and
    ``padding_mask`` of the item's own length (unpadded), and ``label``
    (int32, or float32 for a regression score).
    """
    encoded: list[dict[str, np.ndarray]] = []
    for start in range(0, len(items), _ENCODE_CHUNK):
        chunk = items[start : start + _ENCODE_CHUNK]
        packed = pack_classification(
            tf.constant([item.text for item in chunk]),
            tf.constant([item.text_pair for item in chunk]),
            tokenizer,
            max_seq_length,
        )
        arrays = {key: value.numpy() for key, value in packed.items()}
        lengths = arrays["padding_mask"].sum(-1)
        for row, item in enumerate(chunk):
            label_type = np.float32 if isinstance(item.label, float) else np.int32
            encoded.append(
                {key: value[row, : lengths[row]] for key, value in arrays.items()}
                | {"label": label_type(item.label)}
            )
    return encoded


def _collate(
    encoded: Sequence[dict[str, np.ndarray]], label_dtype: type
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    length = max(len(e["token_ids"]) for e in encoded)
    features = {
        key: np.zeros((len(encoded), length), np.int32)
        for key in ("token_ids", "segment_ids", "padding_mask")
    }
    for row, e in enumerate(encoded):
        for key, value in features.items():
            value[row, : len(e[key])] = e[key]
    return features, np.array([e["label"] for e in encoded], label_dtype)


def classification_batches(
    encoded: Sequence[dict[str, np.ndarray]], batch_size: int, shuffle: bool = False, seed: int = 0
) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray]]:
    """One pass over ``encoded`` in batches padded to their own longest item.

    With ``shuffle``, items are shuffled, then sorted by length inside windows
    of `BUCKET_BATCHES` batches (a batch holds items of similar length, so
    little padding), and the batches are shuffled again, all from ``seed``.
    Labels are int32, or float32 if any is a float (regression scores).

    >>> enc = [{"token_ids": np.ones(n, "int32"), "segment_ids": np.zeros(n, "int32"),
    ...         "padding_mask": np.ones(n, "int32"), "label": 0.5} for n in (3, 9, 4, 8)]
    >>> [(f["token_ids"].shape, y.dtype.name) for f, y in classification_batches(enc, 2, True)]
    [((2, 4), 'float32'), ((2, 9), 'float32')]
    """
    batches = bucketed_batches(
        [len(e["token_ids"]) for e in encoded],
        batch_size,
        shuffle=shuffle,
        seed=seed,
        bucket_batches=BUCKET_BATCHES,
    )
    # One dtype for the whole pass: decided by all labels, not batch by batch.
    regression = any(np.asarray(e["label"]).dtype.kind == "f" for e in encoded)
    label_dtype = np.float32 if regression else np.int32
    for batch in batches:
        yield _collate([encoded[i] for i in batch], label_dtype)
