"""The examples in docstrings run and print what they claim."""

import doctest
import importlib

import pytest

MODULES = [
    "albert_tf.activations",
    "albert_tf.config",
    "albert_tf.data",
    "albert_tf.data.inputs",
    "albert_tf.data.corpus",
    "albert_tf.data.tfds_corpus",
    "albert_tf.data.masking",
    "albert_tf.data.examples",
    "albert_tf.data.shards",
    "albert_tf.data.pretraining",
    "albert_tf.data.pipeline",
    "albert_tf.data.chinese_wwm",
    "albert_tf.training.optimization",
    "albert_tf.training.precision",
    "albert_tf.layers.factorized_embedding",
    "albert_tf.layers.attention",
    "albert_tf.layers.transformer_layer",
    "albert_tf.layers.encoder",
    "albert_tf.models.backbone",
    "albert_tf.models.pretraining_model",
    "albert_tf.models.multiple_choice_model",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no runnable example"
    assert result.failed == 0
