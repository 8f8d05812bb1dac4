"""English ALBERT tokenisation: a SentencePiece model behind `Tokenizer`.

Reproduces, in-graph, what google-research/albert's ``FullTokenizer`` with an
``spm_model_file`` and Hugging Face's slow ``AlbertTokenizer`` do:

1. ALBERT's text normalisation (`albert_tf.tokenizers.normalization`: lower-casing,
   whitespace, quotes, accents and, optionally, typographic punctuation);
2. SentencePiece encoding (the model applies its own nmt_nfkc normaliser);
3. the "digit-comma" rule: a piece such as ``▁9,`` is re-encoded as
   ``▁9`` + ``,`` so numbers like "1,000" are not glued to their comma.

Only tensorflow / tensorflow-text ops are used, so a SavedModel that calls
:meth:`SentencePieceTokenizer.tokenize` needs nothing but those two at serving
time. The model proto lives in the graph as a constant of the tf-text
SentencePiece resource. Training a model: `albert_tf.tokenizers.sentencepiece_training`.

Example:
    >>> tok = SentencePieceTokenizer.from_file("spiece.model")  # doctest: +SKIP
    >>> tok.tokenize(tf.constant(["Hello, World!"])).to_list()  # doctest: +SKIP
    [[2340, 15, 126, 187]]
"""

from __future__ import annotations

import functools
import os
import sys
import unicodedata
import uuid
from typing import Any

import numpy as np
import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops.sentencepiece_tokenizer import (
    gen_sentencepiece_tokenizer as _gen_sentencepiece,
)

from albert_tf import storage
from albert_tf.tokenizers import _text_ops
from albert_tf.tokenizers.base import Tokenizer, write_config
from albert_tf.tokenizers.normalization import normalize_chars, normalize_text

MODEL_FILENAME = "spiece.model"
WORD_START = "▁"
_sentencepiece_op = (
    _gen_sentencepiece.sentencepiece_op
)  # U+2581, SentencePiece's word-boundary marker


@functools.cache
def _control_characters() -> tuple[str, ...]:
    """Control and format characters (categories Cc and Cf)."""
    return tuple(
        chr(cp) for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) in ("Cc", "Cf")
    )


class SentencePieceTokenizer(Tokenizer):
    """ALBERT's SentencePiece tokenizer as a ``tf.Module``.

    Args:
      model_proto: the serialized SentencePiece ``ModelProto`` (the bytes of a
        ``.model`` file). It must define ``[CLS]``, ``[SEP]``, ``[MASK]`` and
        pad/unk pieces.
      lower_case, remove_space, keep_accents: see :func:`normalize_text`.
      split_digit_comma: apply the reference tokenizers' "9," re-split rule.
      fold_punctuation: see :func:`normalize_text`. Off by default, so an
        imported Google/Hugging Face model tokenises as ``AlbertTokenizer``
        does; models trained here (`train_sentencepiece`) turn it on and record
        it in ``tokenizer.json``.

    Example:
        >>> tok = SentencePieceTokenizer.from_file("spiece.model")  # doctest: +SKIP
        >>> tok.cls_id, tok.sep_id, tok.mask_id  # doctest: +SKIP
        (2, 3, 4)
    """

    kind = "sentencepiece"
    option_names = (
        "lower_case",
        "remove_space",
        "keep_accents",
        "split_digit_comma",
        "fold_punctuation",
    )

    def __init__(
        self,
        model_proto: bytes,
        *,
        lower_case: bool = True,
        remove_space: bool = True,
        keep_accents: bool = False,
        split_digit_comma: bool = True,
        fold_punctuation: bool = False,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        processor = spm.SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(model_proto)
        except Exception as err:  # sentencepiece raises a bare RuntimeError/OSError
            raise ValueError(f"not a valid SentencePiece model: {err}") from err
        self._pieces = [processor.IdToPiece(i) for i in range(processor.GetPieceSize())]
        self._control = np.array(
            [processor.IsControl(i) or processor.IsUnknown(i) for i in range(len(self._pieces))]
        )
        self._pad_id = processor.pad_id()
        self._unk_id = processor.unk_id()
        ids = {}
        for token in ("[CLS]", "[SEP]", "[MASK]"):
            piece_id = processor.PieceToId(token)
            if piece_id == self._unk_id and token != self._pieces[self._unk_id]:
                raise ValueError(
                    f"SentencePiece model has no {token} piece; train it with "
                    "control_symbols=[CLS],[SEP],[MASK] (see train_tokenizer)"
                )
            ids[token] = piece_id
        if self._pad_id < 0:
            raise ValueError("SentencePiece model has no pad piece (train with pad_id=0)")
        self._cls_id, self._sep_id, self._mask_id = (
            ids["[CLS]"],
            ids["[SEP]"],
            ids["[MASK]"],
        )
        self._model_proto = model_proto
        self.lower_case = lower_case
        self.remove_space = remove_space
        self.keep_accents = keep_accents
        self.split_digit_comma = split_digit_comma
        self.fold_punctuation = fold_punctuation
        # One tf-text resource serves both the piece strings (for the
        # digit-comma rule) and the piece→id lookup.
        self._sp = tf_text.SentencepieceTokenizer(
            model=model_proto, out_type=tf.string, nbest_size=0, alpha=1.0
        )
        self._sp._model_resource = _SentencepieceResource(model_proto)

    # -- construction ------------------------------------------------------

    @classmethod
    def from_file(cls, model_file: str | os.PathLike[str], **options) -> SentencePieceTokenizer:
        """Reads a ``.model`` file (e.g. ``spiece.model`` / ``30k-clean.model``)."""
        path = os.fspath(model_file)
        if not storage.isfile(path):
            raise FileNotFoundError(f"SentencePiece model file not found: {path}")
        return cls(storage.read_bytes(path), **options)

    @classmethod
    def from_config(cls, directory: str, config: dict[str, Any]) -> SentencePieceTokenizer:
        return cls.from_file(
            os.path.join(directory, config.get("model_file", MODEL_FILENAME)),
            **cls.options_in(config),
        )

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Writes ``spiece.model`` and ``tokenizer.json`` into ``directory``."""
        out = os.fspath(directory)
        storage.makedirs(out)
        storage.write_bytes(os.path.join(out, MODEL_FILENAME), self._model_proto)
        write_config(out, self, model_file=MODEL_FILENAME)

    # -- ids ---------------------------------------------------------------

    @property
    def vocabulary_size(self) -> int:
        return len(self._pieces)

    @property
    def vocabulary(self) -> list[str]:
        """All pieces, in id order (Python list; not part of the graph)."""
        return list(self._pieces)

    def word_start_mask(self) -> np.ndarray:
        starts = np.array([p.startswith(WORD_START) for p in self._pieces])
        starts |= self._control
        starts[list(self.special_ids)] = True
        return starts

    def punctuation_mask(self) -> np.ndarray:
        """bool [vocabulary_size]: pieces that are punctuation only (besides "▁"),
        by BERT's definition of punctuation."""
        return self._punctuation.copy()

    @functools.cached_property
    def _punctuation(self) -> np.ndarray:
        # Once per tokenizer: every `word_starts` call (a batch of texts) needs it.
        marks = [p.removeprefix(WORD_START) for p in self._pieces]
        return np.array(
            [
                bool(m) and not control
                and all(_text_ops.is_bert_punctuation(c) for c in m)
                for m, control in zip(marks, self._control, strict=True)
            ]
        )  # fmt: skip

    # -- in-graph ----------------------------------------------------------

    def word_starts(self, ids: tf.RaggedTensor) -> tf.RaggedTensor:
        """`Tokenizer.word_starts`, with punctuation split off: a punctuation piece
        and the piece after it begin words, as BERT's basic tokenizer splits
        punctuation, so that a tagger's "York" ends before the comma of "York,".
        (Whole-word masking keeps `word_start_mask`, the reference's words.)

        Example:
            >>> tok.id_to_token(ids).to_list()  # doctest: +SKIP
            [[b'\xe2\x96\x81new', b'\xe2\x96\x81york', b',', b'\xe2\x96\x81then']]
            >>> tok.word_starts(ids).to_list()  # doctest: +SKIP
            [[True, True, True, True]]
        """
        starts = super().word_starts(ids)
        punctuation = tf.gather(tf.constant(self._punctuation), ids.flat_values)
        position = tf.ragged.range(ids.row_lengths()).flat_values
        after = tf.concat([[False], punctuation[:-1]], 0) & (position > 0)
        return starts.with_flat_values(starts.flat_values | punctuation | after)

    def tokenize_to_pieces(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """tf.string [batch] → tf.string ragged [batch, (pieces)]; in-graph."""
        pieces = self._sp.tokenize(normalize_text(texts, **self._normalization))
        if self.split_digit_comma:
            pieces = self._split_digit_comma(pieces)
        return pieces

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """tf.string [batch] → int32 ragged [batch, (pieces)]; in-graph.

        Example:
            >>> tok.tokenize(tf.constant(["1,000 apples"])).to_list()  # doctest: +SKIP
            [[27, 15, 4000, 17, 5, 20, 21, 2]]
        """
        return tf.cast(self._sp.string_to_id(self.tokenize_to_pieces(texts)), tf.int32)

    @property
    def has_offsets(self) -> bool:
        return True

    def tokenize_with_offsets(
        self, texts: tf.Tensor
    ) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
        """`tokenize`, and where each piece came from: int32 ragged
        ``(ids, starts, ends)`` [batch, (pieces)], ``starts``/``ends`` in Unicode
        code points of the original text, end exclusive, through every
        normalisation (lower-casing, whitespace runs, doubled quotes, accents,
        typography folding, the model's own NFKC). A piece's span leaves out the
        whitespace its "▁" stands for (so a word's first piece starts at its
        first letter) and the control characters the model's normaliser deletes
        or turns into spaces (zero-width spaces);
        a bare "▁" piece is an empty span where the next piece starts. After the
        digit-comma re-split, the comma is the piece's last character. In-graph.

        Example:
            >>> tok = SentencePieceTokenizer.from_file("spiece.model")  # doctest: +SKIP
            >>> texts = tf.constant(["Hi  Café"])  # doctest: +SKIP
            >>> ids, starts, ends = tok.tokenize_with_offsets(texts)  # doctest: +SKIP
            >>> starts.to_list(), ends.to_list()  # "▁hi", "▁caf", "e"  # doctest: +SKIP
            ([[0, 4, 7]], [[2, 7, 8]])
        """
        normalized = normalize_chars(texts, **self._normalization)
        joined = tf.strings.reduce_join(normalized, axis=1)
        pieces, begin, end = self._sp.tokenize_with_offsets(joined)
        begin, end = self._reader_spans(pieces, begin, end, joined)
        if self.split_digit_comma:
            pieces, begin, end = self._split_digit_comma(pieces, (begin, end, joined))
            # The digits' pieces hold what the normaliser deleted, as any piece.
            begin, end = self._reader_spans(pieces, begin, end, joined)
        starts, ends = _text_ops.char_spans(
            _text_ops.byte_owners(normalized),
            pieces.value_rowids(),
            begin.flat_values,
            end.flat_values,
        )
        ids = tf.cast(self._sp.string_to_id(pieces), tf.int32)
        return ids, ids.with_flat_values(starts), ids.with_flat_values(ends)

    def _reader_spans(
        self, pieces: tf.RaggedTensor, begin: tf.RaggedTensor, end: tf.RaggedTensor, joined
    ) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
        """SentencePiece's byte spans of ``pieces`` in the texts ``joined``, as a
        reader counts them: SentencePiece starts a "▁" piece's span at the
        space(s) before it and ends a span after the characters its normaliser
        deleted."""
        surface = tf.strings.substr(
            tf.gather(joined, pieces.value_rowids()),
            begin.flat_values,
            end.flat_values - begin.flat_values,
        )
        skipped = f"[{_text_ops.python_whitespace_class()}{self._left_out}]"
        head = tf.strings.length(surface) - tf.strings.length(
            tf.strings.regex_replace(surface, f"^{skipped}+", "")
        )
        tail = tf.strings.length(surface) - tf.strings.length(
            tf.strings.regex_replace(surface, f"{skipped}+$", "")
        )
        # A bare "▁" stands for whitespace only (a zero-width space included):
        # empty, where the next piece starts.
        bare = tf.equal(pieces.flat_values, WORD_START)
        first = tf.where(bare, end.flat_values, begin.flat_values + tf.cast(head, tf.int64))
        last = tf.where(
            bare, end.flat_values, tf.maximum(end.flat_values - tf.cast(tail, tf.int64), first)
        )
        return begin.with_flat_values(first), end.with_flat_values(last)

    @property
    def _normalization(self) -> dict[str, bool]:
        """`normalize_text`'s options, as this tokenizer has them."""
        return {
            "lower_case": self.lower_case,
            "remove_space": self.remove_space,
            "keep_accents": self.keep_accents,
            "fold_punctuation": self.fold_punctuation,
        }

    @functools.cached_property
    def _left_out(self) -> str:
        """A regex class body: the control and format characters a piece's span leaves
        out besides whitespace, those the model's normaliser deletes (SentencePiece
        counts them into the span of the piece before) or turns into a space (zero-width
        spaces, a byte-order mark). Asked of the model on first use: only offsets need it."""
        processor = spm.SentencePieceProcessor()
        processor.LoadFromSerializedProto(self._model_proto)
        gone = {processor.Normalize("aa"), processor.Normalize("a a")}
        return "".join(
            f"\\x{{{ord(c):x}}}"
            for c in _control_characters()
            if processor.Normalize(f"a{c}a") in gone
        )

    def _split_digit_comma(
        self,
        pieces: tf.RaggedTensor,
        spans: tuple[tf.RaggedTensor, tf.RaggedTensor, tf.Tensor] | None = None,
    ):
        """Re-encodes every piece that ends in a digit followed by "," as
        SentencePiece(piece without "," and "▁") + [","], dropping the new
        leading "▁" when the original piece did not start a word.

        With ``spans``, the pieces' byte spans ``(begin, end)`` (whitespace left
        out) in the texts ``joined`` they came from, also returns the new pieces'
        spans: the comma is the piece's last character; the digits' spans are
        those SentencePiece gives when it encodes the piece's own text without
        the comma (the same pieces, unless a normaliser changed that text; then
        they are laid byte by byte from the piece's first byte)."""
        flat = pieces.flat_values
        matches = tf.strings.regex_full_match(flat, f"(?s).*[{_text_ops.digit_class()}],")
        where = tf.where(matches)[:, 0]
        matched = tf.gather(flat, where)
        heads = tf.strings.regex_replace(matched, f",$|{WORD_START}", "")
        starts_word = tf.strings.regex_full_match(matched, f"{WORD_START}(?s).*")
        sub, sub_begin, sub_end = self._sp.tokenize_with_offsets(heads)  # [n_matched, (k)]
        sub, keep = _continuing(sub, starts_word)
        n_matched = tf.shape(matched, out_type=tf.int64)[0]
        comma = tf.RaggedTensor.from_tensor(tf.fill(tf.stack([n_matched, 1]), ","))

        # Rows 0..n-1 are the original pieces, rows n.. the replacements;
        # pick the replacement row wherever a piece matched.
        n = tf.shape(flat, out_type=tf.int64)[0]
        order = tf.tensor_scatter_nd_update(
            tf.range(n), tf.expand_dims(where, 1), n + tf.range(n_matched)
        )

        def replace(originals: tf.Tensor, replacements: tf.RaggedTensor) -> tf.RaggedTensor:
            singles = tf.RaggedTensor.from_tensor(tf.expand_dims(originals, 1))
            rows = tf.gather(tf.concat([singles, replacements], axis=0), order)
            return pieces.with_flat_values(rows).merge_dims(1, 2)

        replaced = replace(flat, tf.concat([sub, comma], axis=1))
        if spans is None:
            return replaced
        begin, end, joined = spans
        first, last = tf.gather(begin.flat_values, where), tf.gather(end.flat_values, where)
        surface = tf.strings.substr(
            tf.gather(joined, tf.gather(pieces.value_rowids(), where)), first, last - first
        )
        surface = tf.strings.regex_replace(surface, "(?s).$", "")  # its comma
        again, again_begin, again_end = self._sp.tokenize_with_offsets(surface)
        again, again_keep = _continuing(again, starts_word)
        # Rows of different widths cannot be compared padded: compare them joined.
        same = (again.row_lengths() == sub.row_lengths()) & tf.equal(
            tf.strings.reduce_join(again, axis=1, separator="\x01"),
            tf.strings.reduce_join(sub, axis=1, separator="\x01"),
        )
        from_surface = tf.gather(same, sub.value_rowids())

        def relative(by_surface: tf.RaggedTensor, by_piece: tf.RaggedTensor) -> tf.Tensor:
            # Rows with the same pieces have the same structure: swap their values in.
            values = tf.ragged.boolean_mask(by_piece, keep).flat_values
            swapped = tf.boolean_mask(
                tf.ragged.boolean_mask(by_surface, again_keep).flat_values,
                tf.gather(same, again.value_rowids()),
            )
            return tf.tensor_scatter_nd_update(values, tf.where(from_surface), swapped)

        rows = sub.value_rowids()
        lo, hi = tf.gather(first, rows), tf.gather(last - 1, rows)
        digits_begin = tf.clip_by_value(relative(again_begin, sub_begin) + lo, lo, hi)
        digits_end = tf.clip_by_value(relative(again_end, sub_end) + lo, lo, hi)

        def with_comma(digits: tf.Tensor, comma_span: tf.Tensor) -> tf.RaggedTensor:
            digits = sub.with_flat_values(digits)
            return tf.concat([digits, tf.RaggedTensor.from_tensor(comma_span[:, None])], axis=1)

        return (
            replaced,
            replace(begin.flat_values, with_comma(digits_begin, last - 1)),
            replace(end.flat_values, with_comma(digits_end, last)),
        )

    def detokenize(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
        """int ids [batch, (pieces)] → tf.string [batch]; padding is dropped
        and control pieces ([CLS], [SEP], [MASK]) decode to nothing."""
        ids = _as_ragged(ids)
        ids = tf.ragged.boolean_mask(ids, tf.not_equal(ids, self.pad_id))
        return self._sp.detokenize(tf.cast(ids, tf.int32))

    def id_to_token(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        return self._sp.id_to_string(tf.cast(ids, tf.int32))


def _continuing(
    sub: tf.RaggedTensor, starts_word: tf.Tensor
) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """Re-encoded pieces [n, (k)] without the word marker SentencePiece puts in
    front when the piece they replace (row n) did not start a word (``starts_word``);
    and the mask of the pieces kept (a bare marker so stripped is dropped)."""
    first_in_row = tf.ragged.range(sub.row_lengths()).flat_values == 0
    continues = tf.logical_not(tf.gather(starts_word, sub.value_rowids()))
    values = sub.flat_values
    strip = first_in_row & continues & tf.strings.regex_full_match(values, f"{WORD_START}(?s).*")
    values = tf.where(strip, tf.strings.regex_replace(values, f"^{WORD_START}", ""), values)
    keep = sub.with_flat_values(tf.logical_not(strip & tf.equal(values, "")))
    return tf.ragged.boolean_mask(sub.with_flat_values(values), keep), keep


class _SentencepieceResource(tf.saved_model.experimental.TrackableResource):
    """The tf-text SentencePiece model resource under a name of its own.

    tf-text's resource has no shared name, so eager tokenizers built from the
    same model bytes share one kernel-owned resource: once the first is
    garbage-collected the others fail with "Resource ... does not exist".
    A unique shared name gives every tokenizer its own resource.
    """

    def __init__(self, model_proto: bytes) -> None:
        super().__init__()
        self._model = model_proto
        self._shared_name = f"albert_tf_sentencepiece_{uuid.uuid4().hex}"
        _ = self.resource_handle  # creates the resource now

    def _create_resource(self) -> tf.Tensor:
        return _sentencepiece_op(model=self._model, shared_name=self._shared_name)


def _as_ragged(ids: tf.Tensor | tf.RaggedTensor) -> tf.RaggedTensor:
    if isinstance(ids, tf.RaggedTensor):
        return ids
    return tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
