"""Pieces' character offsets, for the tasks that map outputs back onto text.

Span QA and tagging answer in characters of the text they were given (Unicode
code points, end exclusive), which needs a tokenizer whose
``tokenize_with_offsets`` gives them (`check_offsets`); `char_slices` cuts
those characters out of the text in-graph, reading invalid UTF-8 as the
tokenizers do (`transcode_utf8`: each bad byte one U+FFFD, so offsets agree).

Example:
    >>> import tensorflow as tf
    >>> char_slices(tf.constant(["江泽民在北京", "abc"]), tf.constant([4, 1]),
    ...             tf.constant([6, -1])).numpy()[0].decode()
    '北京'
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.tokenizers._text_ops import transcode_utf8

__all__ = ["char_slices", "check_offsets", "transcode_utf8"]


def check_offsets(tokenizer, task: str) -> None:
    """Refuses a tokenizer that cannot give character offsets (a ValueError that names
    ``task`` and says which can): a cased WordPiece vocabulary."""
    if not getattr(tokenizer, "has_offsets", False):
        kind = getattr(tokenizer, "kind", type(tokenizer).__name__)
        cased = " (cased)" if hasattr(tokenizer, "tokenize_with_offsets") else ""
        raise ValueError(
            f"{task} needs each piece's characters, which a {kind}{cased} tokenizer does "
            "not give: use a SentencePiece model or an uncased WordPiece vocabulary "
            "(Chinese ALBERT/BERT vocabularies, uncased English BERT ones)"
        )


def char_slices(texts: tf.Tensor, starts: tf.Tensor, ends: tf.Tensor) -> tf.Tensor:
    """tf.string [B]: ``texts[b][starts[b]:ends[b]]`` in code points, in-graph; ""
    where ``ends <= starts`` (−1 and −1: no span)."""
    return tf.strings.substr(
        transcode_utf8(texts),
        tf.maximum(starts, 0),
        tf.maximum(ends - starts, 0),
        unit="UTF8_CHAR",
    )
