"""`TrainerHook`: the points of a pretraining run where code outside the loop may act.

In the pattern of Keras callbacks and Orbit actions: the loop calls every hook at
each point, and a hook that has nothing to do there inherits the no-op. Fault
injection for the recovery tests (`albert_tf.training.pretraining.faults`) is one
such hook; the loop itself holds no test code.

>>> class Count(TrainerHook):
...     def __init__(self):
...         self.ends = []
...     def on_step_end(self, step):
...         self.ends.append(step)
>>> hooks = Hooks([Count()])
>>> hooks.on_step_end(1); hooks.on_step_end(2)
>>> hooks.hooks[0].ends
[1, 2]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from albert_tf.training.steps import TrainingSteps


class TrainerHook:
    """No-op at every point; override the ones you need. ``step`` counts from 1:
    the update that moves the global step from ``step - 1`` to ``step``.

    With ``steps_per_loop`` > 1 the host sees loops, not steps: ``before_step`` runs
    with a loop's first step and ``after_step`` with the last it reached (its first
    when none applied), and the others once per loop, with the step it ended at
    (loops end at every logging, checkpoint and evaluation step).
    """

    def install(self, steps: TrainingSteps) -> None:
        """Once, before the step functions are traced (e.g. to wrap the loss)."""

    def before_step(self, step: int) -> None:
        """Before the attempt at ``step`` (a skipped step is attempted again)."""

    def after_step(self, step: int) -> None:
        """After the attempt at ``step``, applied or skipped."""

    def after_metrics(self, step: int) -> None:
        """After ``step``'s line of metrics is written (or would have been)."""

    def before_save(self, step: int) -> None:
        """Just before the checkpoint of ``step`` is saved."""

    def during_save(self, step: int, write_half: Callable[[], None]) -> None:
        """As the checkpoint of ``step`` is saved; ``write_half`` leaves what a save cut
        short leaves (`checkpoint_layout.write_half_checkpoint`)."""

    def on_step_end(self, step: int) -> None:
        """After everything the loop does for ``step``."""


class Hooks(TrainerHook):
    """Several hooks as one, called in order."""

    def __init__(self, hooks: Sequence[TrainerHook] = ()):
        self.hooks = list(hooks)

    def install(self, steps: TrainingSteps) -> None:
        for hook in self.hooks:
            hook.install(steps)

    def before_step(self, step: int) -> None:
        for hook in self.hooks:
            hook.before_step(step)

    def after_step(self, step: int) -> None:
        for hook in self.hooks:
            hook.after_step(step)

    def after_metrics(self, step: int) -> None:
        for hook in self.hooks:
            hook.after_metrics(step)

    def before_save(self, step: int) -> None:
        for hook in self.hooks:
            hook.before_save(step)

    def during_save(self, step: int, write_half: Callable[[], None]) -> None:
        for hook in self.hooks:
            hook.during_save(step, write_half)

    def on_step_end(self, step: int) -> None:
        for hook in self.hooks:
            hook.on_step_end(step)
