"""Exporting a multiple-choice model as a SavedModel for TF Serving.

>>> from albert_tf.serving import export_saved_model
>>> export_saved_model("runs/mc/best", "exported/albert_mc")  # doctest: +SKIP
'exported/albert_mc/1'
"""

from albert_tf.checkpoints.saved_format import SETTINGS_FILE, read_finetune_settings
from albert_tf.serving.export import export_saved_model, next_version
from albert_tf.serving.multiple_choice_module import LIMITS, MultipleChoiceServingModule

__all__ = [
    "LIMITS",
    "SETTINGS_FILE",
    "MultipleChoiceServingModule",
    "export_saved_model",
    "next_version",
    "read_finetune_settings",
]
