"""Deterministic fault injection for recovery tests: ``ALBERT_TF_FAULTS``.

The ``pretrain`` command reads the environment variable ``ALBERT_TF_FAULTS``
and passes it down as `PretrainingOptions.faults`; library code never reads
the environment. A spec is comma-separated ``NAME:STEP`` items:

``nonfinite_at_step:N``
    the first attempt at optimizer step N gets an infinite loss (once).
``nonfinite_from_step:N``
    every attempt from step N on gets an infinite loss.
``sigterm_at_step:N``
    after step N the process sends itself SIGTERM, as a preempting
    scheduler does (it then saves and exits, see `albert_tf.training.pretraining.preemption`).
``kill_after_metrics:N``
    SIGKILL right after step N's metrics line is written (before its
    checkpoint, if it has one).
``kill_before_save:N``
    SIGKILL just before the checkpoint of step N is saved.
``kill_during_save:N``
    SIGKILL halfway through saving the checkpoint of step N: its data file
    is on disk under its final name, its index is not
    (`checkpoint_layout.write_half_checkpoint`).

Steps count from 1: step N is the update that moves the global step from
N - 1 to N.

>>> faults = Faults("nonfinite_at_step:3")
>>> [faults.nonfinite(step) for step in (2, 3, 3)]
[False, True, False]
>>> Faults("nonfinite_from_step:2").nonfinite(5)
True
>>> faults = Faults("kill_before_save:10,sigterm_at_step:4")
>>> [faults.fires("kill_before_save", step) for step in (5, 10, 10)]
[False, True, False]
>>> Faults("explode:3")
Traceback (most recent call last):
...
ValueError: unknown fault 'explode' in ALBERT_TF_FAULTS='explode:3'; known: \
nonfinite_at_step, nonfinite_from_step, sigterm_at_step, kill_after_metrics, kill_before_save, \
kill_during_save
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from albert_tf.training.pretraining.hooks import TrainerHook

if TYPE_CHECKING:
    import tensorflow as tf

    from albert_tf.training.steps import TrainingSteps

#: The environment variable the ``pretrain`` command reads the spec from.
ENV_VAR = "ALBERT_TF_FAULTS"
KNOWN = (
    "nonfinite_at_step",
    "nonfinite_from_step",
    "sigterm_at_step",
    "kill_after_metrics",
    "kill_before_save",
    "kill_during_save",
)


def parse_spec(spec: str | None) -> dict[str, set[int]]:
    """The steps of each known fault in ``spec``; ValueError names a bad item.
    `PretrainingOptions.validate` checks a run's spec with it, `Faults` keeps its result."""
    spec = spec or ""
    steps: dict[str, set[int]] = {name: set() for name in KNOWN}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, step = item.partition(":")
        if name not in KNOWN:
            raise ValueError(
                f"unknown fault {name!r} in {ENV_VAR}={spec!r}; known: {', '.join(KNOWN)}"
            )
        if not step.isdigit() or int(step) < 1:
            raise ValueError(f"{ENV_VAR}: {item!r} needs a step >= 1, as in {name}:3")
        steps[name].add(int(step))
    return steps


class Faults:
    """A parsed fault spec; each ``*_at_step`` fault fires once."""

    def __init__(self, spec: str | None):
        self.spec = spec or ""
        self._pending = parse_spec(spec)

    def __bool__(self) -> bool:
        return any(self._pending.values())

    @property
    def injects_nonfinite(self) -> bool:
        return bool(self._pending["nonfinite_at_step"] or self._pending["nonfinite_from_step"])

    def nonfinite(self, step: int) -> bool:
        """Whether the attempt at optimizer step ``step`` gets an infinite loss."""
        if self.fires("nonfinite_at_step", step):
            return True
        return any(step >= start for start in self._pending["nonfinite_from_step"])

    def fires(self, name: str, step: int) -> bool:
        """Whether the once-only fault ``name`` is due at ``step`` (then spent)."""
        if step in self._pending[name]:
            self._pending[name].discard(step)
            return True
        return False


def kill_this_process() -> None:
    """SIGKILL: no handler, no cleanup, no flush, as a machine that dies."""
    os.kill(os.getpid(), signal.SIGKILL)


def send_sigterm_to_this_process() -> None:
    """The signal a preempting scheduler sends; handled like a real one."""
    os.kill(os.getpid(), signal.SIGTERM)


class FaultInjection(TrainerHook):
    """The trainer hook that carries out a `Faults` spec.

    A non-finite loss comes in through a loss wrapper installed on the steps (a
    factor variable, 1 except at the faulted attempts), so the step graph holds
    nothing of it unless a run asks for it.
    """

    def __init__(self, faults: Faults):
        self.faults = faults
        self._factor: tf.Variable | None = None
        self._injected = False

    def install(self, steps: TrainingSteps) -> None:
        if not self.faults.injects_nonfinite:
            return
        import tensorflow as tf

        with steps.strategy.scope():
            self._factor = tf.Variable(1.0, trainable=False, name="fault_loss_factor")
        factor = self._factor
        steps.loss_transforms.append(lambda loss: loss * factor)

    def before_step(self, step: int) -> None:
        self._injected = self._factor is not None and self.faults.nonfinite(step)
        if self._injected:
            self._factor.assign(float("inf"))

    def after_step(self, step: int) -> None:
        if self._injected:
            self._factor.assign(1.0)
            self._injected = False

    def after_metrics(self, step: int) -> None:
        if self.faults.fires("kill_after_metrics", step):
            kill_this_process()

    def before_save(self, step: int) -> None:
        if self.faults.fires("kill_before_save", step):
            kill_this_process()

    def during_save(self, step: int, write_half: Callable[[], None]) -> None:
        if self.faults.fires("kill_during_save", step):
            write_half()
            kill_this_process()

    def on_step_end(self, step: int) -> None:
        if self.faults.fires("sigterm_at_step", step):
            send_sigterm_to_this_process()
