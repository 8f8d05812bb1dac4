"""Fine-tuning `AlbertTextClassifier`, as google-research/albert's ``run_classifier``.

Classes: cross-entropy over the labels' softmax; the best checkpoint by dev
accuracy, macro-F1 or MCC (``metric``). One score (``num_labels=1``, STS-B):
mean squared error; the best checkpoint by Pearson or Spearman correlation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from albert_tf.tasks.classification import SPEC
from albert_tf.tasks.classification.data import (
    ClassificationExample,
    classification_batches,
    encode_classification,
)
from albert_tf.training.finetuning.metrics import (
    CLASS_METRICS,
    SCORE_METRICS,
    class_metrics,
    score_metrics,
)
from albert_tf.training.finetuning.trainer import FineTuningTrainer


class ClassificationTrainer(FineTuningTrainer):
    """Fine-tunes a text classifier (or scorer) and keeps its best dev checkpoint.

    Args (besides `FineTuningTrainer`'s):
        model: an `AlbertTextClassifier` (e.g. from `albert_tf.load_task_model`).
        label_names: the label of each class index, saved with the model (the
            SavedModel answers with them); empty for a regression model.
        metric: the dev metric that picks the best checkpoint: ``accuracy``,
            ``macro_f1`` or ``mcc`` for classes, ``pearson`` or ``spearman``
            for scores (default: accuracy, or pearson).

    Example:
        >>> trainer = ClassificationTrainer(model, tokenizer, label_names=["neg", "pos"],
        ...                                 output_dir="runs/sst2")      # doctest: +SKIP
        >>> trainer.fit(train_items, dev_items)["best_accuracy"]        # doctest: +SKIP
        0.87
    """

    item_type = ClassificationExample

    def __init__(
        self,
        model,
        tokenizer,
        *,
        label_names: Sequence[str] = (),
        metric: str | None = None,
        **kwargs,
    ):
        super().__init__(model, tokenizer, **kwargs)
        self.regression = model.num_labels == 1
        self.label_names = list(label_names)
        if not self.regression and len(self.label_names) != model.num_labels:
            raise ValueError(
                f"{len(self.label_names)} label names for a model with "
                f"{model.num_labels} labels: {self.label_names}"
            )
        allowed = SCORE_METRICS if self.regression else CLASS_METRICS
        self.metric = metric or allowed[0]
        if self.metric not in allowed:
            kind = "a regression model" if self.regression else "classes"
            raise ValueError(f"metric {self.metric!r} does not apply to {kind}; use {allowed}")
        if self.regression:
            # Set per instance: the step's signature follows the head.
            self.label_spec = tf.TensorSpec([None], tf.float32)

    def encode(self, items: Sequence[ClassificationExample]) -> list[dict[str, np.ndarray]]:
        if self.regression:
            items = [item if isinstance(item.label, float) else _as_score(item) for item in items]
        return encode_classification(items, self.tokenizer, self.max_seq_length)

    def batches(self, encoded, batch_size, shuffle=False, seed=0):
        return classification_batches(encoded, batch_size, shuffle=shuffle, seed=seed)

    def loss_sums(self, logits, labels):
        if self.regression:
            return tf.reduce_sum(tf.square(logits[:, 0] - labels)), tf.constant(0.0)
        loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        correct = tf.reduce_sum(
            tf.cast(tf.argmax(logits, -1, output_type=tf.int32) == labels, tf.float32)
        )
        return loss, correct

    def _outputs(self, encoded) -> tuple[np.ndarray, np.ndarray, float]:
        """Logits [n, num_labels] and labels in ``encoded``'s order, and the summed loss."""
        logits, labels, loss = [], [], 0.0
        for features, batch_labels in self.batches(encoded, self.eval_batch_size):
            batch_logits = self.logits(features)
            batch_loss, _ = self.loss_sums(batch_logits, batch_labels)
            loss += float(batch_loss)
            logits.append(batch_logits.numpy())
            labels.append(batch_labels)
        return np.concatenate(logits), np.concatenate(labels), loss

    def evaluate(self, data) -> dict[str, float]:
        """Accuracy (± standard error), macro-F1 and MCC, or Pearson, Spearman and
        MSE for scores; ``loss`` and ``count`` too."""
        encoded = self._encoded(data)
        if not encoded:
            raise ValueError("evaluate() needs at least one item")
        if not self.regression and any(int(e["label"]) < 0 for e in encoded):
            raise ValueError("evaluate() needs labelled items (a label of -1 is unknown)")
        # Sorting by length keeps padding low; the metrics do not depend on order.
        encoded = sorted(encoded, key=lambda e: len(e["token_ids"]))
        logits, labels, loss = self._outputs(encoded)
        if self.regression:
            metrics = score_metrics(labels, logits[:, 0])
        else:
            metrics = class_metrics(labels, logits.argmax(-1), self.model.num_labels)
        return metrics | {"loss": loss / len(encoded), "count": len(encoded)}

    def predict(self, data) -> np.ndarray:
        """Class probabilities [items, num_labels], or scores [items], in item order."""
        logits, _, _ = self._outputs(self._encoded(data))
        if self.regression:
            return logits[:, 0]
        return tf.nn.softmax(logits, -1).numpy()

    def task_settings(self) -> dict:
        return {
            "task": SPEC.name,
            "num_labels": self.model.num_labels,
            "label_names": self.label_names,
            "metric": self.metric,
        }


def _as_score(item: ClassificationExample) -> ClassificationExample:
    return dataclasses.replace(item, label=float(item.label))
