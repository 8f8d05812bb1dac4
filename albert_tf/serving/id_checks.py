"""What the SavedModels check: the packing length at export, the ids of ``score_ids``,
the length of raw-text inputs."""

from __future__ import annotations

import tensorflow as tf


def check_max_seq_length(model, max_seq_length: int) -> None:
    """Refuses to export a packing longer than the model has positions for."""
    limit = model.config.max_position_embeddings
    if max_seq_length > limit:
        raise ValueError(
            f"max_seq_length={max_seq_length} exceeds the model's max_position_embeddings={limit}"
        )


def at_most_chars(texts: tf.Tensor, limit: int, name: str, advice: str = "") -> tf.Operation:
    """An assertion that no string of ``texts`` is longer than ``limit`` characters,
    checked before tokenisation so that a hostile request fails in milliseconds. Its
    error names the input (``name``), the limit and, in the graph as ``<name>_chars``,
    the value; ``advice`` follows. An empty batch passes (its maximum is the lowest
    int32)."""
    longest = tf.reduce_max(tf.strings.length(texts, unit="UTF8_CHAR"))
    return tf.debugging.assert_less_equal(
        tf.identity(longest, name=f"{name}_chars"),
        limit,
        message=f"{name} length exceeds the serving limit of {limit:,} characters "
        f"(x below is the value){advice}",
    )


def checked_ids(
    token_ids: tf.Tensor,
    segment_ids: tf.Tensor,
    padding_mask: tf.Tensor,
    *,
    max_seq_length: int,
    vocab_size: int,
    extra_checks: tuple = (),
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The three id tensors, released only once their shapes agree, the sequences fit
    ``max_seq_length`` and every id is in the vocabulary (``InvalidArgumentError``
    naming the problem otherwise). ``extra_checks``: the task's own assertions."""
    checks = [
        tf.debugging.assert_equal(
            tf.shape(segment_ids),
            tf.shape(token_ids),
            message="segment_ids and token_ids must have the same shape",
        ),
        tf.debugging.assert_equal(
            tf.shape(padding_mask),
            tf.shape(token_ids),
            message="padding_mask and token_ids must have the same shape",
        ),
        *extra_checks,
        tf.debugging.assert_less_equal(
            tf.shape(token_ids)[-1],
            max_seq_length,
            message="sequences are longer than the exported max_seq_length",
        ),
        # An empty batch's maximum is the lowest int32, which passes.
        tf.debugging.assert_less(
            tf.reduce_max(token_ids), vocab_size, message="token_ids out of the vocabulary"
        ),
        tf.debugging.assert_non_negative(token_ids, message="negative token_ids"),
    ]
    with tf.control_dependencies(checks):
        return tf.identity(token_ids), tf.identity(segment_ids), tf.identity(padding_mask)
