"""`FineTuningTask`: what a fine-tuning run asks of a task.

`albert_tf.tasks.run.run_finetuning` does what every task shares and leaves
everything that depends on the task to the task's ``task.py``
(`TaskSpec.load("task")`): reading the data, building or loading the model,
making the trainer, extra test scores and the exported model card. Each
method gets the run's `FineTuningOptions`: the shared options, and in
``options.settings`` the task's own (its ``settings.py``). Nothing here reads
flags.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Callable
from typing import Any, ClassVar

from albert_tf.checkpoints.saved_format import load_task_model
from albert_tf.tasks.spec import TaskSpec
from albert_tf.training.finetuning.options import FineTuningOptions


@dataclasses.dataclass
class TaskData:
    """A run's items: train, and dev / test when files were given (else None)."""

    train: list
    dev: list | None
    test: list | None
    skipped: collections.Counter
    #: A labelled task's class names, by index.
    label_names: list[str] | None = None
    #: Constructor arguments of a fresh head that the run's settings chose.
    head_options: dict[str, Any] = dataclasses.field(default_factory=dict)


class FineTuningTask:
    """Base of the tasks' ``task.py`` classes; a subclass names its `spec` and
    overrides `read` and `trainer` at least."""

    spec: ClassVar[TaskSpec]

    def read(self, options: FineTuningOptions, report: Callable[..., None]) -> TaskData:
        """The run's items; ``report(name, items, skipped[, label_names])`` is called
        for dev and test as they are read."""
        raise NotImplementedError

    def describe(self, name: str, items: list, skipped, label_names=None) -> list[str]:
        """Lines that say what was read: counts, and bad input skipped."""
        lines = [f"{name}: {len(items)} items"]
        if skipped:
            lines.append(f"{name}: skipped {sum(skipped.values())} bad input(s): {dict(skipped)}")
        return lines

    def head_arguments(self, data: TaskData) -> dict[str, Any]:
        """Constructor arguments of a fresh model's head (a classifier's labels)."""
        return {}

    def build_model(self, config, dtype, data: TaskData):
        """A model with fresh weights of ``config``'s shape."""
        return self.spec.load("model").from_albert_config(
            config, dtype=dtype, **self.head_arguments(data)
        )

    def load_model(self, directory: str | os.PathLike[str], dtype, data: TaskData | None = None):
        """The model saved in ``directory`` (a fresh head if it holds none)."""
        return load_task_model(directory, self.spec, dtype=dtype)

    def trainer(self, model, tokenizer, data: TaskData, options: FineTuningOptions, **common):
        """The task's `FineTuningTrainer`; ``common`` are the arguments every task takes."""
        raise NotImplementedError

    def extra_scores(self, best, test: list, train: list, log: Callable[[str], None]) -> dict:
        """More held-out scores of the best model (``best``: its trainer), by name."""
        return {}

    def model_card(self, options: FineTuningOptions, data: TaskData, summary: dict) -> dict | None:
        """What the app shows about the export of this run (None: nothing)."""
        return None
