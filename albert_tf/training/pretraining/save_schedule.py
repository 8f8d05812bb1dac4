"""When a pretraining run saves its checkpoint: every ``save_checkpoints_steps``
steps, and about every ``save_checkpoints_seconds`` of training.

Every worker of a multi-worker run must save at the same steps (each saves its
own input position beside the chief's checkpoint, and a resume needs all of
them at one step). Each worker's clock is its own, so "ten minutes have
passed" is not decided by the clock at each save. Instead the seconds become a
step interval once: the schedule times the first `CALIBRATION_STEPS` steps after
the first loop of each start (the first loop holds tracing and compilation),
and ``agree`` turns each worker's interval into one for all of them (the
trainer's is the least over the workers, one all-gather at that step, which
every worker reaches in the same loop iteration since the global step is the
same everywhere). From then on the run saves at every multiple of
``save_checkpoints_steps`` and of that interval, a pure function of the step.

A run whose step time changes later (say its input slows) drifts from the
bound; each restart measures again.

>>> clock = iter([0.0, 10.0, 20.0]).__next__  # seconds; one step per 1 s
>>> schedule = SaveSchedule(1000, 60.0, start_step=0, clock=clock)
>>> schedule.next_stop(0), schedule.due(60)
(1000, False)
>>> schedule.observe(1)  # the first loop's end: timing starts (clock 0)
>>> schedule.next_stop(1)  # a loop stops where timing ends
11
>>> schedule.observe(11)  # 10 steps in 10 s: 60 s is 60 steps
>>> schedule.every_steps, schedule.next_stop(11), schedule.due(60), schedule.due(1000)
(60, 60, True, True)
>>> SaveSchedule(1000, 0.0, start_step=0).next_stop(5)  # seconds off: steps only
1000
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["CALIBRATION_STEPS", "SaveSchedule"]

#: Steps timed (after the first loop) to turn seconds into a step interval.
CALIBRATION_STEPS = 10


class SaveSchedule:
    """The steps at which a run saves.

    Args:
        save_checkpoints_steps: save at every multiple of this step.
        save_checkpoints_seconds: and at every multiple of the step interval
            this many seconds took on the timed steps (0: steps only).
        start_step: the step the run (re)started at.
        agree: maps this worker's interval to the one every worker uses
            (the identity for one process); called once, at the same step on
            every worker.
        clock: seconds, monotonic.
    """

    def __init__(
        self,
        save_checkpoints_steps: int,
        save_checkpoints_seconds: float,
        start_step: int,
        agree: Callable[[int], int] = lambda steps: steps,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._steps = save_checkpoints_steps
        self._seconds = save_checkpoints_seconds
        self._agree, self._clock = agree, clock
        self._start = start_step
        self._timed_from: tuple[int, float] | None = None
        #: The interval the seconds bound came to (None: not measured yet, or off).
        self.every_steps: int | None = None

    @property
    def _measuring(self) -> bool:
        return self._seconds > 0 and self.every_steps is None

    def _calibration_end(self) -> int | None:
        if not self._measuring or self._timed_from is None:
            return None
        return self._timed_from[0] + CALIBRATION_STEPS

    def observe(self, step: int) -> None:
        """Call at every loop boundary, on every worker, with the step reached."""
        if not self._measuring or step <= self._start:
            return
        if self._timed_from is None:
            self._timed_from = (step, self._clock())
            return
        first_step, first_time = self._timed_from
        if step >= first_step + CALIBRATION_STEPS:
            per_step = max(self._clock() - first_time, 1e-9) / (step - first_step)
            self.every_steps = max(1, int(self._agree(max(1, int(self._seconds / per_step)))))

    def intervals(self) -> list[int]:
        """The step intervals a loop must stop at (for saving)."""
        return [k for k in (self._steps, self.every_steps) if k]

    def next_stop(self, step: int) -> int:
        """The next step after ``step`` a loop must end at: a save, or the end of timing."""
        stops = [step + k - step % k for k in self.intervals()]
        end = self._calibration_end()
        if end is not None and end > step:
            stops.append(end)
        return min(stops, default=2**62)

    def due(self, step: int) -> bool:
        """Whether the run saves at ``step``."""
        return any(step % k == 0 for k in self.intervals())
