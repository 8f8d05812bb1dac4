"""Naive Bayes against scikit-learn's MultinomialNB on binary unit counts that
scikit-learn's own CountVectorizer makes from the same texts."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.naive_bayes import MultinomialNB

from albert_tf.baselines.bag_of_units import example_units, units_and_bigrams
from albert_tf.baselines.naive_bayes import fit_naive_bayes

# Unequal classes (6 positive, 4 negative; then a third, neutral), so the priors matter.
REVIEWS = [
    ("质量很好，物流也快", 1), ("不好用，退货了", 0), ("很满意，推荐购买", 1),
    ("质量太差，不推荐", 0), ("Good value, works well", 1), ("broke after a week", 0),
    ("包装很好，东西不错", 1), ("客服态度差", 0), ("非常好用 very good", 1), ("好评", 1),
]  # fmt: skip
NEUTRAL = [("还行吧，一般般", 2), ("一般，凑合用", 2)]
TEST = [("很好，推荐", 1), ("太差了", 0), ("good but broke", 0), ("没见过的字", 1), ("一般吧", 2)]


def _items(pairs, pair_text=""):
    return [SimpleNamespace(text=t, text_pair=pair_text, label=y) for t, y in pairs]


@pytest.mark.parametrize("classes", [2, 3])
def test_equals_multinomial_nb_on_binary_units(classes):
    pair = "" if classes == 2 else "商品评价"  # a text pair: its units are features apart
    train = _items(REVIEWS + (NEUTRAL if classes == 3 else []), pair)
    test = _items(TEST if classes == 3 else TEST[:4], pair)
    model = fit_naive_bayes(train, num_labels=classes, units=units_and_bigrams, alpha=0.5)

    def analyzer(item):
        return sorted(example_units(item.text, item.text_pair, units_and_bigrams))

    vectorizer = CountVectorizer(analyzer=analyzer, binary=True)
    x_train = vectorizer.fit_transform(train)
    assert set(vectorizer.vocabulary_) == set(model.vocabulary)
    reference = MultinomialNB(alpha=0.5).fit(x_train, [item.label for item in train])
    x_test = vectorizer.transform(test)
    np.testing.assert_allclose(
        model.joint_log_likelihood(test), reference.predict_joint_log_proba(x_test), rtol=1e-12
    )
    assert model.predict(test).tolist() == reference.predict(x_test).tolist()
    assert len(set(np.exp(reference.class_log_prior_).round(3))) == classes  # unequal priors
    assert model.predict(test)[:2].tolist() == [1, 0]


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="needs training items"):
        fit_naive_bayes([], num_labels=2)
    with pytest.raises(ValueError, match=r"class indices in \[0, 2\), got \[2\]"):
        fit_naive_bayes(_items([("好", 2)]), num_labels=2)
    with pytest.raises(ValueError, match="alpha must be positive"):
        fit_naive_bayes(_items(REVIEWS), num_labels=2, alpha=0)
