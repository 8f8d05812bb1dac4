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
from collections.abc import Callable, Iterable

import tensorflow as tf

_MAX_CODE_POINT = sys.maxunicode


def _char_class(ranges: Iterable[tuple[int, int]]) -> str:
    """RE2 bracket-expression body (without the brackets) for ``ranges``."""
    parts = []
    for lo, hi in ranges:
        parts.append(f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}")
    return "".join(parts)


def _is_bert_punctuation(cp: int, category: str) -> bool:
    ascii_punct = 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
    return ascii_punct or category.startswith("P")


@functools.cache
def _classes() -> dict[str, str]:
    """All character classes, from one pass over the code space (~1 s)."""
    predicates: dict[str, Callable[[int, str, str], bool]] = {
        # what Python's str.split() / str.strip() treat as space
        "python_whitespace": lambda cp, ch, cat: ch.isspace(),
        # non-zero canonical combining class: ALBERT's accent stripping
        "combining": lambda cp, ch, cat: unicodedata.combining(ch) != 0,
        # general category Mn: BERT's accent stripping
        "nonspacing_mark": lambda cp, ch, cat: cat == "Mn",
        # str.isdigit(): the "9," rule of ALBERT's tokenizer
        "digit": lambda cp, ch, cat: ch.isdigit(),
        # BERT text cleaning deletes NUL, U+FFFD and C* except \t \n \r
        "bert_removed": lambda cp, ch, cat: (
            cp in (0, 0xFFFD) or (cat.startswith("C") and cp not in (9, 10, 13))
        ),
        # ...and maps space, \t, \n, \r and Zs to a plain space
        "bert_whitespace": lambda cp, ch, cat: cp in (32, 9, 10, 13) or cat == "Zs",
        # ASCII non-alphanumerics and P* split BERT words
        "bert_punctuation": lambda cp, ch, cat: _is_bert_punctuation(cp, cat),
    }
    ranges: dict[str, list[tuple[int, int]]] = {name: [] for name in predicates}
    open_at: dict[str, int | None] = dict.fromkeys(predicates)
    for cp in range(_MAX_CODE_POINT + 2):
        valid = cp <= _MAX_CODE_POINT and not 0xD800 <= cp <= 0xDFFF
        ch = chr(cp) if valid else ""
        cat = unicodedata.category(ch) if valid else ""
        for name, predicate in predicates.items():
            inside = valid and predicate(cp, ch, cat)
            start = open_at[name]
            if inside and start is None:
                open_at[name] = cp
            elif not inside and start is not None:
                ranges[name].append((start, cp - 1))
                open_at[name] = None
    return {name: _char_class(r) for name, r in ranges.items()}


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


def lower_utf8(texts: tf.Tensor) -> tf.Tensor:
    """Lower-cases like Hugging Face's slow tokenizers do: one character at a
    time with Python's ``str.lower`` (so no final-sigma rule: Σ → σ always).

    ``tf.strings.lower`` stops at a NUL byte, so the text is split on NUL,
    lowered piecewise and re-joined.
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    # Per-character lowering never produces the word-final ς.
    texts = tf.strings.regex_replace(texts, "Σ", "σ")
    for upper, lower in _lower_fixups():
        texts = tf.strings.regex_replace(texts, upper, lower)
    parts = tf.strings.split(texts, "\x00")
    lowered = tf.strings.lower(parts.flat_values, encoding="utf-8")
    # Re-insert the NULs as data: a NUL in an op attribute (reduce_join's
    # separator) would be cut off.
    position = tf.ragged.range(parts.row_lengths()).flat_values
    row_length = tf.gather(parts.row_lengths(), parts.value_rowids())
    suffix = tf.where(position < row_length - 1, "\x00", "")
    joined = parts.with_flat_values(tf.strings.join([lowered, suffix]))
    return tf.strings.reduce_join(joined, axis=-1)
