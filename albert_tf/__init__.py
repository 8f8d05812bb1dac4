"""ALBERT (A Lite BERT) in TensorFlow 2 / Keras 3.

>>> import albert_tf
>>> model = albert_tf.load("models/albert_base_v2")  # doctest: +SKIP
"""

# First, before anything imports TensorFlow: a command (python -m albert_tf.<command>,
# albert-<command>) starts without TensorFlow's C++ start-up lines. No-op for a library.
from albert_tf.cli.startup import quiet_start_up  # isort: skip

quiet_start_up()

from albert_tf.checkpoints.saved_format import (  # noqa: E402
    load,
    load_multiple_choice,
    load_text_classifier,
    save_model,
)
from albert_tf.cli import install_module_aliases  # noqa: E402
from albert_tf.config import AlbertConfig, ConfigError  # noqa: E402
from albert_tf.models.backbone import AlbertBackbone  # noqa: E402
from albert_tf.models.multiple_choice_model import AlbertMultipleChoice  # noqa: E402
from albert_tf.models.pretraining_model import AlbertPretrainingModel  # noqa: E402
from albert_tf.models.text_classifier_model import AlbertTextClassifier  # noqa: E402
from albert_tf.presets import PRESETS, get_preset  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "AlbertBackbone",
    "AlbertConfig",
    "AlbertMultipleChoice",
    "AlbertPretrainingModel",
    "AlbertTextClassifier",
    "ConfigError",
    "get_preset",
    "load",
    "load_multiple_choice",
    "load_text_classifier",
    "save_model",
]

install_module_aliases()  # `python -m albert_tf.pretrain` & co. (see albert_tf.cli)
