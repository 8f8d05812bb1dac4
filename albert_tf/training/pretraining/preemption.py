"""Preemption: on SIGTERM, save at the next step on every worker and exit.

Cloud schedulers preempt a GPU or TPU job by sending its processes SIGTERM,
then SIGKILL after a grace period. `PreemptionSaver` wraps
`tf.distribute.experimental.PreemptionCheckpointHandler`, which turns the
signal of any one worker into an agreement of all of them (through the
coordination service) on one step to save at: the step after the signal.
Every worker saves the run's checkpoint at that step and the process exits
with `PREEMPTED_EXIT_CODE`, so a restart with the same command resumes at
exactly that step and no step is lost.

The handler counts its own calls (one per optimizer step); the run's step
and input position live in the run's checkpoint, which our ``save`` writes.
Its counter therefore needs no checkpoint of its own: it restarts at 0 on
every worker, which keeps the workers in agreement.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

import tensorflow as tf

__all__ = ["PREEMPTED_EXIT_CODE", "PreemptionSaver"]

#: The exit status of a preempted run that saved its checkpoint; TensorFlow's
#: own default for this case, which cluster managers take as "restart me".
PREEMPTED_EXIT_CODE = 42


class PreemptionSaver:
    """Watches for SIGTERM while a training loop runs.

    Args:
        strategy: the run's strategy; multi-worker runs agree on the step
            through its cluster resolver.
        save: saves the run's checkpoint at the current step.
        on_exit: called after the save, before exiting (log line, clean-up).
        scratch_dir: an empty directory name for the handler's bookkeeping;
            nothing is written there.

    Use as a context manager: the previous SIGTERM handler comes back when
    the loop ends. Off the main thread, where Python cannot take signals,
    it does nothing.
    """

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        save: Callable[[], None],
        on_exit: Callable[[], None],
        scratch_dir: str,
    ):
        self._save, self._on_exit = save, on_exit
        self._scratch_dir = scratch_dir
        self._strategy = strategy
        self._handler = None
        self._previous = None

    def __enter__(self) -> PreemptionSaver:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._previous = signal.getsignal(signal.SIGTERM)
        resolver = None
        if isinstance(self._strategy, tf.distribute.MultiWorkerMirroredStrategy):
            resolver = self._strategy.cluster_resolver
        counter = tf.train.CheckpointManager(
            tf.train.Checkpoint(), os.path.join(self._scratch_dir, "unused"), max_to_keep=1
        )
        config = tf.distribute.experimental.TerminationConfig(
            exit_fn=self._exit, save_fn=lambda *_, **__: self._save()
        )
        self._handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            resolver, counter, termination_config=config
        )
        return self

    def check(self) -> None:
        """Call once per loop iteration, on every worker: saves and exits if
        a preemption was signalled anywhere and this is the agreed step."""
        if self._handler is not None:
            self._handler.save_checkpoint_if_preempted()

    def _exit(self) -> None:
        self._on_exit()
        sys.exit(PREEMPTED_EXIT_CODE)

    def __exit__(self, *exc) -> None:
        if self._handler is not None:
            handler, self._handler = self._handler, None
            # The handler stops its watcher threads only in __del__, which
            # the threads' own references to it delay until exit: stop them
            # now (the same calls __del__ makes).
            for stop in (
                "_stop_cluster_wise_termination_watcher_thread",
                "_stop_poll_termination_signal_thread",
            ):
                getattr(handler, stop, lambda: None)()
            signal.signal(signal.SIGTERM, self._previous)
