"""`TaskSpec`: the facts of one fine-tuning task, and where its parts live.

A spec holds only names: importing it loads nothing, so every layer of the
package may read it (a checkpoint converter asks which head a task has, the
exporter which signatures it serves). Its parts, one file each in
``albert_tf/tasks/<task>/``, are imported on first use, and each sits at its
layer (`docs/architecture.md`): ``head.py`` with the heads, ``model.py`` with
the models, ``data.py`` with the data, ``trainer.py`` with training,
``serving.py`` with serving and ``task.py``, which wires them for the
``finetune`` command, just below the commands. ``settings.py``, the task's own
fine-tuning options and their flags (`albert_tf.tasks.settings`), is
TensorFlow-free and sits with the registry, so the command reads it before
``--help``. A caller loads only parts at or below its own layer.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

#: The parts a task has, and the layer each belongs to.
PARTS = {
    "settings": "task_registry",
    "head": "heads",
    "model": "models",
    "data": "data",
    "trainer": "training",
    "serving": "serving",
    "predict": "tasks",
    "task": "tasks",
}


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One fine-tuning task.

    >>> model = "albert_tf.tasks.multiple_choice.model:AlbertMultipleChoice"
    >>> spec = TaskSpec(name="demo", head="demo_head", hf_architecture="AlbertForDemo",
    ...                 parts={"model": model})
    >>> spec.head_prefix, spec.load("model").__name__
    ('demo_head/', 'AlbertMultipleChoice')
    """

    #: The ``--task`` value and ``finetune.json``'s ``"task"``.
    name: str
    #: The head layer's name in the task model: its weights are ``<head>/...``.
    head: str
    #: Hugging Face's class for a model with this head.
    hf_architecture: str
    #: Part name (`PARTS`) → ``"module:attribute"`` (left out of equality and hashing).
    parts: dict[str, str] = dataclasses.field(compare=False)
    #: One line for ``--help`` and the app.
    description: str = ""
    #: Whether the head's outputs are named labels (``finetune.json``'s
    #: ``label_names``; Hugging Face's ``id2label``).
    labelled: bool = False
    #: keras-hub's task class for this head, if it has one.
    keras_hub_class: str | None = None
    #: Whether `albert_tf.serving.litert` can export it.
    litert: bool = False

    @property
    def head_prefix(self) -> str:
        return f"{self.head}/"

    def load(self, part: str) -> Any:
        """The part (a class or module attribute), imported now."""
        if part not in self.parts:
            raise KeyError(f"task {self.name!r} has no {part!r} part; it has {sorted(self.parts)}")
        module, _, attribute = self.parts[part].partition(":")
        return getattr(importlib.import_module(module), attribute)
