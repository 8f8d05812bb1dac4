"""Fine-tuning `AlbertMultipleChoice`, as google-research/albert's ``run_race``:
cross-entropy over each item's options, the best checkpoint by dev accuracy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from albert_tf.tasks.multiple_choice import SPEC
from albert_tf.tasks.multiple_choice.data import (
    MultipleChoiceExample,
    encode_multiple_choice,
    multiple_choice_batches,
)
from albert_tf.training.finetuning.trainer import FineTuningTrainer

#: [batch, options, length] token ids.
_IDS = tf.TensorSpec([None, None, None], tf.int32)


class MultipleChoiceTrainer(FineTuningTrainer):
    """Fine-tunes a multiple-choice model (cross-entropy over its options, as
    ``run_race``) and keeps its best dev-accuracy checkpoint.

    Args (besides `FineTuningTrainer`'s):
        model: an `AlbertMultipleChoice` (e.g. from `albert_tf.load_task_model`).
        max_qa_length: question+option pieces kept, as in run_race.
        context_keep: which end of a too-long context is kept (``"start"``,
            as run_race; ``"end"`` for "what comes next?" items).

    Example:
        >>> trainer = MultipleChoiceTrainer(model, tokenizer, output_dir="runs/mc",
        ...                                 max_seq_length=256, batch_size=16)  # doctest: +SKIP
        >>> result = trainer.fit(train_items, dev_items)                  # doctest: +SKIP
        >>> result["best_accuracy"], result["best_dir"]                  # doctest: +SKIP
        (0.61, 'runs/mc/best')
    """

    item_type = MultipleChoiceExample
    ids_spec = _IDS

    def __init__(
        self,
        model,
        tokenizer,
        *,
        max_qa_length: int = 128,
        context_keep: str = "start",
        **kwargs,
    ):
        super().__init__(model, tokenizer, **kwargs)
        self.max_qa_length, self.context_keep = max_qa_length, context_keep

    def encode(self, items: Sequence[MultipleChoiceExample]) -> list[dict[str, np.ndarray]]:
        """Packs items once; fit/evaluate accept the result to avoid re-tokenising."""
        return encode_multiple_choice(
            items,
            self.tokenizer,
            max_seq_length=self.max_seq_length,
            max_qa_length=self.max_qa_length,
            context_keep=self.context_keep,
        )

    def batches(self, encoded, batch_size, shuffle=False, seed=0):
        return multiple_choice_batches(encoded, batch_size, shuffle=shuffle, seed=seed)

    def loss_sums(self, logits, labels):
        loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        correct = tf.reduce_sum(
            tf.cast(tf.argmax(logits, -1, output_type=tf.int32) == labels, tf.float32)
        )
        return loss, correct

    # -- public ------------------------------------------------------------

    def evaluate(self, data) -> dict[str, float]:
        """Accuracy and mean loss on items (or their `encode` output)."""
        encoded = self._encoded(data)
        if not encoded:
            raise ValueError("evaluate() needs at least one item")
        # Sorting by size keeps padding low; order does not change accuracy.
        encoded = sorted(encoded, key=lambda e: e["token_ids"].size)
        correct, loss, count = 0, 0.0, 0
        for features, labels in multiple_choice_batches(encoded, self.eval_batch_size):
            logits = self.logits(features)
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
            correct += int(np.sum(np.argmax(logits.numpy(), -1) == labels))
            loss += float(tf.reduce_sum(losses))
            count += len(labels)
        return {"accuracy": correct / count, "loss": loss / count, "count": count}

    def predict(self, data) -> np.ndarray:
        """Option probabilities, [items, max options] (0 for absent options)."""
        encoded = self._encoded(data)
        rows = []
        width = max(e["token_ids"].shape[0] for e in encoded)
        for features, _ in multiple_choice_batches(encoded, self.eval_batch_size):
            logits = self.logits(features)
            probs = tf.nn.softmax(logits, -1).numpy()
            rows.append(np.pad(probs, ((0, 0), (0, width - probs.shape[1]))))
        return np.concatenate(rows)

    def task_settings(self) -> dict:
        return {
            "task": SPEC.name,
            "max_qa_length": self.max_qa_length,
            "context_keep": self.context_keep,
        }
