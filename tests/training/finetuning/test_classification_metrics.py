"""Classification metrics against values worked out by hand and numpy's own."""

import numpy as np
import pytest

from albert_tf.training.finetuning.metrics import (
    class_metrics,
    macro_f1,
    mcc,
    pearson,
    score_metrics,
    spearman,
)


def test_binary_mcc_is_the_textbook_formula():
    # TP=3, TN=2, FP=1, FN=1: (3*2 - 1*1) / sqrt(4 * 4 * 3 * 3) = 5/12.
    labels = [1, 1, 1, 1, 0, 0, 0]
    predictions = [1, 1, 1, 0, 0, 0, 1]
    assert mcc(labels, predictions, 2) == pytest.approx(5 / 12)
    assert mcc([0, 1, 0, 1], [0, 1, 0, 1], 2) == pytest.approx(1.0)
    assert mcc([0, 1, 0, 1], [1, 0, 1, 0], 2) == pytest.approx(-1.0)
    assert mcc([0, 1, 0, 1], [1, 1, 1, 1], 2) == 0.0  # undefined: one class predicted


def test_macro_f1_by_hand():
    # class 0: P=1, R=1/2 -> 2/3; class 1: P=2/3, R=1 -> 4/5; class 2: 1; class 3 neither
    # occurs nor is predicted, so it is left out of the mean (scikit-learn's default).
    labels, predictions = [0, 0, 1, 1, 2], [0, 1, 1, 1, 2]
    assert macro_f1(labels, predictions, 3) == pytest.approx((2 / 3 + 4 / 5 + 1) / 3)
    assert macro_f1(labels, predictions, 4) == pytest.approx((2 / 3 + 4 / 5 + 1) / 3)
    # A class that occurs and is never predicted does count, as 0.
    assert macro_f1([0, 1, 2], [0, 1, 1], 3) == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert macro_f1([], [], 3) == 0.0


def test_correlations():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    assert pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
    # Ranks with a tie: x -> [1, 2.5, 2.5, 4], y -> [1, 3, 2, 4]; r = 4.5 / sqrt(4.5 * 5).
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / np.sqrt(22.5))
    assert spearman(x, np.exp(x)) == pytest.approx(1.0)  # monotone, not linear
    assert pearson([1, 1, 1], [1, 2, 3]) == 0.0  # undefined: constant input


def test_reports():
    metrics = class_metrics([0, 1, 1, 0], [0, 1, 0, 0], 2)
    assert metrics["accuracy"] == 0.75
    assert metrics["accuracy_stderr"] == pytest.approx(np.sqrt(0.75 * 0.25 / 4))
    scores = score_metrics([0.0, 1.0, 2.0], [0.0, 1.0, 3.0])
    assert scores["mse"] == pytest.approx(1 / 3)
