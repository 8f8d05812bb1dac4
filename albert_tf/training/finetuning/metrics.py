"""Scores of a text classifier: accuracy, macro-F1, MCC; Pearson and Spearman for scores;
entity-level precision, recall and F1 for a tagger.

The metrics GLUE and CLUE report, in numpy: accuracy (with its binomial standard
error, `albert_tf.training.evaluation.binomial_stderr`) and macro-F1 for classes,
Matthews correlation for CoLA-style sets, Pearson and Spearman correlation for
STS-B-style scores; for named entities, seqeval's (conlleval's) exact-match
scores, `entity_scores`.

>>> import numpy as np
>>> labels, predictions = np.array([0, 0, 1, 1, 2]), np.array([0, 1, 1, 1, 2])
>>> round(accuracy(labels, predictions), 2), round(macro_f1(labels, predictions, 3), 4)
(0.8, 0.8222)
>>> round(pearson([1, 2, 3, 4], [1, 2, 3, 5]), 4), spearman([1, 2, 3, 4], [1, 2, 3, 5])
(0.9827, 1.0)
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from albert_tf.training.evaluation import binomial_stderr

#: Dev metrics that can pick the best checkpoint, by kind of head.
CLASS_METRICS = ("accuracy", "macro_f1", "mcc")
SCORE_METRICS = ("pearson", "spearman")


def accuracy(labels: Sequence[int], predictions: Sequence[int]) -> float:
    return float(np.mean(np.asarray(labels) == np.asarray(predictions)))


def confusion_matrix(labels: Sequence[int], predictions: Sequence[int], num_labels: int):
    """[true, predicted] counts."""
    matrix = np.zeros((num_labels, num_labels), np.int64)
    np.add.at(matrix, (np.asarray(labels, np.int64), np.asarray(predictions, np.int64)), 1)
    return matrix


def macro_f1(labels: Sequence[int], predictions: Sequence[int], num_labels: int) -> float:
    """Mean F1 over the classes that occur among the labels or the predictions.

    scikit-learn's ``f1_score(average="macro")``: a class a test set neither holds nor
    is predicted does not pull the mean down, so scores of subsets stay comparable.
    """
    matrix = confusion_matrix(labels, predictions, num_labels)
    true_positive = np.diag(matrix).astype(float)
    denominator = matrix.sum(0) + matrix.sum(1)  # predicted + actual, = 2TP + FP + FN
    present = denominator > 0
    if not present.any():
        return 0.0  # no items
    return float(np.mean(2 * true_positive[present] / denominator[present]))


def mcc(labels: Sequence[int], predictions: Sequence[int], num_labels: int) -> float:
    """Matthews correlation (its multi-class form, Gorodkin's R_K); 0 when undefined."""
    matrix = confusion_matrix(labels, predictions, num_labels).astype(float)
    n = matrix.sum()
    correct = np.trace(matrix)
    predicted, actual = matrix.sum(0), matrix.sum(1)
    numerator = correct * n - predicted @ actual
    denominator = np.sqrt(n**2 - predicted @ predicted) * np.sqrt(n**2 - actual @ actual)
    return float(numerator / denominator) if denominator > 0 else 0.0


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator > 0 else 0.0


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their mean rank (as Spearman's rho needs)."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    unique, inverse = np.unique(values, return_inverse=True)
    sums = np.bincount(inverse, weights=ranks, minlength=len(unique))
    counts = np.bincount(inverse, minlength=len(unique))
    return (sums / counts)[inverse]


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    return pearson(_ranks(np.asarray(x, np.float64)), _ranks(np.asarray(y, np.float64)))


def class_metrics(labels, predictions, num_labels: int) -> dict[str, float]:
    value = accuracy(labels, predictions)
    return {
        "accuracy": value,
        "accuracy_stderr": binomial_stderr(value, len(labels)),
        "macro_f1": macro_f1(labels, predictions, num_labels),
        "mcc": mcc(labels, predictions, num_labels),
    }


def score_metrics(labels, scores) -> dict[str, float]:
    labels, scores = np.asarray(labels, np.float64), np.asarray(scores, np.float64)
    return {
        "pearson": pearson(labels, scores),
        "spearman": spearman(labels, scores),
        "mse": float(np.mean((labels - scores) ** 2)),
    }


def _precision_recall_f1(correct: int, predicted: int, gold: int) -> dict[str, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    total = precision + recall
    return {
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / total if total else 0.0,
    }


def _entity_key(entity: Any) -> tuple:
    """An `Entity`-like object (``start``, ``end``, ``label``) or a tuple, as a tuple."""
    if hasattr(entity, "label"):
        return (entity.start, entity.end, entity.label)
    return tuple(entity)


def entity_scores(
    gold: Sequence[Iterable[tuple]], predicted: Sequence[Iterable[tuple]]
) -> dict[str, Any]:
    """Exact-match entity scores, micro-averaged, and per label (seqeval's defaults).

    Args:
        gold, predicted: per sentence, its entities as ``(start, end, label)``
            tuples (the label last; any span convention, the same on both sides)
            or `albert_tf.tasks.tagging.data.Entity` objects. Each sentence's
            entities are a set: a repeat counts once. An entity is correct if the
            same sentence's other side holds it exactly, span and label.

    Returns:
        ``precision``, ``recall``, ``f1`` (micro: over all entities), the counts
        ``gold``, ``predicted``, ``correct``, and ``per_label``: for each label in
        either side, sorted, ``{"precision", "recall", "f1", "support"}`` (support:
        its gold entities). As seqeval's default ``zero_division="warn"`` (without
        the warning): precision is 0 with nothing predicted, recall 0 with no gold
        entity, F1 ``2PR / (P + R)`` and 0 when ``P + R`` is 0, so two empty sides
        score 0, not 1.

    Raises:
        ValueError: ``gold`` and ``predicted`` hold different numbers of sentences.

    >>> gold = [[(0, 2, "PER"), (5, 7, "LOC")], [(1, 3, "ORG")]]
    >>> predicted = [[(0, 2, "PER"), (5, 8, "LOC")], []]
    >>> scores = entity_scores(gold, predicted)
    >>> [round(scores[k], 4) for k in ("precision", "recall", "f1")], scores["correct"]
    ([0.5, 0.3333, 0.4], 1)
    >>> scores["per_label"]["ORG"]
    {'precision': 0.0, 'recall': 0.0, 'f1': 0.0, 'support': 1}
    """
    if len(gold) != len(predicted):
        raise ValueError(
            f"entity_scores needs one entity list per sentence on both sides, got "
            f"{len(gold)} gold and {len(predicted)} predicted sentences"
        )
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for gold_entities, predicted_entities in zip(gold, predicted, strict=True):
        gold_set = {_entity_key(e) for e in gold_entities}
        predicted_set = {_entity_key(e) for e in predicted_entities}
        for side, entities in (("gold", gold_set), ("predicted", predicted_set)):
            for entity in entities:
                counts[entity[-1]][side] += 1
        for entity in gold_set & predicted_set:
            counts[entity[-1]]["correct"] += 1
    total = {key: sum(c[key] for c in counts.values()) for key in ("gold", "predicted", "correct")}
    per_label = {
        label: _precision_recall_f1(c["correct"], c["predicted"], c["gold"])
        | {"support": c["gold"]}
        for label, c in sorted(counts.items())
    }
    return (
        _precision_recall_f1(total["correct"], total["predicted"], total["gold"])
        | total
        | {"per_label": per_label}
    )
