"""Held-out evaluation of a pretraining model: MLM and sentence-task accuracy.

The trainer evaluates its own held-out shards during and after training. The
same measurement on *other* shards is how the paper's Table 5 is read: a model
pretrained with NSP scored on SOP pairs and the reverse (both tasks label a
coherent, in-order pair 0 and a swapped or random one 1, so one head answers
both). `evaluate_pretraining` does that for any saved model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import keras
import tensorflow as tf

from albert_tf.data.pipeline import held_out_dataset
from albert_tf.training.losses import masked_lm_sums, sentence_order_sums, summarize


def sum_over_batches(
    eval_fn: Callable[[object], dict[str, tf.Tensor]],
    batches: Iterable,
    max_batches: int = 0,
) -> dict[str, float]:
    """Adds up ``eval_fn(batch)``'s sums over at most ``max_batches`` (0: all)."""
    totals: dict[str, float] = {}
    for i, batch in enumerate(batches):
        if max_batches and i >= max_batches:
            break
        for k, v in eval_fn(batch).items():
            totals[k] = totals.get(k, 0.0) + float(v)
    return totals


def binomial_stderr(accuracy: float, count: float) -> float:
    """Standard error of an accuracy measured on ``count`` independent items.

    >>> round(binomial_stderr(0.5, 100), 3)
    0.05
    """
    return math.sqrt(accuracy * (1.0 - accuracy) / count)


def with_standard_errors(results: dict[str, float], totals: dict[str, float]) -> dict[str, float]:
    """Adds the binomial standard error of each accuracy and its count."""
    out = dict(results)
    for task, count_key, count_name in (
        ("mlm", "mlm_count", "mlm_predictions"),
        ("sop", "sop_count", "sop_examples"),
    ):
        n = totals.get(count_key, 0.0)
        if n and f"{task}_accuracy" in out:
            p = out[f"{task}_accuracy"]
            out[f"{task}_accuracy_stderr"] = binomial_stderr(p, n)
            out[count_name] = n
    return out


def evaluate_pretraining(
    model: keras.Model,
    eval_files: str,
    *,
    max_seq_length: int,
    max_predictions_per_seq: int | None = None,
    batch_size: int = 64,
    seed: int = 12345,
    max_batches: int = 0,
) -> dict[str, float]:
    """MLM loss/accuracy and sentence-task loss/accuracy of ``model`` on shards.

    Masks are drawn as in training, from ``seed`` (the trainer evaluates with
    its run's seed, 12345 by default, so the same seed scores the same masked
    positions as the run's own ``eval_results.json``).

    Args:
      model: an `AlbertPretrainingModel` (e.g. from `albert_tf.load`).
      eval_files: glob of pretraining shards (SOP, NSP or sentence-task-free).
      max_seq_length, max_predictions_per_seq: as the shards were written.
      batch_size: examples per forward pass; the last batch may be short.
      max_batches: stop after this many batches (0: the whole set).

    Returns:
      ``mlm_loss``, ``mlm_accuracy``, ``sop_loss``, ``sop_accuracy`` (the
      sentence task of the shards, whichever it is), their standard errors,
      and the counts they rest on.

    Example:
        >>> results = evaluate_pretraining(
        ...     albert_tf.load("runs/ablation_en/nsp/final"),
        ...     "runs/ablation_en/sop/data/eval_shards/*.tfrecord",
        ...     max_seq_length=128)                              # doctest: +SKIP
        >>> results["sop_accuracy"]                              # doctest: +SKIP
    """
    dataset = held_out_dataset(
        eval_files,
        batch_size=batch_size,
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        seed=seed,
    )

    @tf.function
    def eval_fn(batch):
        features, labels = batch
        outputs = model(features, training=False)
        sums = masked_lm_sums(outputs["mlm_logits"], labels["mask_ids"], labels["mask_weights"])
        sums.update(sentence_order_sums(outputs["sop_logits"], labels["sentence_order_label"]))
        return sums

    totals = sum_over_batches(eval_fn, dataset, max_batches)
    if not totals:
        raise ValueError(f"The eval data {eval_files} holds no examples.")
    return with_standard_errors(summarize(totals), totals)
