"""Chinese ALBERT tokenisation: BERT's basic tokenizer + WordPiece.

google-research's and brightmart's Chinese ALBERT models use BERT's
``vocab.txt`` and the uncased BERT tokenizer. This module reproduces Hugging
Face's ``BertTokenizer(do_lower_case=True)`` in-graph:

0. optionally (``nfkc=True``, the default of vocabularies trained here) fold the text
   with Unicode NFKC first: full-width letters, digits and punctuation (ＡＩ, １９９８,
   ．) become ASCII and compatibility forms (①, ㎏, ﬁ) their plain spelling, so text
   typed half-width and text printed full-width meet the same pieces;
1. lower-case one character at a time;
2. delete NUL, U+FFFD and control/format/unassigned characters (category C*
   except tab, newline, carriage return); turn other whitespace into " ";
3. surround every CJK ideograph with spaces, so each is its own word;
4. NFC; lower-case; NFD and drop non-spacing marks (accent stripping);
5. split on whitespace, and split off each punctuation character;
6. words longer than ``max_input_chars_per_word`` characters become [UNK];
   the rest are split greedily, longest match first, into vocabulary pieces
   ("##" marks a piece that continues a word); a word with no split is [UNK].

The vocabulary sits in a lookup table initialised from the ``vocab.txt``
asset, so a SavedModel that calls :meth:`WordPieceTokenizer.tokenize` carries
its own copy of the file.

Example:
    >>> tok = WordPieceTokenizer("vocab.txt")  # doctest: +SKIP
    >>> tok.id_to_token(tok.tokenize(tf.constant(["我爱ALBERT"]))).to_list()  # doctest: +SKIP
    [[b'\\xe6\\x88\\x91', b'\\xe7\\x88\\xb1', b'al', b'##bert']]
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf import storage
from albert_tf.tokenizers import _text_ops
from albert_tf.tokenizers.base import Tokenizer, write_config

VOCAB_FILENAME = "vocab.txt"
CONTINUATION = "##"
REQUIRED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def basic_tokenize(
    texts: tf.Tensor,
    *,
    lower_case: bool = True,
    tokenize_chinese_chars: bool = True,
    nfkc: bool = False,
) -> tf.RaggedTensor:
    """BERT's basic (pre-WordPiece) tokenisation, in-graph.

    Args:
      texts: tf.string [batch].

    Returns:
      tf.string ragged [batch, (words)].

    Example:
        >>> basic_tokenize(tf.constant(["Héllo,世界!"])).to_list()
        [[b'hello', b',', b'\\xe4\\xb8\\x96', b'\\xe7\\x95\\x8c', b'!']]
        >>> basic_tokenize(tf.constant(["ＡＩ１９９８"]), nfkc=True).to_list()
        [[b'ai1998']]
    """
    texts = _text_ops.transcode_utf8(tf.convert_to_tensor(texts, tf.string))
    texts = _normalize(texts, lower_case, tokenize_chinese_chars, nfkc)
    return tf_text.regex_split(texts, *_word_split_patterns())


def _normalize(
    texts: tf.Tensor, lower_case: bool, tokenize_chinese_chars: bool, nfkc: bool = False
) -> tf.Tensor:
    """BERT's normalisation of each string of ``texts`` (whole texts, or single
    characters for `normalize_chars`), after NFKC when ``nfkc``."""
    if nfkc:
        # First, so that what NFKC yields (ASCII punctuation, spaces, CJK
        # ideographs from compatibility forms) is split like typed text.
        texts = tf_text.normalize_utf8(texts, "NFKC")
    if lower_case:
        texts = _text_ops.lower_utf8(texts)
    texts = tf.strings.regex_replace(texts, f"[{_text_ops.bert_removed_class()}]", "")
    texts = tf.strings.regex_replace(texts, f"[{_text_ops.bert_whitespace_class()}]", " ")
    if tokenize_chinese_chars:
        texts = tf.strings.regex_replace(texts, f"([{_text_ops.cjk_class()}])", r" \1 ")
    texts = tf_text.normalize_utf8(texts, "NFC")
    if lower_case:
        texts = _text_ops.lower_utf8(texts)
        texts = tf_text.normalize_utf8(texts, "NFD")
        texts = tf.strings.regex_replace(texts, f"[{_text_ops.nonspacing_mark_class()}]", "")
    return texts


def _word_split_patterns() -> tuple[str, str]:
    """`regex_split`'s delimiter and kept-delimiter patterns: whitespace runs split
    words, each punctuation character splits and is kept as a word of its own."""
    punct = _text_ops.bert_punctuation_class()
    space = _text_ops.python_whitespace_class()
    return f"[{space}]+|[{punct}]", f"[{punct}]"


def normalize_chars(
    chars: tf.RaggedTensor,
    *,
    lower_case: bool = True,
    tokenize_chinese_chars: bool = True,
    nfkc: bool = False,
) -> tf.RaggedTensor:
    """`basic_tokenize`'s normalisation applied to each character on its own:
    tf.string ragged [batch, (chars)] of single characters → what each becomes
    ("" when removed, " x " for a CJK ideograph, the lower-cased and
    accent-stripped form otherwise). Joined, they are the text `basic_tokenize`
    splits; kept apart, they say which character each byte came from.

    Per character is what BERT's Python tokenizer does too: NFD then dropping
    the non-spacing marks gives the same result character by character as on
    the whole text, since the marks a decomposition reorders are all dropped;
    NFKC, per character,
    differs from NFKC of the whole text only where it composes a base with
    its marks, and those marks are dropped too.

    Example:
        >>> chars = tf.strings.unicode_split(tf.constant(["Ég世"]), "UTF-8")
        >>> normalize_chars(chars).to_list()
        [[b'e', b'g', b' \xe4\xb8\x96 ']]
    """
    return chars.with_flat_values(
        _normalize(chars.flat_values, lower_case, tokenize_chinese_chars, nfkc)
    )


def _same_file(a: str, b: str) -> bool:
    if storage.is_remote(a) or storage.is_remote(b):
        return a == b
    return os.path.exists(a) and os.path.samefile(a, b)


def read_vocab(vocab_file: str | os.PathLike[str]) -> list[str]:
    """Reads and validates a BERT ``vocab.txt`` (one token a line).

    Raises:
      FileNotFoundError: no such file.
      ValueError: a required special token is missing, a token repeats, or
        the file uses \\r line endings (TensorFlow's table would keep the \\r).
    """
    path = os.fspath(vocab_file)
    if not storage.isfile(path):
        raise FileNotFoundError(f"WordPiece vocab file not found: {path}")
    data = storage.read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not valid UTF-8: {err}") from err
    if "\r" in text:
        raise ValueError(f"{path} has \\r line endings; convert it to \\n line endings")
    tokens = text.split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()  # the final newline ends the last line
    missing = [t for t in REQUIRED_TOKENS if t not in tokens]
    if missing:
        raise ValueError(f"{path} lacks the special token(s) {', '.join(missing)}")
    seen: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token in seen:
            raise ValueError(
                f"{path}: token {token!r} appears on lines {seen[token] + 1} and {index + 1}"
            )
        seen[token] = index
    return tokens


class WordPieceTokenizer(Tokenizer):
    """BERT/Chinese-ALBERT WordPiece tokenizer as a ``tf.Module``.

    Args:
      vocab_file: a BERT ``vocab.txt`` containing [PAD], [UNK], [CLS], [SEP]
        and [MASK]. Keep the file in place while the tokenizer is in use; a
        SavedModel copies it into its assets.
      lower_case: uncased model (lower-case and strip accents).
      tokenize_chinese_chars: split CJK ideographs into single characters.
      max_input_chars_per_word: longer words become [UNK].
      nfkc: fold the text with Unicode NFKC before BERT's normalisation
        (full-width → ASCII, compatibility forms → plain). Off by default, so an
        imported Google/Hugging Face vocabulary tokenises as ``BertTokenizer``
        does; vocabularies trained here (`train_wordpiece`) turn it on and
        record it in ``tokenizer.json``.

    Example:
        >>> tok = WordPieceTokenizer("vocab.txt")  # doctest: +SKIP
        >>> tok.tokenize(tf.constant(["模型"])).to_list()  # doctest: +SKIP
        [[3563, 1798]]
    """

    kind = "wordpiece"
    option_names = ("lower_case", "tokenize_chinese_chars", "max_input_chars_per_word", "nfkc")

    def __init__(
        self,
        vocab_file: str | os.PathLike[str],
        *,
        lower_case: bool = True,
        tokenize_chinese_chars: bool = True,
        max_input_chars_per_word: int = 100,
        nfkc: bool = False,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self._vocab = read_vocab(vocab_file)
        # TensorFlow's lookup tables read the file themselves, from a bucket too.
        path = os.fspath(vocab_file)
        self._vocab_file = path if storage.is_remote(path) else str(Path(path).resolve())
        self.lower_case = lower_case
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.max_input_chars_per_word = max_input_chars_per_word
        self.nfkc = nfkc
        index = {token: i for i, token in enumerate(self._vocab)}
        self._pad_id, self._unk_id, self._cls_id, self._sep_id, self._mask_id = (
            index[t] for t in REQUIRED_TOKENS
        )
        self._token_to_id = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                self._vocab_file,
                key_dtype=tf.string,
                key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
                value_dtype=tf.int64,
                value_index=tf.lookup.TextFileIndex.LINE_NUMBER,
            ),
            default_value=self._unk_id,
            # A shared table is named after its file: an export would carry the path
            # of the machine that made it. Anonymous tables carry no name.
            experimental_is_anonymous=True,
        )
        self._id_to_token = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                self._vocab_file,
                key_dtype=tf.int64,
                key_index=tf.lookup.TextFileIndex.LINE_NUMBER,
                value_dtype=tf.string,
                value_index=tf.lookup.TextFileIndex.WHOLE_LINE,
            ),
            default_value="[UNK]",
            experimental_is_anonymous=True,
        )
        # Words are at most max_input_chars_per_word characters here (longer
        # ones are replaced by [UNK] first), i.e. at most 4x as many bytes.
        self._wordpiece = tf_text.WordpieceTokenizer(
            self._token_to_id,
            suffix_indicator=CONTINUATION,
            max_bytes_per_word=4 * max_input_chars_per_word + 4,
            token_out_type=tf.int64,
            unknown_token="[UNK]",
        )

    # -- construction ------------------------------------------------------

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Writes ``vocab.txt`` and ``tokenizer.json`` into ``directory``."""
        out = os.fspath(directory)
        storage.makedirs(out)
        target = os.path.join(out, VOCAB_FILENAME)
        if not _same_file(target, self._vocab_file):
            storage.copy(self._vocab_file, target)
        write_config(out, self, vocab_file=VOCAB_FILENAME)

    @classmethod
    def from_config(cls, directory: str, config: dict[str, Any]) -> WordPieceTokenizer:
        return cls(
            os.path.join(directory, config.get("vocab_file", VOCAB_FILENAME)),
            **cls.options_in(config),
        )

    # -- ids ---------------------------------------------------------------

    @property
    def vocabulary_size(self) -> int:
        return len(self._vocab)

    @property
    def vocabulary(self) -> list[str]:
        """All tokens, in id order (Python list; not part of the graph)."""
        return list(self._vocab)

    def word_start_mask(self) -> np.ndarray:
        starts = np.array([not t.startswith(CONTINUATION) for t in self._vocab])
        starts[list(self.special_ids)] = True
        return starts

    # -- in-graph ----------------------------------------------------------

    def tokenize_to_words(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """tf.string [batch] → tf.string ragged [batch, (words)]: the basic
        tokenizer's output, with over-long words already replaced by [UNK]."""
        words = basic_tokenize(
            texts,
            lower_case=self.lower_case,
            tokenize_chinese_chars=self.tokenize_chinese_chars,
            nfkc=self.nfkc,
        )
        flat = words.flat_values
        too_long = tf.strings.length(flat, unit="UTF8_CHAR") > self.max_input_chars_per_word
        return words.with_flat_values(tf.where(too_long, "[UNK]", flat))

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """tf.string [batch] → int32 ragged [batch, (pieces)]; in-graph."""
        pieces = self._wordpiece.tokenize(self.tokenize_to_words(texts))
        return tf.cast(pieces.merge_dims(1, 2), tf.int32)

    @property
    def has_offsets(self) -> bool:
        return self.lower_case  # cased offsets: see tokenize_with_offsets

    def tokenize_with_offsets(
        self, texts: tf.Tensor
    ) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
        """`tokenize`, and where each piece came from: int32 ragged
        ``(ids, starts, ends)`` [batch, (pieces)], ``starts``/``ends`` in Unicode
        code points of the original text, end exclusive, through every
        normalisation (NFKC folding, lower-casing, accent stripping, removed
        characters, Chinese character spacing). A piece that continues a word ("##…")
        starts where its characters start; a word too long for WordPiece is one
        [UNK] spanning the word. Invalid UTF-8 counts one replacement character
        per bad sequence, as `tokenize` reads it. In-graph. Uncased vocabularies
        only (``lower_case=True``, as Chinese BERT/ALBERT's): a cased one raises
        NotImplementedError.

        Example:
            >>> tok = WordPieceTokenizer("vocab.txt")  # doctest: +SKIP
            >>> texts = tf.constant(["我爱ALBERT"])  # doctest: +SKIP
            >>> ids, starts, ends = tok.tokenize_with_offsets(texts)  # doctest: +SKIP
            >>> starts.to_list(), ends.to_list()  # doctest: +SKIP
            ([[0, 1, 2, 4]], [[1, 2, 4, 8]])
        """
        if not self.lower_case:
            # NFC composes a base and its marks across characters, which a
            # per-character map cannot follow; uncased vocabularies strip the marks.
            raise NotImplementedError(
                "tokenize_with_offsets needs an uncased vocabulary (lower_case=True); "
                "cased WordPiece offsets are not implemented"
            )
        texts = _text_ops.transcode_utf8(tf.convert_to_tensor(texts, tf.string))
        chars = tf.strings.unicode_split(texts, "UTF-8")
        normalized = normalize_chars(
            chars,
            lower_case=self.lower_case,
            tokenize_chinese_chars=self.tokenize_chinese_chars,
            nfkc=self.nfkc,
        )
        owners = _text_ops.byte_owners(normalized)
        joined = tf.strings.reduce_join(normalized, axis=1)

        words, word_begin, word_end = tf_text.regex_split_with_offsets(
            joined, *_word_split_patterns()
        )
        flat_words = words.flat_values
        too_long = tf.strings.length(flat_words, unit="UTF8_CHAR") > self.max_input_chars_per_word
        words = words.with_flat_values(tf.where(too_long, "[UNK]", flat_words))
        ids, piece_begin, piece_end = self._wordpiece.tokenize_with_offsets(words)
        # A word replaced by [UNK] is one piece spanning the whole word.
        word_bytes = word_end.flat_values - word_begin.flat_values
        long_piece = tf.repeat(too_long, ids.values.row_lengths())
        piece_word_bytes = tf.repeat(word_bytes, ids.values.row_lengths())
        begin = tf.where(
            long_piece, tf.zeros_like(piece_begin.flat_values), piece_begin.flat_values
        )
        end = tf.where(long_piece, piece_word_bytes, piece_end.flat_values)
        # Bytes of the word, then of the joined text.
        word_of_piece = ids.values.value_rowids()
        word_begin = tf.gather(word_begin.flat_values, word_of_piece)
        starts, ends = _text_ops.char_spans(
            owners,
            tf.gather(words.value_rowids(), word_of_piece),
            word_begin + begin,
            word_begin + end,
        )
        ids = tf.cast(ids.merge_dims(1, 2), tf.int32)
        return ids, ids.with_flat_values(starts), ids.with_flat_values(ends)

    def detokenize(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
        """int ids [batch, (pieces)] → tf.string [batch]; padding dropped,
        "##" pieces glued to the piece before (as HF's decode does)."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.ragged.boolean_mask(ids, tf.not_equal(ids, self.pad_id))
        tokens = self.id_to_token(ids)
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        return tf.strings.regex_replace(text, " ##", "")

    def id_to_token(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        ids = tf.cast(ids, tf.int64)
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self._id_to_token.lookup(ids.flat_values))
        return self._id_to_token.lookup(ids)


def special_vocab_head(num_unused: int = 99) -> list[str]:
    """BERT's reserved block: [PAD], [unused1..n], [UNK], [CLS], [SEP], [MASK]."""
    unused = [f"[unused{i}]" for i in range(1, num_unused + 1)]
    return ["[PAD]", *unused, "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def ascii_reserve(lower_case: bool = True) -> list[str]:
    """ASCII digits, letters (lower-case only for an uncased vocabulary) and
    punctuation, each alone and, for digits and letters, as a "##" continuation:
    kept in every vocabulary trained here, as Google's Chinese vocabulary keeps
    them, so typed Latin text and numbers are never [UNK] however rare they
    were in the training text.

    >>> reserve = ascii_reserve()
    >>> len(reserve), reserve[:3], "##z" in reserve, "A" in reserve
    (104, ['0', '1', '2'], True, False)
    """
    import string

    alnum = string.digits + (string.ascii_lowercase if lower_case else string.ascii_letters)
    return [*alnum, *string.punctuation, *(CONTINUATION + c for c in alnum)]


_COUNT_BATCH = 2048


def count_words(
    sentences: Iterable[str],
    *,
    lower_case: bool = True,
    tokenize_chinese_chars: bool = True,
    nfkc: bool = False,
    progress: Callable[[int], None] | None = None,
) -> collections.Counter[str]:
    """Counts the basic tokenizer's words (the very graph ops used at
    tokenisation time), in batches."""
    counts: collections.Counter[str] = collections.Counter()
    seen = 0

    def flush(batch: list[str]) -> None:
        words = basic_tokenize(
            tf.constant(batch),
            lower_case=lower_case,
            tokenize_chinese_chars=tokenize_chinese_chars,
            nfkc=nfkc,
        )
        counts.update(w.decode("utf-8") for w in words.flat_values.numpy())

    batch: list[str] = []
    for sentence in sentences:
        batch.append(sentence)
        if len(batch) == _COUNT_BATCH:
            flush(batch)
            seen += len(batch)
            batch = []
            if progress is not None:
                progress(seen)
    if batch:
        flush(batch)
        seen += len(batch)
    if progress is not None:
        progress(seen)
    return counts


def build_wordpiece_vocab(
    word_counts: collections.Counter[str] | dict[str, int],
    *,
    vocab_size: int = 21128,
    num_unused: int = 99,
    extra_reserved: Sequence[str] = (),
    min_count: int = 2,
    max_unique_chars: int = 20000,
    max_token_length: int = 50,
) -> list[str]:
    """Learns a BERT-style WordPiece vocabulary from word counts.

    Uses tensorflow-text's WordPiece learner (frequency-threshold search,
    every seen character kept both alone and as "##c"). The result starts
    with :func:`special_vocab_head` then ``extra_reserved``; a learned token
    that repeats a reserved one is dropped.

    Raises:
      ValueError: no words, or ``vocab_size`` not larger than the reserved
        block.

    Example:
        >>> vocab = build_wordpiece_vocab({"hello": 5, "help": 3}, vocab_size=120)
        >>> vocab[0], vocab[100:104], "##l" in vocab
        ('[PAD]', ['[UNK]', '[CLS]', '[SEP]', '[MASK]'], True)
    """
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib

    counts = {w: c for w, c in word_counts.items() if w}
    if not counts:
        raise ValueError("training corpus is empty: no words to build a vocabulary from")
    reserved = special_vocab_head(num_unused) + list(extra_reserved)
    if vocab_size <= len(reserved):
        raise ValueError(
            f"vocab_size {vocab_size} leaves no room after {len(reserved)} reserved tokens"
        )
    vocab = wordpiece_tokenizer_learner_lib.learn(
        counts,
        vocab_size=vocab_size,
        reserved_tokens=reserved,
        lower_thresh=min_count,
        max_unique_chars=max_unique_chars,
        max_token_length=max_token_length,
        include_joiner_token=True,
        joiner=CONTINUATION,
    )
    vocab = list(dict.fromkeys(vocab))  # the learner may learn a reserved token again
    return vocab[:vocab_size]


def train_wordpiece(
    sentences: Iterable[str],
    output_dir: str | os.PathLike[str],
    *,
    vocab_size: int = 21128,
    lower_case: bool = True,
    tokenize_chinese_chars: bool = True,
    nfkc: bool = True,
    reserve_ascii: bool = True,
    num_unused: int = 99,
    min_count: int = 2,
    max_unique_chars: int = 20000,
    progress: Callable[[int], None] | None = None,
) -> WordPieceTokenizer:
    """Counts words, learns a vocab, writes ``vocab.txt`` + ``tokenizer.json``.

    ``nfkc`` folds the text before counting and at every later tokenisation (it
    is recorded in ``tokenizer.json``); ``reserve_ascii`` keeps `ascii_reserve`.

    Example:
        >>> tok = train_wordpiece(lines, "/tmp/wp", vocab_size=2000)  # doctest: +SKIP
    """
    counts = count_words(
        sentences,
        lower_case=lower_case,
        tokenize_chinese_chars=tokenize_chinese_chars,
        nfkc=nfkc,
        progress=progress,
    )
    vocab = build_wordpiece_vocab(
        counts,
        vocab_size=vocab_size,
        num_unused=num_unused,
        extra_reserved=ascii_reserve(lower_case) if reserve_ascii else (),
        min_count=min_count,
        max_unique_chars=max_unique_chars,
    )
    out = os.fspath(output_dir)
    storage.makedirs(out)
    vocab_file = os.path.join(out, VOCAB_FILENAME)
    storage.write_bytes(vocab_file, ("\n".join(vocab) + "\n").encode("utf-8"))
    tokenizer = WordPieceTokenizer(
        vocab_file,
        lower_case=lower_case,
        tokenize_chinese_chars=tokenize_chinese_chars,
        nfkc=nfkc,
    )
    tokenizer.save(out)
    return tokenizer
