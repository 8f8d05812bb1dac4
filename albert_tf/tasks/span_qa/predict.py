"""Question answering over a file (`albert_tf.tasks.predictions`): an answer per question,
and the files SQuAD's official evaluation script reads."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from albert_tf.tasks.predictions import Predictor
from albert_tf.tasks.span_qa.data import read_span_qa
from albert_tf.training.finetuning.metrics import squad_scores


class SpanQAPredictor(Predictor):
    """Rows ``{"id", "answer", "start", "end", "score"}`` (``""`` and −1 for no answer);
    ``predictions.json`` (question id → answer text, as SQuAD's ``evaluate-v1.1.py``
    and ``evaluate-v2.0.py`` read it); scored by SQuAD's exact match and F1."""

    def read(self, files: Sequence[str]):
        return read_span_qa(list(files))

    def request(self, items):
        return {
            "question": np.array([item.question for item in items], object),
            "context": np.array([item.context for item in items], object),
        }

    def rows(self, items, outputs):
        return [
            {
                "id": item.id,
                "answer": answer.decode("utf-8"),
                "start": int(start),
                "end": int(end),
                "score": float(score),
            }
            for item, answer, start, end, score in zip(
                items,
                outputs["answer"],
                outputs["start"],
                outputs["end"],
                outputs["score"],
                strict=True,
            )
        ]

    def scores(self, items, rows):
        golds = [[a.text for a in item.answers] or [""] for item in items]
        return squad_scores(golds, [row["answer"] for row in rows])

    def files(self, items, rows):
        return {"predictions.json": {row["id"]: row["answer"] for row in rows}}
