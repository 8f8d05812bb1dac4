"""Naive Bayes against scikit-learn's MultinomialNB on the same binary unit matrix."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.naive_bayes import MultinomialNB

from albert_tf.baselines.bag_of_units import example_units, units_and_bigrams
from albert_tf.baselines.naive_bayes import fit_naive_bayes

REVIEWS = [
    ("质量很好，物流也快", 1), ("不好用，退货了", 0), ("很满意，推荐购买", 1),
    ("质量太差，不推荐", 0), ("Good value, works well", 1), ("broke after a week", 0),
    ("还行吧，一般般", 0), ("包装很好，东西不错", 1), ("客服态度差", 0), ("非常好用 very good", 1),
]  # fmt: skip


def _items(pairs):
    return [SimpleNamespace(text=t, text_pair="", label=y) for t, y in pairs]


def test_equals_multinomial_nb_on_binary_units():
    train = _items(REVIEWS)
    test = _items([("很好，推荐", 1), ("太差了", 0), ("good but broke", 0), ("没见过的字", 1)])
    model = fit_naive_bayes(train, num_labels=2, units=units_and_bigrams, alpha=0.5)
    vocabulary = sorted(model.vocabulary, key=model.vocabulary.get)

    def matrix(items):
        x = np.zeros((len(items), len(vocabulary)))
        for row, item in enumerate(items):
            for unit in example_units(item.text, "", units_and_bigrams):
                if unit in model.vocabulary:
                    x[row, model.vocabulary[unit]] = 1
        return x

    reference = MultinomialNB(alpha=0.5).fit(matrix(train), [y for _, y in REVIEWS])
    ours = model.joint_log_likelihood(test)
    theirs = reference.predict_joint_log_proba(matrix(test))
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    assert model.predict(test).tolist() == reference.predict(matrix(test)).tolist()
    assert model.predict(test)[:2].tolist() == [1, 0]


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="needs training items"):
        fit_naive_bayes([], num_labels=2)
    with pytest.raises(ValueError, match=r"class indices in \[0, 2\)"):
        fit_naive_bayes(_items([("好", 2)]), num_labels=2)
    with pytest.raises(ValueError, match="alpha must be positive"):
        fit_naive_bayes(_items(REVIEWS), num_labels=2, alpha=0)
