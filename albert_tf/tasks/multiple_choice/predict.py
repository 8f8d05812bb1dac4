"""Multiple choice over a file (`albert_tf.tasks.predictions`): the best option per item."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from albert_tf.tasks.multiple_choice.data import read_multiple_choice
from albert_tf.tasks.predictions import Predictor
from albert_tf.training.evaluation import binomial_stderr
from albert_tf.training.finetuning.metrics import accuracy


class MultipleChoicePredictor(Predictor):
    """Rows ``{"id", "prediction", "answer", "probabilities"}``; scored by accuracy."""

    def read(self, files: Sequence[str]):
        return read_multiple_choice(list(files))

    def labelled(self, item) -> bool:
        return item.label >= 0

    def request(self, items):
        width = max(len(item.options) for item in items)
        # "" is an absent option: items with fewer options are padded with it.
        options = [item.options + [""] * (width - len(item.options)) for item in items]
        return {
            "context": np.array([item.context for item in items], object),
            "question": np.array([item.question for item in items], object),
            "options": np.array(options, object).reshape(len(items), width),
        }

    def rows(self, items, outputs):
        rows = []
        for item, prediction, probs in zip(
            items, outputs["prediction"], outputs["probabilities"], strict=True
        ):
            rows.append(
                {
                    "id": item.id,
                    "prediction": int(prediction),
                    "answer": item.options[int(prediction)],
                    "probabilities": [float(p) for p in probs[: len(item.options)]],
                }
            )
        return rows

    def scores(self, items, rows):
        value = accuracy([item.label for item in items], [row["prediction"] for row in rows])
        return {
            "accuracy": value,
            "accuracy_stderr": binomial_stderr(value, len(items)),
            "count": len(items),
        }
