"""Preemption: on SIGTERM, save at the next step on every worker and exit.

Cloud schedulers preempt a GPU or TPU job by sending its processes SIGTERM,
then SIGKILL after a grace period. `PreemptionSaver` wraps
`tf.distribute.experimental.PreemptionCheckpointHandler`, which turns the
signal of any one worker into an agreement of all of them (through the
coordination service) on one step to save at: the step after the signal.
Every worker saves the run's checkpoint at that step and the process exits
with `PREEMPTED_EXIT_CODE`, so a restart with the same command resumes at
exactly that step and no step is lost.

TensorFlow's handler does not catch SIGTERM everywhere. It asks the GCE
metadata server where it runs (``failure_handling_util.detect_platform``):
on a GCE VM with GPUs it polls the metadata's maintenance notices instead of
taking SIGTERM; on a GCE VM with only CPUs or TPUs it does nothing at all;
with a `TPUStrategy` it expects Google's internal TPU runtime. Wherever it
did not install a SIGTERM handler, `PreemptionSaver` installs its own: the
signal sets a flag, and the next `check` (the next step boundary) saves
the current step and exits with `PREEMPTED_EXIT_CODE`. In one process (one
device, mirrored GPUs, a TPU) there is nobody to agree with. In a
multi-worker run on a GCE GPU VM the signal is handed to TensorFlow's
handler, which agrees on the step with the other workers as it does off GCE
(then keeps training through its GCE grace period, as for a maintenance
notice, so a SIGKILL ends it after the save); on GCE CPU VMs TensorFlow has
no agreement to hand it to, and SIGTERM keeps its previous handler (a
warning says so at the start).

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
        log: where a warning goes when SIGTERM cannot be handled.

    Use as a context manager: the previous SIGTERM handler comes back when
    the loop ends. Off the main thread, where Python cannot take signals,
    it does nothing. `sigterm` says who takes the signal: ``"tensorflow"``
    (TensorFlow's handler, agreeing across workers), ``"own"`` (ours, one
    process), ``"forwarded"`` (ours, handing it to TensorFlow's agreement) or
    ``None`` (nobody).
    """

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        save: Callable[[], None],
        on_exit: Callable[[], None],
        scratch_dir: str,
        log: Callable[[str], None] = lambda message: None,
    ):
        self._save, self._on_exit, self._log = save, on_exit, log
        self._scratch_dir = scratch_dir
        self._strategy = strategy
        self._handler = None
        self._previous = None
        self._signalled = threading.Event()
        self.sigterm: str | None = None

    def __enter__(self) -> PreemptionSaver:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._previous = signal.getsignal(signal.SIGTERM)
        resolver = None
        multi_worker = False
        if isinstance(self._strategy, tf.distribute.MultiWorkerMirroredStrategy):
            resolver = self._strategy.cluster_resolver
            multi_worker = bool(resolver.cluster_spec().jobs)
        if not isinstance(self._strategy, tf.distribute.TPUStrategy):
            # With a TPUStrategy TensorFlow's handler runs Google's internal TPU
            # preemption check, or (on a TPU VM, a GCE platform) nothing.
            counter = tf.train.CheckpointManager(
                tf.train.Checkpoint(), os.path.join(self._scratch_dir, "unused"), max_to_keep=1
            )
            config = tf.distribute.experimental.TerminationConfig(
                exit_fn=self._exit, save_fn=lambda *_, **__: self._save()
            )
            self._handler = tf.distribute.experimental.PreemptionCheckpointHandler(
                resolver, counter, termination_config=config
            )
        installed = signal.getsignal(signal.SIGTERM)
        if self._handler is not None and getattr(installed, "__self__", None) is self._handler:
            self.sigterm = "tensorflow"
        elif not multi_worker:
            self.sigterm = "own"
            signal.signal(signal.SIGTERM, self._on_sigterm)
        elif hasattr(self._handler, "_received_own_sigterm") and hasattr(
            self._handler, "_sigterm_handler_fn"
        ):
            # A GCE GPU VM: TensorFlow's handler is set up to agree on a step, but
            # listens for maintenance notices only. The signal joins its agreement
            # (what its own SIGTERM handler does off GCE).
            self.sigterm = "forwarded"
            signal.signal(signal.SIGTERM, self._handler._sigterm_handler_fn)
        else:
            self._log(
                "warning: on this platform TensorFlow's preemption handler does not "
                "coordinate a multi-worker run (GCE CPU VMs): SIGTERM does not save a "
                "checkpoint; the run resumes from its last periodic one"
            )
        return self

    @property
    def signalled(self) -> bool:
        """Whether our own handler has taken a SIGTERM not yet acted on."""
        return self._signalled.is_set()

    def _on_sigterm(self, signum, frame) -> None:
        # Only a flag: the save happens at the next step boundary, in `check`.
        del signum, frame
        self._signalled.set()

    def check(self) -> None:
        """Call once per loop iteration, on every worker: saves and exits if
        a preemption was signalled anywhere and this is the agreed step."""
        if self._signalled.is_set():
            # One process: this step boundary is the agreed one.
            self._stop_handler()
            self._save()
            self._exit()
        if self._handler is not None:
            self._handler.save_checkpoint_if_preempted()

    def _exit(self) -> None:
        self._on_exit()
        sys.exit(PREEMPTED_EXIT_CODE)

    def _stop_handler(self) -> None:
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

    def __exit__(self, *exc) -> None:
        self._stop_handler()
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None
