"""The fine-tuning tasks, one folder each, and the registry that names them.

Everything that depends on the task (export, saving and loading, conversion,
``finetune``, the app) looks the task up here; nothing else branches on its
name. A task folder holds a `TaskSpec` in its ``__init__.py`` and its parts
beside it (`albert_tf.tasks.spec`). A new task: a folder like
``multiple_choice/`` and a line in `_SPECS`.

>>> sorted(TASKS)
['classification', 'multiple_choice', 'span_qa', 'tagging']
>>> task_of_heads(["classifier_head"]).name
'classification'
>>> get_task("ner")
Traceback (most recent call last):
...
ValueError: unknown task 'ner': one of classification, multiple_choice, span_qa, tagging
"""

from __future__ import annotations

from collections.abc import Iterable

from albert_tf.tasks.classification import SPEC as _CLASSIFICATION
from albert_tf.tasks.multiple_choice import SPEC as _MULTIPLE_CHOICE
from albert_tf.tasks.span_qa import SPEC as _SPAN_QA
from albert_tf.tasks.spec import TaskSpec
from albert_tf.tasks.tagging import SPEC as _TAGGING

_SPECS = (_MULTIPLE_CHOICE, _CLASSIFICATION, _TAGGING, _SPAN_QA)
#: Name → spec, in the order ``--help`` lists them.
TASKS: dict[str, TaskSpec] = {spec.name: spec for spec in _SPECS}
#: What a fine-tuned directory without a recorded task holds (the first task there was).
DEFAULT_TASK = _MULTIPLE_CHOICE.name
#: Every task head's weight prefix (a pretraining model loads none of them).
HEAD_PREFIXES = tuple(spec.head_prefix for spec in _SPECS)

__all__ = ["DEFAULT_TASK", "HEAD_PREFIXES", "TASKS", "TaskSpec", "get_task", "task_of_heads"]


def get_task(name: str | None) -> TaskSpec:
    """The task called ``name`` (None: `DEFAULT_TASK`); an error lists the known ones."""
    spec = TASKS.get(DEFAULT_TASK if name is None else name)
    if spec is None:
        raise ValueError(f"unknown task {name!r}: one of {', '.join(sorted(TASKS))}")
    return spec


def task_of_heads(heads: Iterable[str]) -> TaskSpec | None:
    """The task whose head is among the layer names ``heads`` (None: no task head)."""
    heads = set(heads)
    return next((spec for spec in _SPECS if spec.head in heads), None)
