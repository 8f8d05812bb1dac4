"""The bag-of-units baseline against dense numpy references and tasks with known answers."""

import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

from albert_tf.baselines.bag_of_units import (
    SparseRows,
    bag_of_units_baseline,
    fit_bag_of_units,
    fit_logistic_regression,
    loss_and_gradients,
    probabilities,
    units_and_bigrams,
)
from albert_tf.training.finetuning.metrics import macro_f1

# Common characters, without the ones the tasks below give a meaning.
FILLER = (
    "一三上下与业两个中为主么义之九也了事二于五些产人从他代以们件任会但位体作你使做先"
    "党入全公关其内军农决几出分则利别到制前力加动化区十原去又及反发取变只可各合同后向"
    "员命和品四回因国图在地基处外多大天头她如子学它定实家对将小少就展山工已常干平年并"
    "应度建开式强当形很得心必性总情想意成我或战所手把指据接提放政数文料新方无日时明是"
    "最月有期本机条来果样根次正此比民气水求没法活流点然物特现理生用由电的直相看着知社"
    "种程立第等管系级线组经结统老者而能自行表被西要见角解计论设说象质资起路较边过运还"
    "这进通道那部都里重量长问间面革题高"
)


def item(text, label, text_pair=""):
    return SimpleNamespace(text=text, text_pair=text_pair, label=label)


def filler(rng, length):
    return "".join(rng.choice(list(FILLER), length))


def random_rows(rng, num_rows, num_columns, density=0.4):
    """Random binary rows as lists of columns (one left empty), and the same as a dense matrix."""
    dense = (rng.random((num_rows, num_columns)) < density).astype(float)
    dense[1] = 0.0  # an example with no known unit: its logits are the bias
    columns = [np.flatnonzero(row).tolist() for row in dense]
    return SparseRows.from_lists(columns, num_columns), dense


def dense_log_softmax(z):
    # Reference: log-sum-exp about the row maximum, computed independently here.
    m = z.max(axis=1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))


def dense_loss(dense, labels, weights, bias, l2):
    log_p = dense_log_softmax(dense @ weights.T + bias)
    return -log_p[np.arange(len(labels)), labels].mean() + 0.5 * l2 * np.sum(weights**2)


def test_probabilities_match_a_dense_reference():
    rng = np.random.default_rng(0)
    x, dense = random_rows(rng, 12, 9)
    weights = rng.normal(size=(3, 9)) * 400  # logits in the thousands: exp(z) overflows
    bias = rng.normal(size=3)
    expected = np.exp(dense_log_softmax(dense @ weights.T + bias))
    got = probabilities(x, weights, bias)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[1], np.exp(dense_log_softmax(bias[None]))[0], atol=1e-12)


@pytest.mark.parametrize(
    "columns",
    [
        [[], [1, 3], [], [3], []],  # empty first and last rows, empty first and last columns
        [[0, 4], [2], [0, 1, 2, 3, 4]],
        [[], []],  # no ones at all
    ],
)
def test_products_match_dense_ones(columns):
    x = SparseRows.from_lists(columns, 5)
    dense = np.zeros((len(columns), 5))
    for row, ones in enumerate(columns):
        dense[row, ones] = 1.0
    rng = np.random.default_rng(9)
    by_column, by_row = rng.normal(size=5), rng.normal(size=len(columns))
    np.testing.assert_allclose(x.matvec(by_column), dense @ by_column, atol=1e-12)
    np.testing.assert_allclose(x.rmatvec(by_row), dense.T @ by_row, atol=1e-12)


def test_loss_matches_a_dense_reference_and_gradients_match_finite_differences():
    rng = np.random.default_rng(1)
    x, dense = random_rows(rng, 10, 6)
    labels = rng.integers(0, 3, 10)
    weights, bias, l2 = rng.normal(size=(3, 6)), rng.normal(size=3), 0.3
    loss, grad_weights, grad_bias = loss_and_gradients(x, labels, weights, bias, l2)
    assert loss == pytest.approx(dense_loss(dense, labels, weights, bias, l2), rel=1e-12)

    h = 1e-6
    numeric_weights = np.zeros_like(weights)
    for index in np.ndindex(weights.shape):
        step = np.zeros_like(weights)
        step[index] = h
        plus = dense_loss(dense, labels, weights + step, bias, l2)
        minus = dense_loss(dense, labels, weights - step, bias, l2)
        numeric_weights[index] = (plus - minus) / (2 * h)
    numeric_bias = np.zeros_like(bias)
    for k in range(3):
        step = np.zeros_like(bias)
        step[k] = h
        plus = dense_loss(dense, labels, weights, bias + step, l2)
        minus = dense_loss(dense, labels, weights, bias - step, l2)
        numeric_bias[k] = (plus - minus) / (2 * h)
    np.testing.assert_allclose(grad_weights, numeric_weights, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(grad_bias, numeric_bias, rtol=1e-6, atol=1e-8)


def newton_minimum(dense, labels, num_labels, l2, iterations=50):
    """The penalised loss's minimum by damped Newton steps on dense matrices."""
    n, v = dense.shape
    features = np.hstack([dense, np.ones((n, 1))])  # the bias as a last, unpenalised column
    one_hot = np.eye(num_labels)[labels]
    penalty = np.ones(v + 1)
    penalty[-1] = 0.0
    theta = np.zeros((num_labels, v + 1))

    def loss(t):
        return dense_loss(dense, labels, t[:, :-1], t[:, -1], l2)

    for _ in range(iterations):
        p = np.exp(dense_log_softmax(features @ theta.T))
        grad = (p - one_hot).T @ features / n + l2 * theta * penalty
        curvature = p[:, :, None] * np.eye(num_labels) - p[:, :, None] * p[:, None, :]
        hessian = np.einsum("ikl,ia,ib->kalb", curvature, features, features) / n
        size = num_labels * (v + 1)
        hessian = hessian.reshape(size, size) + np.diag(np.tile(l2 * penalty, num_labels))
        # lstsq: the loss is flat along "add one constant to every bias".
        step = np.linalg.lstsq(hessian, grad.ravel(), rcond=None)[0].reshape(theta.shape)
        rate = 1.0
        while loss(theta - rate * step) > loss(theta) and rate > 1e-8:
            rate /= 2
        theta = theta - rate * step
    return theta[:, :-1], theta[:, -1]


@pytest.mark.parametrize("num_labels", [2, 3])
def test_fit_reaches_the_newton_minimum(num_labels):
    rng = np.random.default_rng(2)
    x, dense = random_rows(rng, 60, 8)
    # Labels that depend on the features but not perfectly (a finite minimum).
    scores = dense @ rng.normal(size=(8, num_labels)) + rng.gumbel(size=(60, num_labels))
    labels = np.argmax(scores, axis=1)
    l2 = 0.01
    best_weights, best_bias = newton_minimum(dense, labels, num_labels, l2)
    weights, bias = fit_logistic_regression(x, labels, num_labels, l2=l2, epochs=1000)
    best = dense_loss(dense, labels, best_weights, best_bias, l2)
    assert dense_loss(dense, labels, weights, bias, l2) - best < 1e-9
    np.testing.assert_allclose(
        probabilities(x, weights, bias),
        np.exp(dense_log_softmax(dense @ best_weights.T + best_bias)),
        atol=1e-5,
    )


def test_one_character_decides_the_class():
    rng = np.random.default_rng(3)

    def items(count):
        # 好 or 差 in random filler that has neither: only it tells the classes apart.
        labels = rng.integers(0, 2, count)
        return [
            item(filler(rng, 4) + "好差"[1 - label] + filler(rng, 4), int(label))
            for label in labels
        ]

    train, test = items(300), items(200)
    result = bag_of_units_baseline(train, test, num_labels=2)  # L2 chosen on a hashed tenth
    assert result["accuracy"] == 1.0
    assert result["macro_f1"] == 1.0
    assert result["accuracy_stderr"] == 0.0
    assert result["count"] == 200
    # Every strength of the default grid separates the classes: ties go to the strongest.
    assert result["l2"] == 1e-2
    # Every unit in at least two training items (min_count=2), counted here in Python.
    counts = {}
    for i in train:
        for unit in set(i.text):
            counts[unit] = counts.get(unit, 0) + 1
    assert result["features"] == sum(c >= 2 for c in counts.values())


def test_labels_independent_of_the_text_score_chance():
    rng = np.random.default_rng(4)

    def items(count):
        return [item(filler(rng, 8), int(rng.integers(0, 3))) for _ in range(count)]

    train, dev, test = items(1500), items(500), items(2000)
    result = bag_of_units_baseline(train, test, num_labels=3, dev=dev)
    # 1/3 ± 0.0105 (one standard error); 0.05 is nearly five.
    assert abs(result["accuracy"] - 1 / 3) < 0.05
    assert result["accuracy_stderr"] == pytest.approx(
        np.sqrt(result["accuracy"] * (1 - result["accuracy"]) / 2000)
    )


def test_a_task_only_the_pair_decides():
    rng = np.random.default_rng(5)

    def items(count):
        out = []
        for _ in range(count):
            label = int(rng.integers(0, 2))
            # The same two characters on both sides; only the pair's one is the label.
            text = filler(rng, 3) + rng.choice(["好", "差"])
            pair = filler(rng, 3) + "差好"[label]
            out.append(item(text, label, pair))
        return out

    train, dev, test = items(400), items(100), items(300)
    assert bag_of_units_baseline(train, test, num_labels=2, dev=dev)["accuracy"] == 1.0
    # Control: merged into one text the task has no answer for a quarter of the items
    # (好 and 差 both present: text and pair disagree, either label).
    train, dev, test = (
        [item(i.text + i.text_pair, i.label) for i in p] for p in (train, dev, test)
    )
    assert bag_of_units_baseline(train, test, num_labels=2, dev=dev)["accuracy"] < 0.9


def test_bigrams_learn_what_characters_cannot():
    # 好 and 不 occur in both classes; only the adjacent pair 不好 marks the negative one.
    rng = np.random.default_rng(6)

    def items(count):
        out = []
        for _ in range(count):
            label = int(rng.integers(0, 2))
            text = "不好" + filler(rng, 3) if label == 0 else "好" + filler(rng, 3) + "不"
            out.append(item(text, label))
        return out

    train, dev, test = items(300), items(100), items(200)
    characters = bag_of_units_baseline(train, test, num_labels=2, dev=dev)
    bigrams = bag_of_units_baseline(train, test, num_labels=2, dev=dev, units=units_and_bigrams)
    assert bigrams["accuracy"] == 1.0
    assert characters["accuracy"] < 0.8


def test_min_count_and_pair_prefix_define_the_vocabulary():
    train = [item("a b c", 0, "c"), item("a b", 1, "d"), item("a", 0)]
    model = fit_bag_of_units(train, num_labels=2, dev=train, min_count=2, l2_grid=(1e-2,))
    assert sorted(model.vocabulary) == ["a", "b"]  # c: once in text, once in pair
    model = fit_bag_of_units(train, num_labels=2, dev=train, min_count=1, l2_grid=(1e-2,))
    assert sorted(model.vocabulary) == ["a", "b", "c", "pair:c", "pair:d"]


def test_a_fit_is_deterministic():
    rng = np.random.default_rng(7)
    train = [item(filler(rng, 6), int(rng.integers(0, 2))) for _ in range(200)]
    first = fit_bag_of_units(train, num_labels=2, epochs=50)
    second = fit_bag_of_units(train, num_labels=2, epochs=50)
    assert first.vocabulary == second.vocabulary and first.l2 == second.l2
    np.testing.assert_array_equal(first.weights, second.weights)
    np.testing.assert_array_equal(first.bias, second.bias)


def test_macro_f1_averages_the_classes_that_occur():
    labels = np.array([0, 0, 0, 1, 1, 2])
    predictions = np.array([0, 0, 1, 1, 1, 1])
    # Class 0: P 2/2, R 2/3 -> 0.8; class 1: P 2/4, R 2/2 -> 2/3; class 2: 0; class 3 absent.
    assert macro_f1(labels, predictions, 4) == pytest.approx((0.8 + 2 / 3 + 0.0) / 3)


def test_sparse_rows_never_become_dense():
    # 50,000 rows × 1M columns would be 400 GB dense; the rows hold 8 ones each.
    rng = np.random.default_rng(8)
    rows, columns = 50_000, 1_000_000
    x = SparseRows(
        np.arange(0, 8 * rows + 1, 8), rng.integers(0, columns, 8 * rows), num_columns=columns
    )
    labels = rng.integers(0, 2, rows)
    tracemalloc.start()
    try:
        weights, _ = fit_logistic_regression(x, labels, 2, l2=1e-4, epochs=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert weights.shape == (2, columns)
    # Weights, gradients and Adam's two moments: 4 × 16 MB, and a few [ones] arrays.
    assert peak < 200e6
