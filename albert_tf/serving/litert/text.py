"""The text work of the ``.tflite`` file in LiteRT-capable ops: normalisation tables
folded into SentencePiece models, character-level models that join strings, id
lookups and the question's blanks (the package docstring says how)."""

from __future__ import annotations

import functools
import unicodedata

import numpy as np
import tensorflow as tf

from albert_tf.tokenizers.sentencepiece import WORD_START
from albert_tf.tokenizers.sentencepiece_proto import (
    NORMAL,
    UNKNOWN,
    compiled_rules,
    length_delimited,
    piece_entry,
    varint,
    with_normalization_rules,
)

_UNDERSCORE = ord("_")


# -- English: ALBERT's normalisation inside the SentencePiece model ------------


def _all_characters() -> list[str]:
    return [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def composite_sentencepiece_model(tokenizer) -> bytes:
    """The tokenizer's SentencePiece model with `normalize_text` folded into its
    normalisation table, for ``FastSentencepieceTokenizer``.

    Every character c maps to nmt_nfkc(normalize_text(c)) (whitespace to " ";
    SentencePiece itself then collapses and strips spaces, as `normalize_text`
    does), plus the two-character rules ``\\`\\``` / ``''`` → ``"`` and the
    model's own multi-character rules whose characters `normalize_text` keeps.
    The first call per model runs `normalize_text` over all of Unicode (~10 s).

    Example:
        >>> proto = composite_sentencepiece_model(tok)  # doctest: +SKIP
        >>> tf_text.FastSentencepieceTokenizer(proto).tokenize(["Café"])  # doctest: +SKIP
    """
    options = tokenizer.options
    return _composite_model(
        tokenizer._model_proto,
        options["lower_case"],
        options["remove_space"],
        options["keep_accents"],
        options.get("fold_punctuation", False),
    )


@functools.lru_cache(maxsize=4)
def _composite_rules(
    proto: bytes,
    lower_case: bool,
    remove_space: bool,
    keep_accents: bool,
    fold_punctuation: bool = False,
) -> tuple[tuple[str, str], ...]:
    """`composite_sentencepiece_model`'s rules: (characters, what they become)."""
    import sentencepiece as spm

    from albert_tf.tokenizers.normalization import normalize_text

    own = spm.SentencePieceNormalizer(
        model_proto=proto,
        add_dummy_prefix=False,
        escape_whitespaces=False,
        remove_extra_whitespaces=False,
    )
    chars = _all_characters()
    normalized = normalize_text(
        tf.constant(chars),
        lower_case=lower_case,
        remove_space=False,  # SentencePiece collapses the spaces at the end
        keep_accents=keep_accents,
        fold_punctuation=fold_punctuation,
    ).numpy()
    rules: dict[str, str] = {}
    kept = {}
    for ch, value in zip(chars, normalized, strict=True):
        text = value.decode("utf-8")
        kept[ch] = text == ch
        if remove_space and ch.isspace():
            text = " "
        mapped = own.normalize(text)
        if mapped != ch:
            rules[ch] = mapped
    for key, value in own.decompile():
        # The model's rules that compose several characters (decomposed Indic
        # vowels, Hangul jamo) still apply where normalize_text leaves them alone.
        if len(key) > 1 and all(kept.get(ch, False) for ch in key):
            rules[key] = value
    quote = own.normalize('"')
    rules["``"] = rules["''"] = quote
    return tuple(sorted(rules.items()))


@functools.lru_cache(maxsize=4)
def _composite_model(
    proto: bytes,
    lower_case: bool,
    remove_space: bool,
    keep_accents: bool,
    fold_punctuation: bool = False,
) -> bytes:
    rules = _composite_rules(proto, lower_case, remove_space, keep_accents, fold_punctuation)
    return with_normalization_rules(proto, list(rules), "albert_tf_litert")


def digit_comma_table(tokenizer) -> np.ndarray:
    """int32 [vocab, k]: each piece id's replacement under the "9," rule, -1 padded.

    Pieces the rule leaves alone map to themselves; the others to what the
    reference tokenizer's ``_split_digit_comma`` makes of them.

    >>> digit_comma_table(tok)[tok_id_of_9_comma]  # doctest: +SKIP
    array([ 27,  15], dtype=int32)
    """
    from albert_tf.tokenizers import _text_ops

    pieces = tokenizer.vocabulary
    # The rule's own RE2 pattern, run by TensorFlow as the tokenizer runs it.
    matches = tf.strings.regex_full_match(
        tf.constant(pieces), f"(?s).*[{_text_ops.digit_class()}],"
    ).numpy()
    rule_pieces = np.flatnonzero(matches).tolist()
    rows: list[list[int]] = [[i] for i in range(len(pieces))]
    if rule_pieces and tokenizer.split_digit_comma:
        ragged = tf.ragged.constant([[pieces[i]] for i in rule_pieces])
        split = tokenizer._split_digit_comma(ragged)
        ids = tokenizer._sp.string_to_id(split).to_list()
        for i, replacement in zip(rule_pieces, ids, strict=True):
            rows[i] = [int(x) for x in replacement]
    width = max(len(r) for r in rows)
    table = np.full((len(rows), width), -1, np.int32)
    for i, row in enumerate(rows):
        table[i, : len(row)] = row
    return table


# -- the in-graph module --------------------------------------------------------


def _ragged_parts(values: tf.Tensor, splits: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.cast(values, tf.int32), tf.cast(splits, tf.int32)


class SentencePieceIds(tf.Module):
    """Text → (ids, row_splits) with ``FastSentencepieceTokenize`` + the "9," table."""

    def __init__(self, tokenizer) -> None:
        import tensorflow_text as tf_text

        from albert_tf.tokenizers.normalization import check_foldable

        super().__init__()
        if tokenizer.options.get("fold_punctuation", False):
            check_foldable(tokenizer._model_proto)  # folding is a normalisation table here
        self._fast = tf_text.FastSentencepieceTokenizer(composite_sentencepiece_model(tokenizer))
        self._table = tf.constant(digit_comma_table(tokenizer))
        # For joining question parts and options (`LiteRTModule._qa`).
        self.text = CharacterText(_sentencepiece_character_model(tokenizer))

    def __call__(self, texts: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        ragged = self._fast.tokenize(texts)
        values, splits = _ragged_parts(ragged.values, ragged.row_splits)
        if self._table.shape[1] == 1:
            return values, splits
        rows = tf.gather(self._table, values)  # [pieces, k]
        keep = rows >= 0
        counts = tf.reduce_sum(tf.cast(keep, tf.int32), axis=1)
        ends = tf.concat([[0], tf.cumsum(counts)], axis=0)
        return tf.boolean_mask(rows, keep), tf.gather(ends, splits)


# Stand-ins for characters the WordPiece vocabulary lacks (any word holding one
# becomes [UNK], as in the reference): punctuation and CJK ideographs stay words of
# their own, anything else stays part of its word. The first candidate absent from
# the vocabulary is used.
_PUNCTUATION_STAND_INS = "\u2e3b\u2e3a\u2e4f\u2e4e"
_LETTER_STAND_INS = "\u0d89\u0d8a\u0d8b\u0d8c"
# Unlikely ideographs of CJK Extension B, which WordPiece also splits alone.
_CJK_STAND_INS = "\U0002a6d6\U0002a6d5\U0002a6d4"
_SPACE_PIECE = 1  # "▁" in `_character_model`, after <unk>


def _basic_normalized(chars: list[str], lower_case: bool, nfkc: bool = False) -> list[str]:
    """`albert_tf.tokenizers.wordpiece.basic_tokenize`'s steps before the split
    (without the CJK spacing, which FastWordpieceTokenize does), per character."""
    import tensorflow_text as tf_text

    from albert_tf.tokenizers import _text_ops

    texts = _text_ops.transcode_utf8(tf.constant(chars))
    if nfkc:
        texts = tf_text.normalize_utf8(texts, "NFKC")
    if lower_case:
        texts = _text_ops.lower_utf8(texts)
    texts = tf.strings.regex_replace(texts, f"[{_text_ops.bert_removed_class()}]", "")
    texts = tf.strings.regex_replace(texts, f"[{_text_ops.bert_whitespace_class()}]", " ")
    texts = tf_text.normalize_utf8(texts, "NFC")
    if lower_case:
        texts = _text_ops.lower_utf8(texts)
        texts = tf_text.normalize_utf8(texts, "NFD")
        texts = tf.strings.regex_replace(texts, f"[{_text_ops.nonspacing_mark_class()}]", "")
    return [value.decode("utf-8") for value in texts.numpy()]


def _character_model(rules: list[tuple[str, str]], pieces: set[str]) -> bytes:
    """A SentencePiece model with one piece per character of ``pieces`` (plus "▁")
    whose normalisation table is ``rules``: tokenising then detokenising with it
    applies the rules, which is how text is normalised and joined in LiteRT."""
    charsmap = compiled_rules(rules)
    proto = piece_entry("<unk>", 0.0, UNKNOWN) + piece_entry("\u2581", -1.0, NORMAL)
    proto += b"".join(piece_entry(p, -1.0, NORMAL) for p in sorted(pieces - {" ", "\u2581"}))
    unset = varint(-1 & 0xFFFFFFFFFFFFFFFF)  # bos/eos/pad ids: none
    trainer = (
        varint(3 << 3) + varint(1)  # model_type UNIGRAM
        + varint(40 << 3) + varint(0)  # unk_id
        + varint(41 << 3) + unset
        + varint(42 << 3) + unset
        + varint(43 << 3) + unset
    )  # fmt: skip
    spec = (
        length_delimited(1, b"albert_tf_characters")
        + b"".join(charsmap)
        + varint(3 << 3) + varint(0)  # add_dummy_prefix
        + varint(4 << 3) + varint(0)  # remove_extra_whitespaces
        + varint(5 << 3) + varint(1)  # escape_whitespaces
    )  # fmt: skip
    return proto + length_delimited(2, trainer) + length_delimited(3, spec)


def _assigned_characters() -> list[str]:
    # NUL cannot be a key; unassigned and private-use characters are left out
    # (a million rules): they reach the tokenizer unchanged.
    return [
        ch
        for ch in _all_characters()
        if ch != "\x00" and unicodedata.category(ch) not in ("Cn", "Co", "Cs")
    ]


@functools.lru_cache(maxsize=4)
def _wordpiece_character_model(
    vocab: tuple[str, ...], lower_case: bool, nfkc: bool = False
) -> bytes:
    """BERT's basic normalisation as a character model (see `CharacterText`)."""
    from albert_tf.tokenizers import _text_ops

    def is_punctuation(ch: str) -> bool:
        return _text_ops._is_bert_punctuation(ord(ch), unicodedata.category(ch))

    def is_cjk(ch: str) -> bool:
        return any(lo <= ord(ch) <= hi for lo, hi in _text_ops.CJK_RANGES)

    known = set("".join(t[2:] if t.startswith("##") else t for t in vocab))
    punctuation = next(c for c in _PUNCTUATION_STAND_INS if c not in known)
    letter = next(c for c in _LETTER_STAND_INS if c not in known)
    ideograph = next(c for c in _CJK_STAND_INS if c not in known)
    chars = _assigned_characters()
    rules = []
    for ch, text in zip(chars, _basic_normalized(chars, lower_case, nfkc), strict=True):
        out = "".join(
            " "
            if y.isspace()
            else y
            if y in known
            else punctuation
            if is_punctuation(y)
            else ideograph
            if is_cjk(y)
            else letter
            for y in text
        )
        if out != ch:
            rules.append((ch, out))
    return _character_model(rules, known | {punctuation, letter, ideograph})


def _sentencepiece_character_model(tokenizer) -> bytes:
    """ALBERT's normalisation (`composite_sentencepiece_model`'s rules) as a
    character model; characters no piece holds become one stand-in, which the
    SentencePiece model also does not know."""
    options = tokenizer.options
    rules = dict(
        _composite_rules(
            tokenizer._model_proto,
            options["lower_case"],
            options["remove_space"],
            options["keep_accents"],
            options.get("fold_punctuation", False),
        )
    )
    known = set("".join(p.replace(WORD_START, " ") for p in tokenizer.vocabulary))
    letter = next(c for c in _LETTER_STAND_INS if c not in known and c not in rules)

    def mapped(text: str) -> str:
        return "".join(" " if y.isspace() else y if y in known else letter for y in text)

    out_rules = []
    for ch in _assigned_characters():
        out = mapped(rules.get(ch, ch))
        if out != ch:
            out_rules.append((ch, out))
    out_rules += [(k, mapped(v)) for k, v in rules.items() if len(k) > 1]
    return _character_model(out_rules, known | {letter})


def prepend_space(values: tf.Tensor, splits: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """A "▁" piece in front of every row of character ids."""
    rows = tf.shape(splits)[0] - 1
    rowid = tf.reduce_sum(
        tf.cast(tf.range(tf.shape(values)[0])[:, None] >= splits[None, 1:rows], tf.int32),
        axis=1,
    )
    size = tf.expand_dims(tf.shape(values)[0] + rows, 0)
    moved = tf.range(tf.shape(values)[0]) + rowid + 1
    starts = splits[:-1] + tf.range(rows)
    values = tf.scatter_nd(moved[:, None], values, size) + tf.scatter_nd(
        starts[:, None], tf.fill([rows], _SPACE_PIECE), size
    )
    return values, splits + tf.range(rows + 1)


class CharacterText(tf.Module):
    """Normalises and joins text in LiteRT, which has no string ops for either.

    A character model (`_character_model`) tokenises text into one id per
    character of the normalised text (``ids``); ids can then be cut and
    rearranged with numeric ops, and ``strings`` detokenises them back.
    """

    def __init__(self, proto: bytes) -> None:
        import tensorflow_text as tf_text

        super().__init__()
        self._model = tf_text.FastSentencepieceTokenizer(proto)
        # Bytes each piece detokenises to, for cutting one detokenised row apart.
        pieces = tf.range(self._model.vocab_size())[:, None]
        surfaces = self._model.detokenize(tf.RaggedTensor.from_tensor(pieces))
        self._piece_bytes = tf.constant(tf.strings.length(surfaces).numpy().astype(np.int32))

    def ids(self, texts: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        ragged = self._model.tokenize(texts)
        return _ragged_parts(ragged.values, ragged.row_splits)

    def strings(self, values: tf.Tensor, splits: tf.Tensor) -> tf.Tensor:
        """Character ids [(rows)] → string [rows], each with a leading space."""
        from tensorflow_text.python.ops.byte_splitter import gen_byte_splitter
        from tensorflow_text.python.ops.fast_sentencepiece_tokenizer import (
            gen_fast_sentencepiece_tokenizer,
        )

        # The leading space: LiteRT's detokenizer crashes on empty input. It
        # also crashes on more than one row: all rows are detokenised as one
        # and cut at the rows' byte offsets.
        values, splits = prepend_space(values, splits)
        rows = tf.shape(splits)[0] - 1
        joined = gen_fast_sentencepiece_tokenizer.tf_text_fast_sentencepiece_detokenize(
            self._model._converted_model_detokenizer,
            values,
            tf.stack([0, tf.shape(values)[0]]),
        )
        offsets = tf.concat([[0], tf.cumsum(tf.gather(self._piece_bytes, values))], axis=0)
        cut, _ = gen_byte_splitter.tf_text_byte_split_by_offsets(
            joined,
            tf.gather(offsets, splits[:-1]),
            tf.gather(offsets, splits[1:]),
            tf.cast(tf.stack([0, rows]), tf.int64),
        )
        return cut


class WordPieceIds(tf.Module):
    """Text → (ids, row_splits): BERT's basic normalisation, then ``FastWordpieceTokenize``.

    LiteRT has no string op for lower-casing or accent stripping, and its
    ``FastBertNormalize`` also folds compatibility forms (full-width "，" → ","),
    which `basic_tokenize` does only with ``nfkc``; so the normalisation is a
    `CharacterText` (NFKC, per character, first when the tokenizer has ``nfkc``).
    ``FastWordpieceTokenize`` then splits on whitespace, punctuation and CJK
    ideographs and finds the pieces.
    """

    def __init__(self, tokenizer) -> None:
        import tensorflow_text as tf_text

        super().__init__()
        options = tokenizer.options
        if not options["tokenize_chinese_chars"]:
            raise ValueError("the LiteRT export needs tokenize_chinese_chars=True")
        if options.get("nfkc", False) and not options["lower_case"]:
            # Per character, NFKC cannot compose (ｶ + ﾞ → ガ); uncased tokenizers
            # decompose again (NFD) and drop the marks, cased ones keep them.
            raise ValueError("the LiteRT export of an nfkc tokenizer needs lower_case=True")
        vocab = tokenizer.vocabulary
        self.text = CharacterText(
            _wordpiece_character_model(
                tuple(vocab), options["lower_case"], options.get("nfkc", False)
            )
        )
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=vocab,
            suffix_indicator="##",
            # Bytes, not characters: exact for ASCII words (see docs/serving.md).
            max_bytes_per_word=options["max_input_chars_per_word"],
            token_out_type=tf.int32,
            unknown_token=vocab[tokenizer.unk_id],
            no_pretokenization=False,
        )

    def __call__(self, texts: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        normalized = self.text.strings(*self.text.ids(texts))
        ragged = self._wordpiece.tokenize(normalized)
        return _ragged_parts(ragged.values, ragged.row_splits)


def byte_lengths(texts: tf.Tensor) -> tf.Tensor:
    import tensorflow_text as tf_text

    splits = tf_text.ByteSplitter().split(texts).row_splits
    return tf.cast(splits[1:] - splits[:-1], tf.int32)


def split_at_blanks(question: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """question [1] → (its parts between underscores, string [P >= 2]; has a blank).

    A question without a blank gives ``[question, ""]``.
    """
    import tensorflow_text as tf_text
    from tensorflow_text.python.ops.byte_splitter import gen_byte_splitter

    data = tf_text.ByteSplitter().split(question).values  # uint8 [bytes]
    size = tf.shape(data, out_type=tf.int32)[0]
    # int32 first: LiteRT's EQUAL aborts on these uint8 bytes.
    blanks = tf.cast(tf.where(tf.equal(tf.cast(data, tf.int32), _UNDERSCORE))[:, 0], tf.int32)
    has_blank = tf.size(blanks) > 0
    # No blank: one at the very end, so the parts are [question, ""].
    blanks = tf.concat([blanks, [size]], axis=0)[: tf.maximum(tf.size(blanks), 1)]
    starts = tf.concat([[0], blanks + 1], axis=0)
    ends = tf.concat([blanks, [size]], axis=0)
    starts = tf.minimum(starts, size)  # the no-blank case: an empty last part
    splits = tf.cast(tf.stack([0, tf.shape(starts)[0]]), tf.int64)
    parts, _ = gen_byte_splitter.tf_text_byte_split_by_offsets(question, starts, ends, splits)
    return parts, has_blank
