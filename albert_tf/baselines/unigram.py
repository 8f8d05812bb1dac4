"""What a model must beat: the unigram baseline of masked-LM prediction.

A model that ignores context and always predicts the most frequent training
token gets the *unigram accuracy*; scoring every masked token by its training
frequency gives the *unigram cross-entropy*. Both are measured on the same
held-out masked positions the model is evaluated on.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from albert_tf import storage
from albert_tf.data.pipeline import held_out_dataset
from albert_tf.training.evaluation import sum_over_batches


def token_counts(files: str, vocab_size: int, exclude: tuple[int, ...]) -> np.ndarray:
    """Occurrences of every id in pretraining shards (specials zeroed)."""
    counts = np.zeros(vocab_size, np.int64)
    spec = {"token_ids": tf.io.RaggedFeature(tf.int64)}
    dataset = tf.data.TFRecordDataset(storage.glob(files)).batch(1024)
    for batch in dataset.map(lambda s: tf.io.parse_example(s, spec)["token_ids"].flat_values):
        counts += np.bincount(batch.numpy(), minlength=vocab_size)[:vocab_size]
    counts[list(exclude)] = 0
    return counts


def unigram_baseline(
    train_files: str,
    eval_files: str,
    *,
    vocab_size: int,
    special_ids: tuple[int, ...],
    max_seq_length: int,
    max_predictions_per_seq: int | None = None,
    seed: int = 12345,
    max_batches: int = 0,
    batch_size: int = 64,
) -> dict[str, float]:
    """Unigram accuracy and cross-entropy at the held-out masked positions.

    Uses the evaluation's own masks (same files, seed and batch size as
    `PretrainingTrainer.evaluate`), so the figures sit beside the model's.
    """
    counts = token_counts(train_files, vocab_size, special_ids)
    probabilities = (counts + 1) / (counts.sum() + vocab_size)  # add-one smoothing
    mode = int(np.argmax(counts))
    dataset = held_out_dataset(
        eval_files,
        batch_size=batch_size,
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        seed=seed,
    )

    def sums(batch):
        ids = batch[1]["mask_ids"].numpy()
        weights = batch[1]["mask_weights"].numpy()
        return {
            "hits": ((ids == mode) * weights).sum(),
            "nll": (-np.log(probabilities[ids]) * weights).sum(),
            "total": weights.sum(),
        }

    totals = sum_over_batches(sums, dataset, max_batches)
    return {
        "unigram_mlm_accuracy": totals["hits"] / totals["total"],
        "unigram_mlm_loss": totals["nll"] / totals["total"],
        "unigram_mode_id": mode,
    }
