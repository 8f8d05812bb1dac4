"""Fine-tuning: the loop every task shares (`trainer`) and each task's part of it
(`multiple_choice`, `classification`, with `metrics` for classification).

The trainers load on first use (PEP 562): `metrics` alone needs only numpy.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "FEATURES": "albert_tf.training.finetuning.trainer",
    "FineTuningTrainer": "albert_tf.training.finetuning.trainer",
    "ClassificationTrainer": "albert_tf.tasks.classification.trainer",
    "MultipleChoiceTrainer": "albert_tf.tasks.multiple_choice.trainer",
}

__all__ = ["FEATURES", "ClassificationTrainer", "FineTuningTrainer", "MultipleChoiceTrainer"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
