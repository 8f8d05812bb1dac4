"""Exporting a fine-tuned model as a SavedModel for TF Serving.

Each task's signatures live in its folder (``albert_tf/tasks/<task>/serving.py``);
`export_saved_model` looks the task up in the registry (`albert_tf.tasks`).

>>> from albert_tf.serving import export_saved_model
>>> export_saved_model("runs/mc/best", "exported/albert_mc")  # doctest: +SKIP
'exported/albert_mc/1'
"""

from albert_tf.checkpoints.saved_format import SETTINGS_FILE, read_finetune_settings
from albert_tf.serving.export import export_saved_model, next_version

__all__ = [
    "SETTINGS_FILE",
    "export_saved_model",
    "next_version",
    "read_finetune_settings",
]
