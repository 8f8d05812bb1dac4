"""MLM and sentence-order losses, as sums, so replicas can be added exactly.

Each function returns per-replica *sums* (loss, correct predictions, count);
the trainer divides by the count all-reduced over replicas. That makes a run
on N replicas compute the same loss as one replica with the same global
batch, which a per-replica mean would not (replicas hold different numbers
of masked tokens).
"""

from __future__ import annotations

import tensorflow as tf


def masked_lm_sums(mlm_logits, mask_ids, mask_weights) -> dict[str, tf.Tensor]:
    """Sums over the masked positions.

    Args:
        mlm_logits: float32 [B, P, V] at the masked positions.
        mask_ids: int32 [B, P] original ids.
        mask_weights: float32 [B, P], 1 for real predictions, 0 for padding.
    """
    weights = tf.cast(mask_weights, tf.float32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(mask_ids, tf.int32), logits=tf.cast(mlm_logits, tf.float32)
    )  # [B, P]
    correct = tf.cast(
        tf.equal(tf.argmax(mlm_logits, axis=-1, output_type=tf.int32), mask_ids), tf.float32
    )
    return {
        "mlm_loss_sum": tf.reduce_sum(losses * weights),
        "mlm_correct": tf.reduce_sum(correct * weights),
        "mlm_count": tf.reduce_sum(weights),
    }


def sentence_order_sums(sop_logits, labels) -> dict[str, tf.Tensor]:
    """Sums over the examples of the 2-way sentence task (SOP or NSP)."""
    labels = tf.cast(labels, tf.int32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=tf.cast(sop_logits, tf.float32)
    )
    correct = tf.equal(tf.argmax(sop_logits, axis=-1, output_type=tf.int32), labels)
    return {
        "sop_loss_sum": tf.reduce_sum(losses),
        "sop_correct": tf.reduce_sum(tf.cast(correct, tf.float32)),
        "sop_count": tf.cast(tf.size(labels), tf.float32),
    }


def summarize(sums: dict[str, float]) -> dict[str, float]:
    """Means and accuracies from accumulated sums."""
    out = {}
    if sums.get("mlm_count"):
        out["mlm_loss"] = sums["mlm_loss_sum"] / sums["mlm_count"]
        out["mlm_accuracy"] = sums["mlm_correct"] / sums["mlm_count"]
    if sums.get("sop_count"):
        out["sop_loss"] = sums["sop_loss_sum"] / sums["sop_count"]
        out["sop_accuracy"] = sums["sop_correct"] / sums["sop_count"]
    return out
