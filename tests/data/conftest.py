"""Shared fixtures for the data tests: a tiny in-graph toy tokenizer.

The toy tokenizer is a real `Tokenizer` (TensorFlow string ops, no mocks): it
splits on whitespace, hashes each lower-cased word to a word-start piece and
adds one continuation piece per further 4 characters (at most two), so
whole-word masking has multi-piece words to respect.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tokenizers.base import Tokenizer

NUM_SPECIAL = 5
NUM_WORD_STARTS = 400
NUM_CONTINUATIONS = 100


class ToyTokenizer(Tokenizer):
    kind = "toy"

    @property
    def vocabulary_size(self) -> int:
        return NUM_SPECIAL + NUM_WORD_STARTS + NUM_CONTINUATIONS

    pad_id = property(lambda self: 0)
    unk_id = property(lambda self: 1)
    cls_id = property(lambda self: 2)
    sep_id = property(lambda self: 3)
    mask_id = property(lambda self: 4)

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        words = tf.strings.split(tf.strings.lower(texts))
        starts = NUM_SPECIAL + tf.strings.to_hash_bucket_fast(words, NUM_WORD_STARTS)
        conts = NUM_SPECIAL + NUM_WORD_STARTS
        c1 = conts + tf.strings.to_hash_bucket_fast(words + "#1", NUM_CONTINUATIONS)
        c2 = conts + tf.strings.to_hash_bucket_fast(words + "#2", NUM_CONTINUATIONS)
        n_cont = tf.minimum((tf.strings.length(words) - 1) // 4, 2)
        pieces = tf.stack([starts, c1, c2], axis=-1)
        keep = tf.expand_dims(n_cont, -1) >= tf.constant([0, 1, 2], tf.int32)
        pieces = tf.ragged.boolean_mask(pieces, keep)
        return tf.cast(pieces.merge_dims(1, 2), tf.int32)

    def detokenize(self, ids):
        raise NotImplementedError

    def id_to_token(self, ids):
        raise NotImplementedError

    def word_start_mask(self) -> np.ndarray:
        mask = np.zeros([self.vocabulary_size], dtype=bool)
        mask[: NUM_SPECIAL + NUM_WORD_STARTS] = True
        return mask

    def save(self, directory) -> None:
        raise NotImplementedError

    @classmethod
    def from_config(cls, directory, config) -> ToyTokenizer:
        raise NotImplementedError


@pytest.fixture(scope="session")
def toy_tokenizer() -> ToyTokenizer:
    return ToyTokenizer()


@pytest.fixture(scope="session")
def spm_dir(tmp_path_factory) -> str:
    """A real SentencePiece tokenizer directory trained on the English sample
    (what worker processes and command-line runs load)."""
    from albert_tf.data import read_documents, sample_path
    from albert_tf.tokenizers import train_sentencepiece

    out = tmp_path_factory.mktemp("spm")
    sentences = [s for d in read_documents(sample_path("en")) for s in d]
    train_sentencepiece(sentences, out, vocab_size=1000)
    return str(out)
