"""Large requests scored in length buckets: the same outputs, less padding.

A request is packed to its longest sequence. From `FROM_SEQUENCES` sequences on,
the serving modules sort them by length, cut them into `BUCKETS` groups and pad
each group only to its own longest. ALBERT scores every sequence on its own
(attention never crosses sequences, the padding is masked), so the outputs are
those of one padded batch up to float rounding. On 32 parable items of 169-297
pieces a quarter of the padded positions is skipped (bench/README.md,
"Serving"). Fewer sequences run as one batch: four calls would cost more than
the padding they save.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

BUCKETS = 4
FROM_SEQUENCES = 32
#: What the export records in ``assets.extra/albert_tf.json``.
RULE = {"buckets": BUCKETS, "from_sequences": FROM_SEQUENCES}

Scorer = Callable[[dict[str, tf.Tensor]], tf.Tensor]


def score(call: Scorer, packed: dict[str, tf.Tensor]) -> tf.Tensor:
    """``call(packed)`` for packed ids ``[N, S]`` (``padding_mask`` among them,
    real pieces first): one call, or `in_buckets` from `FROM_SEQUENCES` on."""
    count = tf.shape(packed["padding_mask"])[0]
    # One traced function for all five call sites (four buckets, one batch): a
    # SavedModel stores its graph once and calls it, instead of five inlined copies
    # of the encoder in the branches of the conds.
    shared = tf.function(
        call,
        input_signature=[{k: tf.TensorSpec([None, None], v.dtype) for k, v in packed.items()}],
        autograph=False,
    )
    return tf.cond(
        count >= FROM_SEQUENCES, lambda: in_buckets(shared, packed), lambda: shared(packed)
    )


def in_buckets(call: Scorer, packed: dict[str, tf.Tensor]) -> tf.Tensor:
    """``call(packed)`` [N, ...] assembled from `BUCKETS` calls on rows of similar
    length, each cut to its longest row (N ≥ `BUCKETS`).

    Example:
        >>> ids = tf.constant([[5, 6, 0], [7, 0, 0], [8, 9, 4], [3, 0, 0]])
        >>> def width(packed):  # the width each row was scored at
        ...     shape = tf.shape(packed["token_ids"])
        ...     return tf.fill(shape[:1], shape[1])
        >>> in_buckets(width, {"token_ids": ids, "padding_mask": tf.sign(ids)}).numpy()
        array([2, 1, 3, 1], dtype=int32)
    """
    lengths = tf.reduce_sum(tf.cast(packed["padding_mask"] > 0, tf.int32), axis=-1)  # [N]
    order = tf.argsort(lengths, stable=True)
    count = tf.shape(order)[0]
    parts = []
    for i in range(BUCKETS):
        rows = order[count * i // BUCKETS : count * (i + 1) // BUCKETS]
        # Real pieces come first, so the columns past the bucket's longest row are
        # padding in every row. An all-padding row keeps one column.
        width = tf.maximum(tf.reduce_max(tf.gather(lengths, rows)), 1)
        parts.append(call({k: tf.gather(v, rows)[:, :width] for k, v in packed.items()}))
    scores = tf.concat(parts, axis=0)  # in `order`
    return tf.scatter_nd(order[:, None], scores, tf.concat([[count], tf.shape(scores)[1:]], 0))
