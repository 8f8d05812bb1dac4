"""Tokenizers: SentencePiece (English ALBERT) and WordPiece (Chinese ALBERT),
both in-graph behind :class:`~albert_tf.tokenizers.base.Tokenizer`.

Training text comes from the one corpus reader, `albert_tf.data.iter_sentences`
(the data layer imports tokenizers, never the other way round)."""

from albert_tf.tokenizers.base import SPECIAL_TOKENS, Tokenizer, load_tokenizer
from albert_tf.tokenizers.normalization import normalize_text
from albert_tf.tokenizers.offsets import char_slices, check_offsets, transcode_utf8
from albert_tf.tokenizers.sentencepiece import SentencePieceTokenizer
from albert_tf.tokenizers.sentencepiece_training import train_sentencepiece
from albert_tf.tokenizers.wordpiece import (
    WordPieceTokenizer,
    basic_tokenize,
    build_wordpiece_vocab,
    read_vocab,
    train_wordpiece,
)

__all__ = [
    "SPECIAL_TOKENS",
    "SentencePieceTokenizer",
    "Tokenizer",
    "WordPieceTokenizer",
    "basic_tokenize",
    "build_wordpiece_vocab",
    "char_slices",
    "check_offsets",
    "load_tokenizer",
    "normalize_text",
    "read_vocab",
    "train_sentencepiece",
    "train_wordpiece",
    "transcode_utf8",
]
