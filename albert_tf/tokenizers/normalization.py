"""ALBERT's text normalisation before SentencePiece, in-graph.

What google-research/albert's ``FullTokenizer`` with an ``spm_model_file`` and
Hugging Face's slow ``AlbertTokenizer`` do to text before the model sees it:

1. lower-case (one character at a time, as HF does before anything else);
2. collapse runs of whitespace to one space and strip the ends;
3. turn the LaTeX-style quotes ``\\`\\``` and ``''`` into ``"``;
4. NFKD, then drop combining marks (unless ``keep_accents``);
5. lower-case again (a no-op after 1; kept for exactness);
5a. optionally (``fold_punctuation=True``, the default of models trained here) fold
   typographic punctuation to what a keyboard types: curly quotes to ``'`` and
   ``"``, dashes and the minus sign to ``-``, no-break spaces to a space.

`normalize_text` does this to whole texts, `normalize_chars` to each character
apart (for offsets). The same folding written into a model's own normaliser
(`typography_folding_model`) serves the exports that tokenize without these ops.
The tokenizer (`albert_tf.tokenizers.sentencepiece`) and the trainer
(`albert_tf.tokenizers.sentencepiece_training`) both normalise here.
"""

from __future__ import annotations

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenizers import _text_ops
from albert_tf.tokenizers.sentencepiece_proto import (
    user_defined_pieces,
    with_normalization_rules,
)

#: Typographic characters and the keyboard character each folds to
#: (``fold_punctuation``). Curly quotes and dashes survive NFKC/NFKD, and a
#: no-break space survives ``keep_accents`` (no NFKD).
TYPOGRAPHIC_FOLDS: tuple[tuple[str, str], ...] = (
    ("\u2018\u2019\u201a\u201b", "'"),
    ("\u201c\u201d\u201e\u201f", '"'),
    ("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    ("\u00a0\u2007\u202f", " "),
)


def fold_typography(texts: tf.Tensor) -> tf.Tensor:
    """`TYPOGRAPHIC_FOLDS` applied in-graph.

    >>> text = tf.constant(["\u201cIt\u2019s 9\u201310\u00a0am\u201d"])
    >>> print(fold_typography(text).numpy()[0].decode())
    "It's 9-10 am"
    """
    for chars, replacement in TYPOGRAPHIC_FOLDS:
        texts = tf.strings.regex_replace(texts, f"[{chars}]", replacement)
    return texts


def normalize_text(
    texts: tf.Tensor,
    *,
    lower_case: bool = True,
    remove_space: bool = True,
    keep_accents: bool = False,
    fold_punctuation: bool = False,
) -> tf.Tensor:
    """ALBERT's pre-SentencePiece text normalisation, in-graph.

    Args:
      texts: tf.string tensor of any shape.
      lower_case: lower-case the text (uncased models).
      remove_space: collapse whitespace runs and strip both ends.
      keep_accents: keep combining marks (after NFKD they are dropped).
      fold_punctuation: fold curly quotes, dashes and no-break spaces, last
        (`fold_typography`), so that what it yields is not normalised again:
        ``’’`` stays two apostrophes, as a SentencePiece model whose own
        normaliser folds them (`typography_folding_model`) gives it.

    Returns:
      tf.string tensor of the same shape.

    Example:
        >>> normalize_text(tf.constant(["  Café\\t``naïve''  "])).numpy()[0].decode()
        'cafe "naive"'
    """
    texts = _text_ops.transcode_utf8(tf.convert_to_tensor(texts, tf.string))
    if lower_case:
        texts = _text_ops.lower_utf8(texts)
    if remove_space:
        space = _text_ops.python_whitespace_class()
        texts = tf.strings.regex_replace(texts, f"[{space}]+", " ")
        texts = tf.strings.regex_replace(texts, "^ | $", "")
    texts = tf.strings.regex_replace(texts, "``|''", '"')
    if not keep_accents:
        texts = tf_text.normalize_utf8(texts, "NFKD")
        texts = tf.strings.regex_replace(texts, f"[{_text_ops.combining_class()}]", "")
    if lower_case:
        texts = _text_ops.lower_utf8(texts)
    if fold_punctuation:
        texts = fold_typography(texts)
    return texts


def normalize_chars(
    texts: tf.Tensor,
    *,
    lower_case: bool = True,
    remove_space: bool = True,
    keep_accents: bool = False,
    fold_punctuation: bool = False,
) -> tf.RaggedTensor:
    """`normalize_text` applied to each character of ``texts`` on its own.

    tf.string [batch] → tf.string ragged [batch, (chars)]: what each character
    becomes ("" when removed). Joined, they are `normalize_text` of the text;
    kept apart, they say which character each byte came from. The steps that
    look at neighbours are done by position: a whitespace run keeps its first
    character as a space (none at the ends), and a pair of backticks or of apostrophes
    becomes ``"`` on its second character. Per character, NFKD differs from NFKD
    of the whole text only in the order of combining marks, all dropped.

    Example:
        >>> chars = normalize_chars(tf.constant([" Ça  ``va''"]))
        >>> [c.decode() for c in chars.to_list()[0]]
        ['', 'c', 'a', ' ', '', '', '"', 'v', 'a', '', '"']
    """
    texts = _text_ops.transcode_utf8(tf.convert_to_tensor(texts, tf.string))
    chars, char_bytes = tf.strings.unicode_split_with_offsets(texts, "UTF-8")
    flat, rows = chars.flat_values, chars.value_rowids()
    position = tf.ragged.range(chars.row_lengths()).flat_values
    if lower_case:
        flat = _text_ops.lower_utf8(flat)
    if remove_space:
        space = tf.strings.regex_full_match(flat, f"[{_text_ops.python_whitespace_class()}]")
        after_space = tf.concat([[False], space[:-1]], 0) & (position > 0)
        first = tf.math.unsorted_segment_min(
            tf.where(space, tf.constant(position.dtype.max, position.dtype), position),
            rows,
            chars.nrows(),
        )
        last = tf.math.unsorted_segment_max(
            tf.where(space, tf.constant(-1, position.dtype), position), rows, chars.nrows()
        )
        kept = (
            space
            & ~after_space
            & (position > tf.gather(first, rows))
            & (position < tf.gather(last, rows))
        )
        flat = tf.where(space, tf.where(kept, " ", ""), flat)
    # The pairs whole-text normalisation replaces: its leftmost non-overlapping matches.
    parts, part_bytes, _ = tf_text.regex_split_with_offsets(texts, "``|''", "``|''")
    text_base = tf.cumsum(tf.cast(tf.strings.length(texts), tf.int64), exclusive=True)
    is_pair = (parts.flat_values == "``") | (parts.flat_values == "''")
    pair_bytes = tf.boolean_mask(
        part_bytes.flat_values + tf.gather(text_base, parts.value_rowids()), is_pair
    )
    pair = tf.searchsorted(char_bytes.flat_values + tf.gather(text_base, rows), pair_bytes)
    # The quote is given to the pair's second character, as Hugging Face's fast tokenizer aligns it.
    flat = tf.tensor_scatter_nd_update(flat, pair[:, None], tf.fill(tf.shape(pair), ""))
    flat = tf.tensor_scatter_nd_update(flat, pair[:, None] + 1, tf.fill(tf.shape(pair), '"'))
    if not keep_accents:
        flat = tf_text.normalize_utf8(flat, "NFKD")
        flat = tf.strings.regex_replace(flat, f"[{_text_ops.combining_class()}]", "")
    if lower_case:
        flat = _text_ops.lower_utf8(flat)
    if fold_punctuation:
        flat = fold_typography(flat)
    return chars.with_flat_values(flat)


def folded_characters() -> str:
    """Every character `TYPOGRAPHIC_FOLDS` changes."""
    return "".join(chars for chars, _ in TYPOGRAPHIC_FOLDS)


def check_foldable(model_proto: bytes) -> None:
    """Raises ValueError when a user-defined piece holds a character that
    `TYPOGRAPHIC_FOLDS` changes: SentencePiece matches such pieces before its
    normaliser runs, so a normalisation table (the Hugging Face and LiteRT
    exports) cannot fold them."""
    folded = set(folded_characters())
    kept_whole = sorted(p for p in user_defined_pieces(model_proto) if set(p) & folded)
    if kept_whole:
        raise ValueError(
            f"the SentencePiece model keeps {kept_whole} whole (user-defined pieces), "
            "which its normaliser cannot fold; retrain it without them "
            "(train_sentencepiece leaves them out when fold_punctuation is on)"
        )


def typography_folding_model(model_proto: bytes) -> bytes:
    """``model_proto`` with `TYPOGRAPHIC_FOLDS` added to its own normaliser, so
    that a tokenizer without ``fold_punctuation`` (Hugging Face's
    ``AlbertTokenizer``) folds as `normalize_text` does: the folded characters
    are untouched by lower-casing and NFKD, and the model's normaliser runs last.
    """
    own = spm.SentencePieceNormalizer(
        model_proto=model_proto,
        add_dummy_prefix=False,
        escape_whitespaces=False,
        remove_extra_whitespaces=False,
    )
    check_foldable(model_proto)
    rules = dict(own.decompile())
    for chars, replacement in TYPOGRAPHIC_FOLDS:
        for ch in chars:
            rules[ch] = own.normalize(replacement)
    return with_normalization_rules(model_proto, sorted(rules.items()), "albert_tf_folded")
