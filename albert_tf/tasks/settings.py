"""`TaskSettings`: a task's own fine-tuning options, each one a ``finetune`` flag.

A task declares its options once, as the fields of a frozen dataclass in its
``settings.py`` (the spec's ``settings`` part), each made with `setting`: the
default, the help text and the bounds. From that one declaration `define_flags`
declares the flags (a field's name is its flag's name), `settings_from_flags`
reads them back into the dataclass, and `TaskSettings.validate` checks the same
bounds for a run started from Python. Nothing here imports TensorFlow (the
command declares the flags before ``--help``) or reads flags on its own: both
functions take the `absl.flags.FlagValues` to work on.

>>> @dataclasses.dataclass(frozen=True)
... class Demo(TaskSettings):
...     window: int = setting(128, "demo: pieces per window.", lower_bound=1)
...     side: str = setting("start", "demo: which end is kept.", choices=("start", "end"))
>>> from absl import flags
>>> flag_values = flags.FlagValues()
>>> define_flags(Demo, flag_values)
['window', 'side']
>>> _ = flag_values(["prog", "--window=64"])
>>> settings_from_flags(Demo, flag_values)
Demo(window=64, side='start')
>>> Demo(window=0).validate()
Traceback (most recent call last):
...
ValueError: window must be at least 1, got 0
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from typing import Any

from albert_tf.tasks.spec import TaskSpec

# Field metadata keys: what a flag needs beyond the default.
_HELP, _LOWER_BOUND, _CHOICES = "help", "lower_bound", "choices"


def setting(
    default: Any,
    help: str,
    *,
    lower_bound: float | None = None,
    choices: Sequence[str] | None = None,
) -> Any:
    """A `TaskSettings` field that is also a flag: its default, ``--help`` text and bounds."""
    metadata = {_HELP: help, _LOWER_BOUND: lower_bound, _CHOICES: tuple(choices or ())}
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class TaskSettings:
    """Base of the tasks' settings: no options. A task's subclass adds fields made
    with `setting`, and overrides `validate` (calling this one) for what bounds
    cannot say."""

    def validate(self) -> None:
        """Raises ValueError for a value outside its field's bounds or choices."""
        for field in _flag_fields(type(self)):
            value = getattr(self, field.name)
            if value is None:
                continue  # unset: the task decides
            lower = field.metadata[_LOWER_BOUND]
            if lower is not None and value < lower:
                raise ValueError(f"{field.name} must be at least {lower}, got {value!r}")
            choices = field.metadata[_CHOICES]
            if choices and value not in choices:
                raise ValueError(f"{field.name} must be one of {choices}, got {value!r}")


def settings_class(spec: TaskSpec) -> type[TaskSettings]:
    """The task's settings dataclass (its ``settings`` part; none: `TaskSettings`)."""
    return spec.load("settings") if "settings" in spec.parts else TaskSettings


def _flag_fields(cls: type[TaskSettings]) -> list[dataclasses.Field]:
    return [field for field in dataclasses.fields(cls) if _HELP in field.metadata]


def _flag_type(annotation: Any) -> type:
    """``int``, ``float``, ``bool`` or ``str`` from a field's type (``X | None`` is X)."""
    kinds = [
        kind for kind in typing.get_args(annotation) or (annotation,) if kind is not type(None)
    ]
    if len(kinds) != 1 or kinds[0] not in (bool, int, float, str):
        raise TypeError(f"a setting is a bool, int, float or str (or None), not {annotation}")
    return kinds[0]


def define_flags(cls: type[TaskSettings], flag_values, module_name: str | None = None) -> list[str]:
    """Declares a flag for each `setting` field of ``cls`` in ``flag_values`` (an
    `absl.flags.FlagValues`), listed under ``module_name`` (default: the module
    that defines ``cls``) by ``--helpfull``. Returns the flags' names."""
    from absl import flags

    hints = typing.get_type_hints(cls)
    module_name = module_name or cls.__module__
    names = []
    for field in _flag_fields(cls):
        kind = _flag_type(hints[field.name])
        name, default, help = field.name, field.default, field.metadata[_HELP]
        where = {"flag_values": flag_values, "module_name": module_name}
        lower, choices = field.metadata[_LOWER_BOUND], field.metadata[_CHOICES]
        if kind is bool:
            flags.DEFINE_bool(name, default, help, **where)
        elif kind is int:
            flags.DEFINE_integer(name, default, help, lower_bound=lower, **where)
        elif kind is float:
            flags.DEFINE_float(name, default, help, lower_bound=lower, **where)
        elif choices:
            flags.DEFINE_enum(name, default, list(choices), help, **where)
        else:
            flags.DEFINE_string(name, default, help, **where)
        names.append(name)
    return names


def settings_from_flags(cls: type[TaskSettings], flag_values) -> TaskSettings:
    """``cls`` with each `setting` field read from its parsed flag in ``flag_values``."""
    return cls(**{field.name: flag_values[field.name].value for field in _flag_fields(cls)})
