"""ALBERT (A Lite BERT) in TensorFlow 2 / Keras 3.

>>> import albert_tf
>>> model = albert_tf.load("models/albert_base_v2")  # doctest: +SKIP

The public names load on first use (PEP 562), so ``import albert_tf`` and the
commands' ``--help`` do not import TensorFlow; the commands themselves live in
`albert_tf.cli`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS = {
    "PRESETS": "albert_tf.presets",
    "AlbertBackbone": "albert_tf.models.backbone",
    "AlbertConfig": "albert_tf.config",
    "AlbertMultipleChoice": "albert_tf.tasks.multiple_choice.model",
    "AlbertPretrainingModel": "albert_tf.models.pretraining_model",
    "AlbertSpanQA": "albert_tf.tasks.span_qa.model",
    "AlbertTextClassifier": "albert_tf.tasks.classification.model",
    "AlbertTokenClassifier": "albert_tf.tasks.tagging.model",
    "ConfigError": "albert_tf.config",
    "FineTuningOptions": "albert_tf.training.finetuning.options",
    "get_preset": "albert_tf.presets",
    "load": "albert_tf.checkpoints.saved_format",
    "load_task_model": "albert_tf.checkpoints.saved_format",
    "run_finetuning": "albert_tf.tasks.run",
    "save_model": "albert_tf.checkpoints.saved_format",
}

__all__ = [
    "PRESETS",
    "AlbertBackbone",
    "AlbertConfig",
    "AlbertMultipleChoice",
    "AlbertPretrainingModel",
    "AlbertSpanQA",
    "AlbertTextClassifier",
    "AlbertTokenClassifier",
    "ConfigError",
    "FineTuningOptions",
    "get_preset",
    "load",
    "load_task_model",
    "run_finetuning",
    "save_model",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # what type checkers and IDEs see
    from albert_tf.checkpoints.saved_format import (
        load,
        load_task_model,
        save_model,
    )
    from albert_tf.config import AlbertConfig, ConfigError
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretraining_model import AlbertPretrainingModel
    from albert_tf.presets import PRESETS, get_preset
    from albert_tf.tasks.classification.model import AlbertTextClassifier
    from albert_tf.tasks.multiple_choice.model import AlbertMultipleChoice
    from albert_tf.tasks.run import run_finetuning
    from albert_tf.tasks.span_qa.model import AlbertSpanQA
    from albert_tf.tasks.tagging.model import AlbertTokenClassifier
    from albert_tf.training.finetuning.options import FineTuningOptions
