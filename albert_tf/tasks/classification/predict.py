"""Text classification over a file (`albert_tf.tasks.predictions`): a label per text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from albert_tf.tasks.classification.data import read_classification
from albert_tf.tasks.predictions import Predictor
from albert_tf.training.finetuning.metrics import class_metrics, score_metrics


class ClassificationPredictor(Predictor):
    """Rows ``{"id", "label", "probabilities": {name: p}}``, or ``{"id", "score"}``
    for a regression model; scored by accuracy, macro-F1 and MCC (Pearson and
    Spearman for scores)."""

    def __init__(self, metadata: dict[str, Any], n_best: int = 0) -> None:
        super().__init__(metadata, n_best)
        self.label_names = list(metadata.get("label_names") or [])
        self.regression = not self.label_names

    def read(self, files: Sequence[str]):
        # The model's label map: a label it does not know is skipped as unknown_label.
        items, skipped, _ = read_classification(
            files,
            label_names=None if self.regression else self.label_names,
            regression=self.regression,
        )
        return items, skipped

    def labelled(self, item) -> bool:
        return item.label != -1

    def request(self, items):
        return {
            "text": np.array([item.text for item in items], object),
            "text_pair": np.array([item.text_pair for item in items], object),
        }

    def rows(self, items, outputs):
        if self.regression:
            return [
                {"id": item.id, "score": float(score)}
                for item, score in zip(items, outputs["score"], strict=True)
            ]
        return [
            {
                "id": item.id,
                "label": self.label_names[int(prediction)],
                "probabilities": dict(zip(self.label_names, map(float, probs), strict=True)),
            }
            for item, prediction, probs in zip(
                items, outputs["prediction"], outputs["probabilities"], strict=True
            )
        ]

    def scores(self, items, rows):
        if self.regression:
            return score_metrics([item.label for item in items], [row["score"] for row in rows])
        index = {name: i for i, name in enumerate(self.label_names)}
        return class_metrics(
            [item.label for item in items],
            [index[row["label"]] for row in rows],
            len(self.label_names),
        ) | {"count": len(items)}
