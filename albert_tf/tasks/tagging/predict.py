"""Named entities over a file (`albert_tf.tasks.predictions`): the entities of each text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from albert_tf.tasks.predictions import Predictor
from albert_tf.tasks.tagging.data import read_tagging
from albert_tf.training.finetuning.metrics import entity_scores


class TaggingPredictor(Predictor):
    """Rows ``{"id", "text", "entities": [{"start", "end", "label", "text", "score"}]}``
    (character offsets, end exclusive); scored by exact-match entity F1."""

    def read(self, files: Sequence[str]):
        return read_tagging(list(files))

    def request(self, items):
        return {"text": np.array([item.text for item in items], object)}

    def rows(self, items, outputs):
        rows = []
        for i, item in enumerate(items):
            entities = []
            for start, end, label, score in zip(
                outputs["starts"][i],
                outputs["ends"][i],
                outputs["labels"][i],
                outputs["scores"][i],
                strict=True,
            ):
                if start < 0:  # padding
                    continue
                entities.append(
                    {
                        "start": int(start),
                        "end": int(end),
                        "label": label.decode("utf-8"),
                        "text": item.text[start:end],
                        "score": float(score),
                    }
                )
            rows.append({"id": item.id, "text": item.text, "entities": entities})
        return rows

    def scores(self, items, rows):
        gold = [[(e.start, e.end, e.label) for e in item.entities] for item in items]
        predicted = [[(e["start"], e["end"], e["label"]) for e in row["entities"]] for row in rows]
        return entity_scores(gold, predicted) | {"count": len(items)}
