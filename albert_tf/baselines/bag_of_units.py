"""What a fine-tuned classifier must beat: logistic regression on a bag of units.

Each text becomes the set of its units (`overlap.text_units`: Chinese,
Japanese and Korean characters one by one, other text by lower-cased word); the
units of ``text_pair`` get a prefix, so they are features apart from the same
units in ``text`` and a pair task can be learnt. A unit is a feature if at least
``min_count`` training examples contain it, and an example is the binary vector
of its features, kept as sparse rows (the columns of each example's ones), never
as a dense examples × vocabulary matrix. Multinomial logistic regression with an
L2 penalty is fitted by full-batch Adam in numpy: it starts from zero and
samples nothing, so a fit is a deterministic function of its data. The penalty
is the one of ``l2_grid`` with the best held-out accuracy.

>>> from types import SimpleNamespace as Item
>>> def items(pairs):
...     return [Item(text=text, text_pair="", label=label) for text, label in pairs]
>>> train = items([("很好用", 1), ("不好用", 0), ("质量很好", 1), ("质量不行", 0)] * 3)
>>> test = items([("很好", 1), ("不行", 0), ("不好", 0)])
>>> result = bag_of_units_baseline(train, test, num_labels=2, dev=train)
>>> result["accuracy"], result["count"], result["features"]
(1.0, 3, 7)

``units=units_and_bigrams`` adds pairs of adjacent units (two characters, two
words) to the features. Both on the shared Chinese review set, with time and
memory: ``python -m experiments.classification_baseline``.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

# `_UNITS` is the pattern behind `text_units`; bigrams need the units in order.
from albert_tf.baselines.overlap import _UNITS, text_units
from albert_tf.training.evaluation import binomial_stderr
from albert_tf.training.finetuning.metrics import macro_f1

__all__ = [
    "DEFAULT_L2_GRID",
    "BagOfUnitsModel",
    "SparseRows",
    "bag_of_units_baseline",
    "classification_scores",
    "fit_bag_of_units",
    "fit_logistic_regression",
    "loss_and_gradients",
    "probabilities",
    "units_and_bigrams",
]

Units = Callable[[str], Iterable[str]]

# Units never contain ":" or " " (`text_units` keeps letters and digits), so
# prefixed pair units and joined bigrams cannot collide with plain units.
PAIR_PREFIX = "pair:"

# Mean loss, so the right strength shrinks with the training set: about 1e-2
# suits a few hundred examples, 1e-5 tens of thousands.
DEFAULT_L2_GRID = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2)


def units_and_bigrams(text: str) -> set[str]:
    """`text_units` plus every pair of adjacent units, joined by a space.

    >>> sorted(units_and_bigrams("不太好"))
    ['不', '不 太', '太', '太 好', '好']
    """
    units = [unit.lower() for unit in _UNITS.findall(text)]
    return set(units) | {f"{a} {b}" for a, b in zip(units, units[1:], strict=False)}


def example_units(text: str, text_pair: str = "", units: Units = text_units) -> set[str]:
    """The distinct units of a text and, prefixed, of its pair.

    >>> sorted(example_units("Good", "好的"))
    ['good', 'pair:好', 'pair:的']
    """
    return set(units(text)) | {PAIR_PREFIX + unit for unit in units(text_pair or "")}


@dataclass(frozen=True)
class SparseRows:
    """Binary rows, compressed: row i has ones in columns ``indices[indptr[i]:indptr[i + 1]]``.

    Products with a vector gather and sum segments (`np.add.reduceat`): 2-5×
    faster than a scatter-add by `np.bincount`, and summed in a fixed order.
    """

    indptr: np.ndarray  # int64 [rows + 1]
    indices: np.ndarray  # int64 [ones]
    num_columns: int

    @classmethod
    def from_lists(cls, columns: Sequence[Sequence[int]], num_columns: int) -> SparseRows:
        """From the distinct columns of each row's ones."""
        lengths = [len(row) for row in columns]
        indptr = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        indices = np.fromiter((c for row in columns for c in row), np.int64, int(indptr[-1]))
        return cls(indptr, indices, num_columns)

    @property
    def num_rows(self) -> int:
        return len(self.indptr) - 1

    def row_of_each_one(self) -> np.ndarray:
        return np.repeat(np.arange(self.num_rows), np.diff(self.indptr))

    def dense(self) -> np.ndarray:
        """The [rows, columns] matrix (for small checks only)."""
        out = np.zeros((self.num_rows, self.num_columns))
        out[self.row_of_each_one(), self.indices] = 1.0
        return out

    # reduceat needs segments that are not empty (it would return the next
    # element), so the products sum over rows (columns) with a one only.
    @cached_property
    def _by_row(self) -> tuple[np.ndarray, np.ndarray]:
        rows = np.flatnonzero(np.diff(self.indptr))
        return rows, self.indptr[rows]

    @cached_property
    def _by_column(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        order = np.argsort(self.indices, kind="stable")
        counts = np.bincount(self.indices, minlength=self.num_columns)
        columns = np.flatnonzero(counts)
        starts = (np.cumsum(counts) - counts)[columns]
        return self.row_of_each_one()[order], columns, starts

    def matvec(self, vector: np.ndarray) -> np.ndarray:
        """``x @ vector`` ([rows]): each row's sum of ``vector`` at its ones."""
        out = np.zeros(self.num_rows)
        rows, starts = self._by_row
        if len(rows):
            out[rows] = np.add.reduceat(np.take(vector, self.indices), starts)
        return out

    def rmatvec(self, vector: np.ndarray) -> np.ndarray:
        """``x.T @ vector`` ([columns]): each column's sum of ``vector`` at its ones."""
        out = np.zeros(self.num_columns)
        rows_by_column, columns, starts = self._by_column
        if len(columns):
            out[columns] = np.add.reduceat(np.take(vector, rows_by_column), starts)
        return out


def _logits(x: SparseRows, weights: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``x @ weights.T + bias`` less ``x @ weights[0]`` in every row.

    Softmax and argmax ignore what a row's logits share, so the first class's
    product is never computed: half the work with two classes.
    """
    z = np.zeros((x.num_rows, len(weights)))
    for k in range(1, len(weights)):
        z[:, k] = x.matvec(weights[k] - weights[0])
    return z + bias


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)  # exp cannot overflow: the largest term is 1
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def probabilities(x: SparseRows, weights: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Class probabilities of every row, [rows, classes]: softmax(x @ weights.T + bias)."""
    return np.exp(_log_softmax(_logits(x, weights, bias)))


def loss_and_gradients(
    x: SparseRows,
    labels: np.ndarray,
    weights: np.ndarray,
    bias: np.ndarray,
    l2: float,
) -> tuple[float, np.ndarray, np.ndarray]:
    """Mean cross-entropy plus ``l2 / 2 * |weights|²`` (the bias is not penalised),
    with its gradients for ``weights`` [classes, features] and ``bias`` [classes].
    """
    n = x.num_rows
    log_p = _log_softmax(_logits(x, weights, bias))
    loss = -float(np.mean(log_p[np.arange(n), labels])) + 0.5 * l2 * float(np.sum(weights**2))
    residual = np.exp(log_p)  # probabilities …
    residual[np.arange(n), labels] -= 1.0  # … minus the one-hot labels
    residual = np.ascontiguousarray(residual.T) / n  # [classes, rows]: contiguous gathers
    data_term = np.zeros_like(weights)
    for k in range(1, len(weights)):
        data_term[k] = x.rmatvec(residual[k])
    # Each row's residuals sum to zero (probabilities sum to one), so the first
    # class's gradient is minus the others'.
    data_term[0] = -data_term[1:].sum(axis=0)
    return loss, data_term + l2 * weights, residual.sum(axis=1)


def fit_logistic_regression(
    x: SparseRows,
    labels: np.ndarray,
    num_labels: int,
    *,
    l2: float,
    epochs: int,
    learning_rate: float = 0.1,
) -> tuple[np.ndarray, np.ndarray]:
    """(weights [classes, features], bias [classes]) after ``epochs`` full-batch Adam steps.

    The bias starts at the log class frequencies (the best model without
    features) and the step size decays linearly to zero, so the last steps
    settle instead of circling the minimum.
    """
    weights = np.zeros((num_labels, x.num_columns))
    frequency = np.bincount(labels, minlength=num_labels) + 1.0
    bias = np.log(frequency / frequency.sum())
    params = (weights, bias)
    first = [np.zeros_like(p) for p in params]
    second = [np.zeros_like(p) for p in params]
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for step in range(1, epochs + 1):
        _, *grads = loss_and_gradients(x, labels, weights, bias, l2)
        rate = learning_rate * (1.0 - (step - 1) / epochs)
        for p, g, m, v in zip(params, grads, first, second, strict=True):
            m *= beta1
            m += (1 - beta1) * g
            v *= beta2
            v += (1 - beta2) * g * g
            p -= rate * (m / (1 - beta1**step)) / (np.sqrt(v / (1 - beta2**step)) + eps)
    return weights, bias


# -- from items to sparse rows -------------------------------------------------


@dataclass(frozen=True)
class _Encoded:
    """Items as ids of their distinct units in a shared id space (not yet features)."""

    indptr: np.ndarray
    ids: np.ndarray


def _encode(items: Sequence, units: Units, ids: dict[str, int], grow: bool) -> _Encoded:
    # Integer ids in an array, not sets of strings: 30k reviews with bigrams are
    # 2.4M units, hundreds of MB as Python strings and 19 MB as int64.
    flat = array("q")
    indptr = array("q", [0])
    for item in items:
        found = example_units(item.text, item.text_pair, units)
        if grow:
            flat.extend(sorted(ids.setdefault(unit, len(ids)) for unit in found))
        else:
            flat.extend(sorted(ids[unit] for unit in found if unit in ids))
        indptr.append(len(flat))
    return _Encoded(np.array(indptr, np.int64), np.array(flat, np.int64))


def _select(encoded: _Encoded, keep: np.ndarray | None = None) -> _Encoded:
    """The rows where ``keep`` is True."""
    if keep is None:
        return encoded
    lengths = np.diff(encoded.indptr)
    ones = np.repeat(keep, lengths)
    return _Encoded(np.concatenate([[0], np.cumsum(lengths[keep])]), encoded.ids[ones])


def _to_columns(encoded: _Encoded, column_of: np.ndarray, num_columns: int) -> SparseRows:
    """Maps unit ids to feature columns, dropping units that are no feature (-1)."""
    columns = column_of[encoded.ids]
    kept = columns >= 0
    n = len(encoded.indptr) - 1
    rows = np.repeat(np.arange(n), np.diff(encoded.indptr))[kept]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    return SparseRows(indptr, columns[kept], num_columns)


def _vocabulary(
    fit: _Encoded, ids: dict[str, int], min_count: int
) -> tuple[dict[str, int], np.ndarray]:
    """The features of the fitting rows ({unit: column}) and the column of every unit id.

    Columns follow the sorted units, so they do not depend on the order of the items.
    """
    document_frequency = np.bincount(fit.ids, minlength=len(ids))
    kept = sorted(unit for unit, i in ids.items() if document_frequency[i] >= min_count)
    column_of = np.full(len(ids), -1, np.int64)
    column_of[[ids[unit] for unit in kept]] = np.arange(len(kept))
    return {unit: column for column, unit in enumerate(kept)}, column_of


@dataclass(frozen=True)
class BagOfUnitsModel:
    """A fitted baseline: its features, weights [classes, features], bias and penalty."""

    vocabulary: dict[str, int]
    weights: np.ndarray
    bias: np.ndarray
    l2: float
    units: Units = text_units

    def rows(self, items: Sequence) -> SparseRows:
        encoded = _encode(items, self.units, self.vocabulary, grow=False)
        return SparseRows(encoded.indptr, encoded.ids, len(self.vocabulary))

    def probabilities(self, items: Sequence) -> np.ndarray:
        return probabilities(self.rows(items), self.weights, self.bias)

    def predict(self, items: Sequence) -> np.ndarray:
        return np.argmax(_logits(self.rows(items), self.weights, self.bias), axis=1)


def hash_split(items: Sequence, fraction: float, seed: int) -> np.ndarray:
    """Which items fall in a held-out ``fraction``, by a hash of their texts.

    By text, not position: copies of a text fall on the same side, so none is
    both fitted and held out.
    """
    held_out = np.zeros(len(items), bool)
    for i, item in enumerate(items):
        key = f"{seed}\0{item.text}\0{item.text_pair}".encode()
        held_out[i] = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") < fraction * 2**64
    return held_out


def _labels(items: Sequence, num_labels: int) -> np.ndarray:
    labels = np.fromiter((item.label for item in items), np.int64, len(items))
    if len(labels) and (labels.min() < 0 or labels.max() >= num_labels):
        raise ValueError(
            f"labels must lie in [0, {num_labels}), got {labels.min()}..{labels.max()}"
        )
    return labels


def fit_bag_of_units(
    train: Sequence,
    *,
    num_labels: int,
    dev: Sequence | None = None,
    min_count: int = 2,
    l2_grid: Sequence[float] = DEFAULT_L2_GRID,
    epochs: int = 200,
    seed: int = 0,
    units: Units = text_units,
) -> BagOfUnitsModel:
    """The model of `bag_of_units_baseline`, before it is scored."""
    if num_labels < 2:
        raise ValueError(f"num_labels must be at least 2, got {num_labels}")
    if not train:
        raise ValueError("fit_bag_of_units needs training items")
    if not l2_grid:
        raise ValueError("l2_grid is empty")
    ids: dict[str, int] = {}
    encoded = _encode(train, units, ids, grow=True)
    labels = _labels(train, num_labels)
    if dev is None:
        held_out = hash_split(train, 0.1, seed)
        if held_out.all() or not held_out.any():
            raise ValueError(f"{len(train)} training items are too few to hold out a tenth")
        fit_part, fit_labels = _select(encoded, ~held_out), labels[~held_out]
        check, check_labels = _select(encoded, held_out), labels[held_out]
    else:
        fit_part, fit_labels = encoded, labels
        # Into the same id space; units only dev has get ids but never columns.
        check, check_labels = _encode(dev, units, ids, grow=True), _labels(dev, num_labels)

    vocabulary, column_of = _vocabulary(fit_part, ids, min_count)
    x = _to_columns(fit_part, column_of, len(vocabulary))
    x_check = _to_columns(check, column_of, len(vocabulary))
    best_accuracy, best = -1.0, None
    # Strongest penalty first, replaced only by a strictly better one: ties go
    # to the simpler model.
    for l2 in sorted(l2_grid, reverse=True):
        weights, bias = fit_logistic_regression(x, fit_labels, num_labels, l2=l2, epochs=epochs)
        predictions = np.argmax(_logits(x_check, weights, bias), axis=1)
        accuracy = float(np.mean(predictions == check_labels))
        if accuracy > best_accuracy:
            best_accuracy, best = accuracy, BagOfUnitsModel(vocabulary, weights, bias, l2, units)
    if dev is None:  # refit on all of train, held-out tenth included
        vocabulary, column_of = _vocabulary(encoded, ids, min_count)
        x = _to_columns(encoded, column_of, len(vocabulary))
        weights, bias = fit_logistic_regression(x, labels, num_labels, l2=best.l2, epochs=epochs)
        best = BagOfUnitsModel(vocabulary, weights, bias, best.l2, units)
    return best


def classification_scores(
    labels: np.ndarray, predictions: np.ndarray, num_labels: int
) -> dict[str, float]:
    """Accuracy, its binomial standard error, macro-F1 and the count of items."""
    if not len(labels):
        raise ValueError("no items to score")
    accuracy = float(np.mean(labels == predictions))
    return {
        "accuracy": accuracy,
        "accuracy_stderr": binomial_stderr(accuracy, len(labels)),
        "macro_f1": macro_f1(labels, predictions, num_labels),
        "count": len(labels),
    }


def bag_of_units_baseline(
    train: Sequence,
    test: Sequence,
    *,
    num_labels: int,
    dev: Sequence | None = None,
    min_count: int = 2,
    l2_grid: Sequence[float] = DEFAULT_L2_GRID,
    epochs: int = 200,
    seed: int = 0,
    units: Units = text_units,
) -> dict[str, float]:
    """Test accuracy (with its binomial standard error) and macro-F1 of the baseline.

    Items are duck-typed: ``.text``, ``.text_pair`` ("" for none) and ``.label``
    (an int class index). Fits on ``train`` once per strength of ``l2_grid``
    and keeps the one with the best accuracy on ``dev`` (ties: the stronger);
    when ``dev`` is None, on a tenth of ``train`` split off by a hash of the
    texts (``seed``), after which it refits on all of ``train``. ``units`` maps
    a text to its units (`text_units`; `units_and_bigrams` adds pairs of
    adjacent ones). Returns ``accuracy``, ``accuracy_stderr``, ``macro_f1``,
    ``count`` (test items), ``l2`` (the strength chosen) and ``features``
    (the fitted vocabulary's size).
    """
    model = fit_bag_of_units(
        train,
        num_labels=num_labels,
        dev=dev,
        min_count=min_count,
        l2_grid=l2_grid,
        epochs=epochs,
        seed=seed,
        units=units,
    )
    scores = classification_scores(_labels(test, num_labels), model.predict(test), num_labels)
    return {**scores, "l2": model.l2, "features": len(model.vocabulary)}
