"""Dynamic whole-word n-gram masking, in TensorFlow ops (runs in `tf.data.map`).

Masks are drawn afresh each time an example passes through the pipeline (a
new epoch gives a new per-example seed), never frozen into files.

The procedure for one sequence of ``length`` real tokens:

1. **Words.** A candidate token is a real token that is not special. A word is
   a candidate that starts a word (`Tokenizer.word_start_mask`), or follows a
   non-candidate, plus the continuation pieces after it.
2. **Spans.** The words are tiled left to right into consecutive spans whose
   lengths ``n ∈ {1, 2, 3}`` (whole words) are drawn independently with
   ``p(n) ∝ 1/n`` — 6/11, 3/11, 2/11 ≈ 0.545 / 0.273 / 0.182 (the ALBERT
   paper's n-gram masking). The last span may be cut short by the end of the
   sequence.
3. **Budget.** ``num_to_predict = min(max_predictions_per_seq,
   max(1, round(masked_lm_prob · length)))``, ``length`` counting [CLS] and
   [SEP] as the reference implementation does.
4. **Selection.** Spans are visited in a random order and taken while their
   tokens fit the budget; one more pass over the remaining spans fills what
   is left with spans that still fit. The budget is never exceeded, spans
   never overlap and are never partially masked.

   A hard budget skews the *masked* spans slightly toward short ones (a long
   span is likelier not to fit; the reference implementation shortens such
   spans instead, with the same effect). Measured over random sequences with
   ~1.25 pieces per word: 0.559 / 0.269 / 0.173 at 512 tokens and
   0.595 / 0.254 / 0.151 at 128 tokens, against 0.545 / 0.273 / 0.182 drawn.
5. **Replacement.** Each selected token independently becomes [MASK] with
   probability 0.8, a uniformly random non-special token with 0.1, and stays
   unchanged with 0.1.

All randomness comes from stateless ops keyed by a per-example seed, so the
same seed gives the same masks on any machine and in any batch layout.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from albert_tf import storage

#: p(n) ∝ 1/n for n = 1..3.
NGRAM_PROBS = tuple((1.0 / n) / sum(1.0 / k for k in (1, 2, 3)) for n in (1, 2, 3))

_VOCAB_FILE = "masking_vocab.json"


@dataclasses.dataclass(frozen=True)
class MaskingVocab:
    """What masking needs to know about a vocabulary.

    Build it from a tokenizer (`from_tokenizer`), or from the ``vocab.json``
    `albert_tf.data.shards.write_pretraining_data` saves next to the
    shards (`load`).
    """

    vocabulary_size: int
    mask_id: int
    special_ids: tuple[int, ...]
    #: bool [vocabulary_size]: True where a piece begins a word.
    word_start_mask: np.ndarray
    #: id that pads sequences (not masked; must be in special_ids).
    pad_id: int = 0

    def __post_init__(self) -> None:
        wsm = np.asarray(self.word_start_mask, dtype=bool)
        if wsm.shape != (self.vocabulary_size,):
            raise ValueError(
                f"word_start_mask has shape {wsm.shape}, expected ({self.vocabulary_size},)"
            )
        object.__setattr__(self, "word_start_mask", wsm)
        object.__setattr__(self, "special_ids", tuple(int(i) for i in self.special_ids))
        for required in (self.mask_id, self.pad_id):
            if required not in self.special_ids:
                object.__setattr__(self, "special_ids", (*self.special_ids, int(required)))

    @classmethod
    def from_tokenizer(cls, tokenizer) -> MaskingVocab:
        """From any `albert_tf.tokenizers.base.Tokenizer`."""
        return cls(
            vocabulary_size=int(tokenizer.vocabulary_size),
            mask_id=int(tokenizer.mask_id),
            special_ids=tuple(tokenizer.special_ids),
            word_start_mask=np.asarray(tokenizer.word_start_mask(), dtype=bool),
            pad_id=int(tokenizer.pad_id),
        )

    def save(self, directory: str) -> None:
        """Writes ``masking_vocab.json`` atomically (a reader never sees half of it)."""
        storage.write_json_atomic(
            os.path.join(directory, _VOCAB_FILE),
            {
                "vocabulary_size": self.vocabulary_size,
                "mask_id": self.mask_id,
                "special_ids": list(self.special_ids),
                "pad_id": self.pad_id,
                # Continuation pieces are usually the minority: store those.
                "continuation_ids": np.flatnonzero(~self.word_start_mask).tolist(),
            },
        )

    @classmethod
    def load(cls, directory: str) -> MaskingVocab:
        with storage.open_file(os.path.join(directory, _VOCAB_FILE), "r") as fh:
            d = json.load(fh)
        wsm = np.ones([d["vocabulary_size"]], dtype=bool)
        wsm[np.asarray(d["continuation_ids"], dtype=np.int64)] = False
        return cls(
            d["vocabulary_size"], d["mask_id"], tuple(d["special_ids"]), wsm, d.get("pad_id", 0)
        )

    def non_special_ids(self) -> np.ndarray:
        special = np.zeros([self.vocabulary_size], dtype=bool)
        special[list(self.special_ids)] = True
        return np.flatnonzero(~special).astype(np.int32)


def default_max_predictions(max_seq_length: int, masked_lm_prob: float = 0.15) -> int:
    """round(masked_lm_prob · max_seq_length): 19 for 128, 77 for 512.

    >>> default_max_predictions(128), default_max_predictions(512)
    (19, 77)
    """
    return max(1, int(round(masked_lm_prob * max_seq_length)))


class Masker:
    """Masks one padded sequence; a callable for `tf.data.Dataset.map`.

    >>> import numpy as np, tensorflow as tf
    >>> vocab = MaskingVocab(10, mask_id=4, special_ids=(0, 1, 2, 3, 4),
    ...                      word_start_mask=np.ones(10, bool))
    >>> masker = Masker(vocab, max_seq_length=8, max_predictions_per_seq=2)
    >>> out = masker(tf.constant([2, 5, 6, 7, 8, 9, 3, 0]), tf.constant(7),
    ...              seed=tf.constant([1, 2], tf.int64))
    >>> int(tf.reduce_sum(out["mask_weights"]))   # round(0.15 * 7) = 1
    1
    """

    def __init__(
        self,
        vocab: MaskingVocab,
        *,
        max_seq_length: int,
        max_predictions_per_seq: int | None = None,
        masked_lm_prob: float = 0.15,
        ngram_probs: Sequence[float] = NGRAM_PROBS,
        mask_token_prob: float = 0.8,
        random_token_prob: float = 0.1,
        fill_passes: int = 1,
    ) -> None:
        if max_predictions_per_seq is None:
            max_predictions_per_seq = default_max_predictions(max_seq_length, masked_lm_prob)
        if not 0 < max_predictions_per_seq <= max_seq_length:
            raise ValueError(
                f"max_predictions_per_seq={max_predictions_per_seq} must be in "
                f"(0, max_seq_length={max_seq_length}]"
            )
        self.vocab = vocab
        self.max_seq_length = int(max_seq_length)
        self.max_predictions_per_seq = int(max_predictions_per_seq)
        self.masked_lm_prob = float(masked_lm_prob)
        probs = np.asarray(ngram_probs, dtype=np.float64)
        # Upper cumulative bounds of n = 1 .. len-1 (the last is implied).
        self._ngram_cdf = tf.constant(np.cumsum(probs / probs.sum())[:-1], tf.float32)
        self.mask_token_prob = float(mask_token_prob)
        self.random_token_prob = float(random_token_prob)
        self.fill_passes = int(fill_passes)
        special = np.zeros([vocab.vocabulary_size], dtype=bool)
        special[list(vocab.special_ids)] = True
        self._special = tf.constant(special)
        self._word_start = tf.constant(vocab.word_start_mask)
        self._non_special = tf.constant(vocab.non_special_ids())

    def random_draws(self, seed: tf.Tensor) -> dict[str, tf.Tensor]:
        """All random numbers one example's masking uses, from its own seed.

        Drawn per example (in the per-example `map`), so an example's mask
        does not depend on which batch it lands in; the masking itself then
        runs vectorised over whole batches (`mask_batch`). One uniform draw
        of [4, S] serves everything: it is the cheapest stateless op.
        """
        s = self.max_seq_length
        u = tf.random.stateless_uniform([4, s], seed)
        # n-gram length by inverse CDF: n = 1 + #(cumulative probs below u).
        ngram = 1 + tf.reduce_sum(tf.cast(u[0][:, None] >= self._ngram_cdf, tf.int32), axis=1)
        num_non_special = int(self._non_special.shape[0])
        random_index = tf.minimum(tf.cast(u[3] * num_non_special, tf.int32), num_non_special - 1)
        return {
            "ngram": ngram,
            "order_key": u[1],
            "replace_u": u[2],
            "random_index": random_index,
        }

    def __call__(
        self,
        token_ids: tf.Tensor,
        length: tf.Tensor,
        seed: tf.Tensor,
        *,
        return_spans: bool = False,
    ) -> dict[str, tf.Tensor]:
        """Masks one sequence (int32 [max_seq_length], padded after ``length``).

        Args:
          token_ids: the unmasked sequence, padded to ``max_seq_length``.
          length: number of real tokens (scalar int32).
          seed: int64 [2] stateless seed, unique per example and epoch.
          return_spans: also return ``span_lengths`` (int32 [max_seq_length]:
            the length in words of each selected span, 0 elsewhere) — for tests.

        Returns:
          ``token_ids`` (masked input), ``mask_positions``, ``mask_ids``
          (original ids at those positions) and ``mask_weights``, the last
          three padded to ``max_predictions_per_seq``.
        """
        draws = {k: v[None] for k, v in self.random_draws(seed).items()}
        out = self.mask_batch(
            tf.expand_dims(token_ids, 0),
            tf.reshape(length, [1]),
            draws,
            return_spans=return_spans,
        )
        return {k: v[0] for k, v in out.items()}

    def mask_batch(
        self,
        token_ids: tf.Tensor,
        lengths: tf.Tensor,
        draws: dict[str, tf.Tensor],
        *,
        word_continues: tf.Tensor | None = None,
        return_spans: bool = False,
    ) -> dict[str, tf.Tensor]:
        """`__call__` for a batch: ``token_ids`` [B, S], ``lengths`` [B] and
        the per-example `random_draws` stacked to [B, S].

        ``word_continues`` (int/bool [B, S], optional): 1 where a piece the
        vocabulary calls a word start continues a segmenter word instead
        (Chinese whole-word masking, `albert_tf.data.chinese_wwm`).
        """
        s = self.max_seq_length
        p = self.max_predictions_per_seq
        token_ids = tf.cast(token_ids, tf.int32)
        token_ids.shape.assert_is_compatible_with([None, s])
        lengths = tf.cast(lengths, tf.int32)
        b = tf.shape(token_ids)[0]
        pos = tf.broadcast_to(tf.range(s, dtype=tf.int32), tf.shape(token_ids))
        # Segment ids offset per row, so one segment op serves the batch.
        row_offset = tf.range(b)[:, None] * (s + 1)

        def per_row_sum(values: tf.Tensor, segments: tf.Tensor) -> tf.Tensor:
            summed = tf.math.unsorted_segment_sum(values, segments + row_offset, b * (s + 1))
            return tf.reshape(summed, [b, s + 1])[:, :s]

        # 1. Words over candidate tokens.
        cand = (pos < lengths[:, None]) & ~tf.gather(self._special, token_ids)
        prev_cand = tf.pad(cand[:, :-1], [[0, 0], [1, 0]])
        starts_word = tf.gather(self._word_start, token_ids)
        if word_continues is not None:
            starts_word &= ~tf.cast(word_continues, tf.bool)
        word_start = cand & (starts_word | ~prev_cand)
        word_id = tf.cumsum(tf.cast(word_start, tf.int32), axis=1) - 1  # valid where cand
        num_words = tf.reduce_sum(tf.cast(word_start, tf.int32), axis=1, keepdims=True)
        word_tokens = per_row_sum(tf.cast(cand, tf.int32), tf.where(cand, word_id, s))

        # 2. Tile words into spans of n ~ p(n) whole words (at most s spans).
        n = draws["ngram"]
        span_start = tf.cumsum(n, axis=1, exclusive=True)
        span_valid = span_start < num_words
        span_words = tf.clip_by_value(num_words - span_start, 0, n)
        # Word k belongs to the last span starting at or before it.
        word_span = tf.searchsorted(span_start, pos, side="right") - 1
        word_span = tf.where(pos < num_words, word_span, s)
        span_tokens = per_row_sum(word_tokens, word_span)

        # 3. Budget.
        budget = tf.round(self.masked_lm_prob * tf.cast(lengths, tf.float32))
        budget = tf.minimum(tf.maximum(tf.cast(budget, tf.int32), 1), p)[:, None]

        # 4. Random order; take spans while they fit, then fill passes.
        keys = tf.where(span_valid, draws["order_key"], 2.0)
        order = tf.argsort(keys, axis=1, stable=True)
        cost = tf.gather(span_tokens, order, batch_dims=1)
        valid = tf.gather(span_valid, order, batch_dims=1)
        taken = valid & (tf.cumsum(cost, axis=1) <= budget)
        for _ in range(self.fill_passes):
            left = budget - tf.reduce_sum(tf.where(taken, cost, 0), axis=1, keepdims=True)
            fits = valid & ~taken & (cost <= left)
            taken |= fits & (tf.cumsum(tf.where(fits, cost, 0), axis=1) <= left)
        # Back from random order to span order (inverse permutation).
        span_taken = tf.gather(taken, tf.argsort(order, axis=1), batch_dims=1)

        # Tokens of taken spans.
        span_of_token = tf.gather(word_span, tf.clip_by_value(word_id, 0, s - 1), batch_dims=1)
        span_taken_ext = tf.pad(span_taken, [[0, 0], [0, 1]])
        selected = cand & tf.gather(span_taken_ext, tf.where(cand, span_of_token, s), batch_dims=1)

        # 5. 80% [MASK] / 10% random / 10% unchanged.
        u = draws["replace_u"]
        random_ids = tf.gather(self._non_special, draws["random_index"])
        replaced = tf.where(
            u < self.mask_token_prob,
            self.vocab.mask_id,
            tf.where(u < self.mask_token_prob + self.random_token_prob, random_ids, token_ids),
        )
        masked_ids = tf.where(selected, replaced, token_ids)

        # Selected positions first, ascending, padded to p with 0.
        sort_key = tf.where(selected, pos, s + pos)
        _, first = tf.math.top_k(-sort_key, k=p, sorted=True)
        num_selected = tf.reduce_sum(tf.cast(selected, tf.int32), axis=1, keepdims=True)
        real = tf.range(p)[None, :] < num_selected
        out = {
            "token_ids": masked_ids,
            "mask_positions": tf.where(real, first, 0),
            "mask_ids": tf.where(real, tf.gather(token_ids, first, batch_dims=1), 0),
            "mask_weights": tf.cast(real, tf.float32),
        }
        if return_spans:
            out["span_lengths"] = tf.where(span_taken & span_valid, span_words, 0)
        return out
