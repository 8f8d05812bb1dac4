"""`FineTuningTask`: what the ``finetune`` command asks of a task.

The command reads its flags into `FineTuningSettings` and leaves everything
that depends on the task to the task's ``task.py`` (`TaskSpec.load("task")`):
reading the data, building or loading the model, making the trainer, extra
test scores and the exported model card. Nothing here reads flags.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from albert_tf.checkpoints.saved_format import load_task_model
from albert_tf.tasks.spec import TaskSpec


@dataclasses.dataclass(frozen=True)
class FineTuningSettings:
    """What a fine-tuning run was told that a task reads (the ``finetune`` flags)."""

    train_files: Sequence[str]
    dev_files: Sequence[str] | None = None
    test_files: Sequence[str] | None = None
    split_seed: int = 0
    checkpoint: str | None = None
    init_config: str | None = None
    export_dir: str | None = None
    #: Classification: classes (None: the labels found); 1 = regression.
    num_labels: int | None = None
    #: Classification: the dev metric that picks the best checkpoint.
    metric: str | None = None
    #: Multiple choice: question+option pieces kept, and which end of a context.
    max_qa_length: int = 128
    context_keep: str = "start"
    #: Span QA: question pieces kept, the step between context windows, the
    #: longest answer (pieces) and the candidates kept (the official ``run_squad``'s).
    max_query_length: int = 64
    doc_stride: int = 128
    max_answer_length: int = 30
    n_best_size: int = 20
    #: Tagging: units of each direction of a BiLSTM before the tag layer (0: none;
    #: None: a continued tagger's own, else none).
    tagger_lstm_units: int | None = None
    #: Tagging: a CRF over the tags (None: a continued tagger's own, else none).
    tagger_crf: bool | None = None
    #: Tagging: the peak learning rate of a CRF's scores (None: the run's).
    tagger_crf_learning_rate: float | None = None


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
    """Base of the tasks' ``task.py`` classes."""

    spec: ClassVar[TaskSpec]

    def read(self, settings: FineTuningSettings, report: Callable[..., None]) -> TaskData:
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

    def trainer(self, model, tokenizer, data: TaskData, settings: FineTuningSettings, **common):
        """The task's `FineTuningTrainer`; ``common`` are the arguments every task takes."""
        raise NotImplementedError

    def extra_scores(self, best, test: list, train: list, log: Callable[[str], None]) -> dict:
        """More held-out scores of the best model (``best``: its trainer), by name."""
        return {}

    def model_card(
        self, settings: FineTuningSettings, data: TaskData, summary: dict
    ) -> dict | None:
        """What the app shows about the export of this run (None: nothing)."""
        return None
