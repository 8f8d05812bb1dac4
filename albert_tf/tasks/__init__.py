"""The fine-tuning tasks, one folder each, and the registry that names them.

Everything that depends on the task (export, saving and loading, conversion,
``finetune``, the app) looks the task up here; nothing else branches on its
name. A task folder holds a `TaskSpec` in its ``__init__.py`` and its parts
beside it (`albert_tf.tasks.spec`). The package's own tasks are registered
below; another one is added with `register_task` (before `albert_tf.cli.finetune`
is imported, for ``finetune --task`` to take it and declare its flags).

>>> sorted(TASKS)
['classification', 'multiple_choice', 'span_qa', 'tagging']
>>> task_of_heads(["classifier_head"]).name
'classification'
>>> get_task("ner")
Traceback (most recent call last):
...
ValueError: unknown task 'ner': one of classification, multiple_choice, span_qa, tagging
>>> register_task(TaskSpec(name="ner", head="classifier_head", hf_architecture="X", parts={}))
Traceback (most recent call last):
...
ValueError: task 'classification' has the head 'classifier_head': a head names one task
"""

from __future__ import annotations

from collections.abc import Iterable

from albert_tf.tasks.classification import SPEC as _CLASSIFICATION
from albert_tf.tasks.multiple_choice import SPEC as _MULTIPLE_CHOICE
from albert_tf.tasks.span_qa import SPEC as _SPAN_QA
from albert_tf.tasks.spec import PARTS, TaskSpec
from albert_tf.tasks.tagging import SPEC as _TAGGING

#: Name → spec, in the order ``--help`` lists them; `register_task` adds to it.
TASKS: dict[str, TaskSpec] = {}
#: What a fine-tuned directory without a recorded task holds (the first task there was).
DEFAULT_TASK = _MULTIPLE_CHOICE.name

__all__ = [
    "DEFAULT_TASK",
    "TASKS",
    "TaskSpec",
    "get_task",
    "head_prefixes",
    "register_task",
    "task_of_heads",
]


def register_task(spec: TaskSpec) -> TaskSpec:
    """Adds ``spec`` to `TASKS`: from then on fine-tuning, export, loading and
    conversion find it. Its name and its head must be new (a checkpoint's head
    names its task); its parts must be ones `PARTS` knows."""
    if spec.name in TASKS:
        raise ValueError(f"a task named {spec.name!r} is registered already")
    owner = next((other for other in TASKS.values() if other.head == spec.head), None)
    if owner is not None:
        raise ValueError(f"task {owner.name!r} has the head {spec.head!r}: a head names one task")
    unknown = sorted(set(spec.parts) - set(PARTS))
    if unknown:
        raise ValueError(f"task {spec.name!r} has unknown parts {unknown}: parts are {list(PARTS)}")
    TASKS[spec.name] = spec
    return spec


for _spec in (_MULTIPLE_CHOICE, _CLASSIFICATION, _TAGGING, _SPAN_QA):
    register_task(_spec)


def get_task(name: str | None) -> TaskSpec:
    """The task called ``name`` (None: `DEFAULT_TASK`); an error lists the known ones."""
    spec = TASKS.get(DEFAULT_TASK if name is None else name)
    if spec is None:
        raise ValueError(f"unknown task {name!r}: one of {', '.join(sorted(TASKS))}")
    return spec


def head_prefixes() -> tuple[str, ...]:
    """Every registered task head's weight prefix (a pretraining model loads none of them)."""
    return tuple(spec.head_prefix for spec in TASKS.values())


def task_of_heads(heads: Iterable[str]) -> TaskSpec | None:
    """The task whose head is among the layer names ``heads`` (None: no task head)."""
    heads = set(heads)
    return next((spec for spec in TASKS.values() if spec.head in heads), None)
