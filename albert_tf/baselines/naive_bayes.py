"""A classic text classifier to compare with: multinomial naive Bayes on a bag of units.

Each text is the set of its units (`bag_of_units.example_units`; by default
characters and words plus adjacent pairs, `units_and_bigrams`), so a unit counts
once per text: the "binarized" multinomial naive Bayes of Wang & Manning (2012),
a strong baseline for sentiment. Per class, a unit's probability is its count
in that class's texts plus ``alpha``, over the class's total plus ``alpha``
times the vocabulary (add-``alpha`` smoothing; Laplace's at 1); a text scores each class by its log
prior plus the log probabilities of its known units. Nothing is tuned.

>>> from types import SimpleNamespace as Item
>>> def items(pairs):
...     return [Item(text=text, text_pair="", label=label) for text, label in pairs]
>>> train = items([("很好用", 1), ("不好用", 0), ("质量很好", 1), ("质量不行", 0)])
>>> model = fit_naive_bayes(train, num_labels=2)
>>> model.predict(items([("很好", 1), ("不行", 0)])).tolist()
[1, 0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from albert_tf.baselines.bag_of_units import Units, example_units, units_and_bigrams


@dataclass(frozen=True)
class NaiveBayesModel:
    """A fitted model: unit → column, and per class its log prior and unit log probabilities."""

    vocabulary: dict[str, int]
    log_prior: np.ndarray  # [classes]
    log_probability: np.ndarray  # [classes, units]
    units: Units

    def joint_log_likelihood(self, items: Sequence) -> np.ndarray:
        """float64 [items, classes]: log prior + the log probabilities of each item's units."""
        scores = np.tile(self.log_prior, (len(items), 1))
        for row, item in enumerate(items):
            columns = [
                self.vocabulary[u]
                for u in example_units(item.text, getattr(item, "text_pair", ""), self.units)
                if u in self.vocabulary
            ]
            if columns:
                scores[row] += self.log_probability[:, columns].sum(-1)
        return scores

    def predict(self, items: Sequence) -> np.ndarray:
        """The likeliest class of each item (ties: the lower index)."""
        return self.joint_log_likelihood(items).argmax(-1)


def fit_naive_bayes(
    train: Sequence, *, num_labels: int, units: Units = units_and_bigrams, alpha: float = 1.0
) -> NaiveBayesModel:
    """Counts ``train`` (items with ``.text``, optional ``.text_pair``, int ``.label``)."""
    if not train:
        raise ValueError("fit_naive_bayes needs training items")
    if alpha <= 0:
        raise ValueError(f"alpha must be positive (Laplace smoothing), got {alpha}")
    vocabulary: dict[str, int] = {}
    rows = []
    for item in train:
        found = example_units(item.text, getattr(item, "text_pair", ""), units)
        rows.append([vocabulary.setdefault(u, len(vocabulary)) for u in sorted(found)])
    labels = np.array([int(item.label) for item in train])
    if labels.min() < 0 or labels.max() >= num_labels:
        raise ValueError(
            f"labels must be class indices in [0, {num_labels}), got {sorted(set(labels.tolist()))}"
        )
    counts = np.zeros((num_labels, len(vocabulary)))
    for label, columns in zip(labels, rows, strict=True):
        counts[label, columns] += 1
    smoothed = counts + alpha
    log_probability = np.log(smoothed) - np.log(smoothed.sum(-1, keepdims=True))
    class_counts = np.bincount(labels, minlength=num_labels).astype(float)
    with np.errstate(divide="ignore"):  # a class without items: log 0 = -inf, never chosen
        log_prior = np.log(class_counts) - np.log(class_counts.sum())
    return NaiveBayesModel(vocabulary, log_prior, log_probability, units)
