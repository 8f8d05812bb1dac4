"""In-graph Unicode helpers shared by both tokenizers.

The reference tokenizers (google-research's Python code and Hugging Face's
``AlbertTokenizer`` / ``BertTokenizer``) classify characters with Python's
``unicodedata`` and ``str`` methods. RE2's ``\\p{..}`` tables and ICU come from
other Unicode versions, so every class used here is built once from Python's
own tables and embedded in the graph as an explicit character class. That keeps
the exported SavedModel self-contained (plain regex strings) and makes it agree
with the reference on this Python's Unicode version.

Example:
    >>> import tensorflow as tf
    >>> lower_utf8(tf.constant(["ΟΔΟΣ Ⅻ"])).numpy()[0].decode()
    'οδοσ ⅻ'
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from collections.abc import Iterable

import numpy as np
import tensorflow as tf

_MAX_CODE_POINT = sys.maxunicode


def _char_class(ranges: Iterable[tuple[int, int]]) -> str:
    """RE2 bracket-expression body (without the brackets) for ``ranges``."""
    parts = []
    for lo, hi in ranges:
        parts.append(f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}")
    return "".join(parts)


# ASCII non-alphanumerics that BERT splits off as punctuation, beside Unicode's P*.
_BERT_ASCII_PUNCTUATION = ((33, 47), (58, 64), (91, 96), (123, 126))


def _is_bert_punctuation(cp: int, category: str) -> bool:
    """BERT's ``_is_punctuation`` for one character (its general ``category``)."""
    ascii_punct = any(lo <= cp <= hi for lo, hi in _BERT_ASCII_PUNCTUATION)
    return ascii_punct or category.startswith("P")


def is_bert_punctuation(char: str) -> bool:
    """Whether BERT's basic tokenizer splits ``char`` off as punctuation.

    >>> [is_bert_punctuation(c) for c in ",a$、"]
    [True, False, True, True]
    """
    return _is_bert_punctuation(ord(char), unicodedata.category(char))


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``(first, last)`` code points of each run of True in ``mask``."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


@functools.cache
def _classes() -> dict[str, str]:
    """All character classes, from Python's own tables.

    Every per-character call runs through ``map`` over the whole code space
    and the runs are found with numpy: under a second, where a Python loop took
    2-3 s in every process that builds a tokenizer graph.
    """
    code_points = np.arange(_MAX_CODE_POINT + 1)
    chars = list(map(chr, range(_MAX_CODE_POINT + 1)))
    categories = np.array(list(map(unicodedata.category, chars)), dtype="<U2")
    major = categories.view("<U1")[::2]  # the category's first letter
    ascii_punctuation = np.zeros(len(chars), bool)
    for lo, hi in _BERT_ASCII_PUNCTUATION:
        ascii_punctuation[lo : hi + 1] = True
    masks = {
        # what Python's str.split() / str.strip() treat as space
        "python_whitespace": np.fromiter(map(str.isspace, chars), bool, len(chars)),
        # non-zero canonical combining class: ALBERT's accent stripping
        "combining": np.fromiter(map(unicodedata.combining, chars), int, len(chars)) != 0,
        # general category Mn: BERT's accent stripping
        "nonspacing_mark": categories == "Mn",
        # str.isdigit(): the "9," rule of ALBERT's tokenizer
        "digit": np.fromiter(map(str.isdigit, chars), bool, len(chars)),
        # BERT text cleaning deletes NUL, U+FFFD and C* except \t \n \r
        "bert_removed": np.isin(code_points, (0, 0xFFFD))
        | ((major == "C") & ~np.isin(code_points, (9, 10, 13))),
        # ...and maps space, \t, \n, \r and Zs to a plain space
        "bert_whitespace": np.isin(code_points, (32, 9, 10, 13)) | (categories == "Zs"),
        # ASCII non-alphanumerics and P* split BERT words
        "bert_punctuation": ascii_punctuation | (major == "P"),
    }
    # Lone surrogates are not text: no class holds them (RE2 cannot match them).
    surrogate = (code_points >= 0xD800) & (code_points <= 0xDFFF)
    return {name: _char_class(_runs(mask & ~surrogate)) for name, mask in masks.items()}


def python_whitespace_class() -> str:
    """Characters Python's ``str.split()`` / ``str.strip()`` treat as space."""
    return _classes()["python_whitespace"]


def combining_class() -> str:
    """Non-zero canonical combining class (``unicodedata.combining``)."""
    return _classes()["combining"]


def nonspacing_mark_class() -> str:
    """General category Mn."""
    return _classes()["nonspacing_mark"]


def digit_class() -> str:
    """Characters for which ``str.isdigit()`` is true."""
    return _classes()["digit"]


def bert_removed_class() -> str:
    """What BERT's text cleaning deletes."""
    return _classes()["bert_removed"]


def bert_whitespace_class() -> str:
    """What BERT's text cleaning turns into a plain space."""
    return _classes()["bert_whitespace"]


def bert_punctuation_class() -> str:
    """Characters BERT splits off as single-character words."""
    return _classes()["bert_punctuation"]


# The blocks BERT's Chinese pre-tokenisation isolates one character at a time.
CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def cjk_class() -> str:
    return _char_class(CJK_RANGES)


@functools.cache
def _lower_fixups() -> tuple[tuple[str, str], ...]:
    """Upper-case letters TensorFlow's ICU leaves alone but Python lowers.

    ``tf.strings.lower`` uses an ICU older than Python 3.11's Unicode 14
    tables; the handful of letters added since are mapped explicitly. Computed
    by comparing both on every code point (a test re-checks this).
    """
    return tuple(
        (chr(cp), chr(cp).lower()) for cp in _LOWER_FIXUP_CODE_POINTS if chr(cp).lower() != chr(cp)
    )


# Found by lowering every code point with both Python and tf.strings.lower
# (TensorFlow 2.21, Python 3.11 / Unicode 14); see tests/tokenizers.
_LOWER_FIXUP_CODE_POINTS: tuple[int, ...] = (
    0x2C2F,
    0xA7C0,
    0xA7D0,
    0xA7D6,
    0xA7D8,
    *range(0x10570, 0x1057B),
    *range(0x1057C, 0x1058B),
    *range(0x1058C, 0x10593),
    0x10594,
    0x10595,
)


def transcode_utf8(texts: tf.Tensor) -> tf.Tensor:
    """Replaces invalid UTF-8 byte sequences with U+FFFD so later Unicode ops
    never fail on bad input (valid UTF-8 passes through unchanged)."""
    return tf.strings.unicode_transcode(
        texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )


def _apply_lower_fixups(texts: tf.Tensor) -> tf.Tensor:
    """Lowers the `_lower_fixups` letters in a 1-D batch. Only the strings
    holding one are decoded to code points: one regex pass over the batch
    instead of one pass per letter (those passes were a fifth of the
    tokenizer's time)."""
    pairs = _lower_fixups()
    upper = np.array([ord(u) for u, _ in pairs], np.int32)
    lower = np.array([ord(lo) for _, lo in pairs], np.int32)
    order = np.argsort(upper)
    upper, lower = upper[order], lower[order]
    letters = _char_class((int(c), int(c)) for c in upper)
    rows = tf.where(tf.strings.regex_full_match(texts, f"(?s).*[{letters}].*"))
    code_points = tf.strings.unicode_decode(tf.gather_nd(texts, rows), "UTF-8")
    values = code_points.flat_values
    slot = tf.minimum(tf.searchsorted(upper, values), len(upper) - 1)
    values = tf.where(tf.gather(upper, slot) == values, tf.gather(lower, slot), values)
    fixed = tf.strings.unicode_encode(code_points.with_flat_values(values), "UTF-8")
    return tf.tensor_scatter_nd_update(texts, rows, fixed)


def lower_utf8(texts: tf.Tensor) -> tf.Tensor:
    """Lower-cases like Hugging Face's slow tokenizers do: one character at a
    time with Python's ``str.lower`` (so no final-sigma rule: Σ → σ always).

    ``tf.strings.lower`` stops at a NUL byte, so the text is split on NUL,
    lowered piecewise and re-joined.

    Args:
      texts: tf.string [batch] (the re-joining works on one batch dimension).
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank is not None and texts.shape.rank != 1:
        raise ValueError(f"lower_utf8 takes a 1-D batch of strings, got shape {texts.shape}")
    # Per-character lowering never produces the word-final ς.
    texts = tf.strings.regex_replace(texts, "Σ", "σ")
    texts = _apply_lower_fixups(texts)
    parts = tf.strings.split(texts, "\x00")
    lowered = tf.strings.lower(parts.flat_values, encoding="utf-8")
    # Re-insert the NULs as data: a NUL in an op attribute (reduce_join's
    # separator) would be cut off.
    position = tf.ragged.range(parts.row_lengths()).flat_values
    row_length = tf.gather(parts.row_lengths(), parts.value_rowids())
    suffix = tf.where(position < row_length - 1, "\x00", "")
    joined = parts.with_flat_values(tf.strings.join([lowered, suffix]))
    return tf.strings.reduce_join(joined, axis=-1)


def byte_owners(normalized: tf.RaggedTensor) -> tf.RaggedTensor:
    """Which original character each byte of a normalised text came from.

    Args:
      normalized: tf.string ragged [batch, (chars)]: what each character of a
        text became, on its own ("" when removed).

    Returns:
      int64 ragged [batch, (bytes + 1)]: for each byte of the row's normalised
      characters joined, the index of the character it came from; then one more
      entry, the row's character count (where an empty span at the end points).
    """
    byte_counts = tf.strings.length(normalized.flat_values, unit="BYTE")
    positions = tf.ragged.range(normalized.row_lengths()).flat_values
    row_bytes = tf.math.unsorted_segment_sum(
        tf.cast(byte_counts, tf.int64), normalized.value_rowids(), normalized.nrows()
    )
    owners = tf.RaggedTensor.from_row_lengths(tf.repeat(positions, byte_counts), row_bytes)
    ends = tf.RaggedTensor.from_tensor(tf.expand_dims(normalized.row_lengths(), 1))
    return tf.concat([owners, ends], axis=1)


def char_spans(
    owners: tf.RaggedTensor, rows: tf.Tensor, begin: tf.Tensor, end: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """Byte spans ``[begin, end)`` of the joined normalised texts (`byte_owners`),
    one per piece of row ``rows``, as ``(start, end)`` int32 character spans of
    the original texts, end exclusive. An empty byte span is an empty character
    span where its byte lies."""
    base = tf.gather(owners.row_starts(), tf.cast(rows, tf.int64))
    begin, end = tf.cast(begin, tf.int64), tf.cast(end, tf.int64)
    start = tf.gather(owners.flat_values, base + begin)
    last = tf.gather(owners.flat_values, base + tf.maximum(end - 1, begin))
    stop = tf.where(end > begin, last + 1, start)
    return tf.cast(start, tf.int32), tf.cast(stop, tf.int32)
