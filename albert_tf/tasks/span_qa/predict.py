"""Question answering over a file (`albert_tf.tasks.predictions`): an answer per question,
and the files SQuAD's official evaluation scripts read."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from albert_tf.tasks.predictions import Predictor
from albert_tf.tasks.span_qa.data import read_span_qa
from albert_tf.training.finetuning.metrics import squad_scores

#: ``null_odds.json``'s value for a question without any span (JSON has no infinity).
NO_SPAN_ODDS = 1e30


def _softmax(scores: Sequence[float]) -> list[float]:
    """``run_squad``'s ``_compute_softmax``: the n-best list's probabilities."""
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    total = sum(exps)
    return [value / total for value in exps]


class SpanQAPredictor(Predictor):
    """Rows ``{"id", "answer", "start", "end", "score"}`` (``""`` and −1 for no answer);
    ``predictions.json`` (question id → answer text, as SQuAD's ``evaluate-v1.1.py``
    and ``evaluate-v2.0.py`` read it); scored by SQuAD's exact match and F1.

    With ``n_best`` > 0 the export's ``answers`` signature is asked for ``top_k =
    n_best`` spans; each row also holds ``null_score`` and ``n_best`` (its spans, best
    first: ``{"text", "start", "end", "score", "probability"}``), and the answer is the
    one ``serving_default`` gives (the best span unless the null score beats it by
    more than the export's ``no_answer_threshold``). Two more files:
    ``nbest_predictions.json`` (id → ``run_squad``'s n-best list: ``text``,
    ``probability`` — the softmax of the list's scores —, ``score`` (start + end logit),
    ``start``, ``end``; with the model's "no answer" entry ``""`` when it has a
    threshold) and, for a model with a threshold (SQuAD 2.0), ``null_odds.json`` (id →
    null score − best span score, ``evaluate-v2.0.py --na-prob-file``'s input).
    """

    @property
    def signature(self) -> str:  # type: ignore[override]
        return "answers" if self.n_best > 0 else "serving_default"

    def read(self, files: Sequence[str]):
        return read_span_qa(list(files))

    def request(self, items):
        request = {
            "question": np.array([item.question for item in items], object),
            "context": np.array([item.context for item in items], object),
        }
        if self.n_best > 0:
            request["top_k"] = np.int32(self.n_best)
        return request

    def rows(self, items, outputs):
        if self.n_best > 0:
            return self._ranked_rows(items, outputs)
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

    def _ranked_rows(self, items, outputs) -> list[dict]:
        """Rows from the ``answers`` signature; the answer chosen as `choose` does
        in the graph (float32 margin, answered unless it exceeds the threshold)."""
        threshold = np.float32(outputs["no_answer_threshold"])
        rows = []
        for b, item in enumerate(items):
            spans = [
                {
                    "text": outputs["answers"][b, j].decode("utf-8"),
                    "start": int(outputs["starts"][b, j]),
                    "end": int(outputs["ends"][b, j]),
                    "score": float(outputs["scores"][b, j]),
                    "probability": float(outputs["probabilities"][b, j]),
                }
                for j in range(outputs["starts"].shape[1])
                if outputs["starts"][b, j] >= 0
            ]
            null_score = np.float32(outputs["null_score"][b])
            # NaN (no threshold) compares False: answered, as serving_default.
            answered = bool(spans) and not (
                null_score - np.float32(outputs["scores"][b, 0]) > threshold
            )
            best = spans[0] if answered else None
            rows.append(
                {
                    "id": item.id,
                    "answer": best["text"] if best else "",
                    "start": best["start"] if best else -1,
                    "end": best["end"] if best else -1,
                    "score": best["probability"] if best else float(outputs["null_probability"][b]),
                    "null_score": float(null_score),
                    "n_best": spans,
                }
            )
        return rows

    def scores(self, items, rows):
        golds = [[a.text for a in item.answers] or [""] for item in items]
        return squad_scores(golds, [row["answer"] for row in rows])

    def files(self, items, rows):
        files = {"predictions.json": {row["id"]: row["answer"] for row in rows}}
        if self.n_best <= 0:
            return files
        has_null = self.metadata.get("no_answer_threshold") is not None
        files["nbest_predictions.json"] = {
            row["id"]: self._nbest_list(row, has_null) for row in rows
        }
        if has_null:
            files["null_odds.json"] = {
                row["id"]: row["null_score"] - row["n_best"][0]["score"]
                if row["n_best"]
                else NO_SPAN_ODDS
                for row in rows
            }
        return files

    def _nbest_list(self, row: dict, has_null: bool) -> list[dict]:
        """``run_squad``'s n-best list: the spans and (SQuAD 2.0) the null entry by
        score (a span before the null on a tie), the best ``n_best``, the null kept
        if it fell out, probabilities by softmax over the list."""
        entries = [
            {"text": s["text"], "score": s["score"], "start": s["start"], "end": s["end"]}
            for s in row["n_best"]
        ]
        if has_null:
            null = {"text": "", "score": row["null_score"], "start": -1, "end": -1}
            entries = sorted([*entries, null], key=lambda e: -e["score"])[: self.n_best]
            if null not in entries:
                entries.append(null)
        probabilities = _softmax([e["score"] for e in entries])
        return [
            {"text": e["text"], "probability": p, **{k: e[k] for k in ("score", "start", "end")}}
            for e, p in zip(entries, probabilities, strict=True)
        ]
