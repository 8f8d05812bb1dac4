"""`OverlapScorer`: the length-normalised, rarity-weighted overlap of each option with
its context, computed in TensorFlow so that a SavedModel (and TF Serving) can add it
to the model's score.

It is the ``idf_normalized`` baseline of `albert_tf.baselines.overlap`, written again
with string and segment ops: each unit an option shares with the context (CJK
characters one by one, other text by lower-cased word) counts as often as it occurs
in both, weighted by its inverse document frequency over the training documents,
and the sum is divided by (√(the option's units) + 1), so that a long option does
not win by sharing more characters by chance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import tensorflow as tf

# The scripts whose characters are units one by one (as `albert_tf.baselines.overlap`).
_CJK = r"\x{3040}-\x{30ff}\x{3400}-\x{4dbf}\x{4e00}-\x{9fff}\x{f900}-\x{faff}\x{ac00}-\x{d7af}"
# Joins an item's (or option's) index to a unit; no unit holds it (units are letters
# and digits).
_JOIN = "\x1f"


def idf_weight(documents: int, document_frequency: int) -> float:
    """ln((N + 1) / (df + 1)) + 1: a unit in every document weighs about 1, one never
    seen ln(N + 1) + 1.

    >>> round(idf_weight(9, 0), 4), round(idf_weight(9, 9), 4)
    (3.3026, 1.0)
    """
    return math.log((documents + 1) / (document_frequency + 1)) + 1.0


class OverlapScorer(tf.Module):
    """Overlap score of every option with its context, float32 [B, C], in-graph.

    Args:
        documents: how many training documents the frequencies were counted on (N).
        document_frequency: unit → the number of those documents holding it.

    Example:
        >>> scorer = OverlapScorer(3, {"猫": 1, "的": 3})
        >>> scorer(tf.constant(["我的猫"]), tf.constant([["猫的", "狗", ""]])).numpy().round(4)
        array([[1.1155, 0.    , 0.    ]], dtype=float32)
    """

    def __init__(self, documents: int, document_frequency: Mapping[str, int]):
        super().__init__(name="overlap_scorer")
        if documents < 1:
            raise ValueError(f"documents must be at least 1, got {documents}")
        too_many = [u for u, n in document_frequency.items() if not 0 <= n <= documents]
        if too_many:
            raise ValueError(
                f"document frequencies must lie in [0, {documents}]: {too_many[:5]} do not"
            )
        self.documents = int(documents)
        units = sorted(document_frequency)
        weights = [idf_weight(documents, document_frequency[u]) for u in units]
        self._idf = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(units or [""], tf.string),
                tf.constant(weights or [idf_weight(documents, 0)], tf.float32),
            ),
            default_value=idf_weight(documents, 0),
        )

    @staticmethod
    def units(texts: tf.Tensor) -> tf.RaggedTensor:
        """The units of each text, in order, repeats kept: ragged [..., (units)].

        >>> [u.decode() for u in OverlapScorer.units(tf.constant("AI 算法, the_AI!")).numpy()]
        ['ai', '算', '法', 'the', 'ai']
        """
        # Everything but letters, digits and CJK characters separates units (underscores
        # too); each CJK character (its scripts' punctuation included) stands alone.
        spaced = tf.strings.regex_replace(texts, f"[^\\p{{L}}\\p{{N}}{_CJK}]+", " ")
        spaced = tf.strings.regex_replace(spaced, f"([{_CJK}])", r" \1 ")
        # Lower-cased once cut, as the Python baseline does: "İ" lower-cased is "i" and
        # a combining dot, which would otherwise cut the word.
        return tf.ragged.map_flat_values(
            tf.strings.lower, tf.strings.split(spaced), encoding="utf-8"
        )

    def __call__(self, contexts: tf.Tensor, options: tf.Tensor) -> tf.Tensor:
        """``contexts`` tf.string [B] (context and question joined), ``options``
        tf.string [B, C] → float32 [B, C]; an empty option scores 0."""
        contexts = tf.convert_to_tensor(contexts, tf.string)
        options = tf.convert_to_tensor(options, tf.string)
        shape = tf.shape(options)
        context_units = self.units(contexts)  # [B, (n)]
        option_units = self.units(tf.reshape(options, [-1]))  # [B·C, (m)]
        option_rows = tf.cast(option_units.value_rowids(), tf.int32)
        item_of_unit = option_rows // shape[1]

        def keyed(index: tf.Tensor, units: tf.Tensor) -> tf.Tensor:
            return tf.strings.join([tf.strings.as_string(index), units], separator=_JOIN)

        # The same unit of one item, in its context or any option, gets one id.
        context_keys = keyed(
            tf.cast(context_units.value_rowids(), tf.int32), context_units.flat_values
        )
        option_keys = keyed(item_of_unit, option_units.flat_values)
        in_context = tf.size(context_keys)
        joint = tf.unique(tf.concat([context_keys, option_keys], 0))
        ids = joint.idx
        context_count = tf.math.unsorted_segment_sum(
            tf.ones([in_context], tf.float32), ids[:in_context], tf.size(joint.y)
        )
        # Each distinct unit of each option: how often the option has it, how often its
        # context does, and its weight.
        distinct = tf.unique(keyed(option_rows, option_units.flat_values))
        num_distinct = tf.size(distinct.y)
        option_count = tf.math.unsorted_segment_sum(
            tf.ones_like(distinct.idx, tf.float32), distinct.idx, num_distinct
        )
        first = tf.math.unsorted_segment_min(
            tf.range(tf.size(distinct.idx)), distinct.idx, num_distinct
        )
        in_its_context = tf.gather(context_count, tf.gather(ids[in_context:], first))
        shared = tf.minimum(option_count, in_its_context)
        weighted = shared * self._idf.lookup(tf.gather(option_units.flat_values, first))
        rows = shape[0] * shape[1]
        total = tf.math.unsorted_segment_sum(weighted, tf.gather(option_rows, first), rows)
        length = tf.cast(option_units.row_lengths(), tf.float32)
        return tf.reshape(total / (tf.sqrt(length) + 1.0), shape)
