"""ALBERT (A Lite BERT) in TensorFlow 2 / Keras 3.

>>> import albert_tf
>>> model = albert_tf.load("models/albert_base_v2")  # doctest: +SKIP
"""

from albert_tf.checkpoints.saved_format import load, load_multiple_choice, save_model
from albert_tf.cli import install_module_aliases
from albert_tf.config import AlbertConfig, ConfigError
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.multiple_choice_model import AlbertMultipleChoice
from albert_tf.models.pretraining_model import AlbertPretrainingModel
from albert_tf.presets import PRESETS, get_preset

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "AlbertBackbone",
    "AlbertConfig",
    "AlbertMultipleChoice",
    "AlbertPretrainingModel",
    "ConfigError",
    "get_preset",
    "load",
    "load_multiple_choice",
    "save_model",
]

install_module_aliases()  # `python -m albert_tf.pretrain` & co. (see albert_tf.cli)
