"""The docstring examples of the multiple-choice modules run as written."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "name",
    [
        "albert_tf.data.multiple_choice",
        "albert_tf.serving",
        "albert_tf.serving.export",
        "albert_tf.serving.multiple_choice_module",
        "albert_tf.training.finetuning",
    ],
)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
