"""A pretraining run's checkpoints: saving a step (with each worker's input position
beside it) and, when the run starts again, reading back the newest intact one.

Where the files go is `albert_tf.training.pretraining.checkpoint_layout`; this module
decides what is written and what is read back. A checkpoint holds the model, the
optimizer (its step counter is the global step) and, in one process without a tf.data
service, the input iterator; with several workers each saves its own input position
beside the run's checkpoint. A checkpoint that does not read back whole is skipped
for an older one; an input position of another kind of run is not used (the input
starts again from the beginning, with a log line saying why).
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.training.pretraining import checkpoint_layout
from albert_tf.training.pretraining.options import PretrainingOptions

__all__ = ["RunCheckpoints"]


class RunCheckpoints:
    """This worker's checkpoints of one run.

    Args:
        options: the run's options (``model_dir``, ``keep_checkpoint_max``,
            ``data_service``).
        model, optimizer: what a checkpoint holds.
        iterator: the training input; saved in the checkpoint in one process without
            a tf.data service, beside it (this worker's own) with several workers.
        workers, worker: the number of training processes and this one's index.
        chief: whether this worker writes the run's checkpoints (the others write
            theirs to a scratch directory, `checkpoint_layout.checkpoint_dir`).
    """

    def __init__(
        self,
        options: PretrainingOptions,
        model: tf.Module,
        optimizer: tf.Module,
        iterator,
        *,
        workers: int = 1,
        worker: int = 0,
        chief: bool = True,
    ):
        self.options = options
        self.model, self.optimizer = model, optimizer
        self.workers, self.worker = workers, worker
        #: Where this worker saves.
        self.directory = checkpoint_layout.checkpoint_dir(options.model_dir, chief, worker)
        # A service iterator cannot be saved: its run resumes with the service's next
        # batches instead of at the same input position. With several workers each
        # saves its own position (tf.data's buffers hold rows cut for that worker).
        in_checkpoint = not options.data_service and workers == 1
        self.checkpoint = checkpoint_layout.training_checkpoint(
            model, optimizer, iterator if in_checkpoint else None
        )
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self.directory, max_to_keep=options.keep_checkpoint_max
        )
        #: This worker's own input positions (multi-worker runs only).
        self.input_manager: tf.train.CheckpointManager | None = None
        if workers > 1:
            self.input_manager = tf.train.CheckpointManager(
                tf.train.Checkpoint(iterator=iterator),
                checkpoint_layout.input_position_dir(options.model_dir, workers, worker),
                max_to_keep=options.keep_checkpoint_max,
            )

    # ------------------------------------------------------------------ saving
    def save(self, step: int) -> None:
        """Saves ``step``: this worker's input position first, the run's checkpoint
        last, so a save cut short leaves no checkpoint that claims positions it lacks."""
        if self.input_manager is not None:
            self.input_manager.save(checkpoint_number=step)
        self.manager.save(checkpoint_number=step)

    def save_unless_saved(self, step: int) -> None:
        """Saves ``step`` if its checkpoint is not the newest already."""
        if self.manager.latest_checkpoint != checkpoint_layout.checkpoint_path(
            self.directory, step
        ):
            self.save(step)

    def write_half(self, step: int) -> None:
        """Half a checkpoint of ``step`` (fault injection: a save cut short)."""
        checkpoint_layout.write_half_checkpoint(
            self.checkpoint, checkpoint_layout.checkpoint_path(self.directory, step)
        )

    # ------------------------------------------------------------------ restoring
    def restore(self, log=print) -> str | None:
        """Restores the newest intact checkpoint, if any; returns its path.

        A checkpoint that does not read back whole (a truncated or corrupted
        file, a save cut short) is skipped with a log line naming it, and
        the next older one is tried. If checkpoints exist but none is
        intact this raises rather than start the run again from scratch.
        """
        directory = checkpoint_layout.chief_checkpoint_dir(self.options.model_dir)
        damaged = []
        for path in checkpoint_layout.saved_checkpoints(directory):
            try:
                # Reads the checkpoint's index: a damaged one fails here already.
                input_position = self._input_position_of(path, log)
                if input_position == "incomplete":
                    damaged.append(path)
                    continue
                checkpoint = self.checkpoint
                if input_position == "afresh" and self.input_manager is None:
                    # Saved by a --data_service or multi-worker run: no
                    # position of this run's kind to continue from.
                    checkpoint = checkpoint_layout.training_checkpoint(self.model, self.optimizer)
                # Every variable is assigned again by an older checkpoint if
                # this one fails part-way.
                checkpoint.restore(path).assert_existing_objects_matched()
            except (tf.errors.OpError, IndexError) as e:
                # OpError: DataLoss (checksum), NotFound (missing data file);
                # IndexError: "Read less bytes than requested" (truncated).
                reason = str(e).strip().splitlines()[0][:200]
                log(f"skipping damaged checkpoint {path}: {type(e).__name__}: {reason}")
                damaged.append(path)
                continue
            if input_position == "own":
                self._restore_own_input_position(checkpoint_layout.checkpoint_step(path))
            return path
        if damaged:
            raise RuntimeError(
                f"No intact checkpoint in {directory}: {', '.join(damaged)} could not be "
                "read (see above). Not starting from scratch over them: restore the files "
                "from a backup, or move them away (or pass a new --model_dir) to start again."
            )
        return None

    def _input_position_of(self, path: str, log) -> str:
        """How the run's input resumes from the checkpoint at ``path``: ``"saved"`` (in
        it), ``"own"`` (each worker's, beside it), ``"incomplete"`` (some worker's is
        missing: a save cut short; try an older checkpoint) or ``"afresh"`` (none of
        this run's kind: the input starts again from the beginning)."""
        options = self.options
        if options.data_service:
            return "afresh"  # the service deals the next batches; nothing to say
        step = checkpoint_layout.checkpoint_step(path)
        if self.input_manager is None:
            if checkpoint_layout.holds_input_position(path):
                return "saved"
            log(
                f"{path} holds no input position (a multi-worker or --data_service run "
                "saved it): the input starts again from the beginning of the data"
            )
            return "afresh"
        missing = checkpoint_layout.workers_without_input_position(
            options.model_dir, self.workers, step
        )
        if not missing:
            return "own"
        # Every worker sees the same files, so all take the same branch. Each
        # writes its position before the checkpoint, so the chief's is there
        # whenever positions of this worker count were saved at all; and a run
        # that saved positions at an older step saved them at every later one.
        positions = checkpoint_layout.input_positions_dir(options.model_dir, self.workers)
        older = [
            s
            for s in checkpoint_layout.saved_steps(
                checkpoint_layout.input_position_dir(options.model_dir, self.workers, 0)
            )
            if s < step
        ]
        if len(missing) < self.workers or older:
            log(
                f"skipping checkpoint {path}: the input position of worker(s) "
                f"{', '.join(map(str, missing))} at step {step} is missing from {positions} "
                "(a save cut short, or files removed)"
            )
            return "incomplete"
        if checkpoint_layout.holds_input_position(path):
            saved_by = "one input position for all workers, as runs before per-worker positions"
        else:
            saved_by = "a run with another number of workers, or one process"
        log(
            f"{path} has no input positions for {self.workers} workers (saved by {saved_by}): "
            "the input starts again from the beginning of the data"
        )
        return "afresh"

    def _restore_own_input_position(self, step: int) -> None:
        prefix = checkpoint_layout.checkpoint_path(self.input_manager.directory, step)
        positions = checkpoint_layout.input_positions_dir(self.options.model_dir, self.workers)
        try:
            self.input_manager.checkpoint.restore(prefix).assert_existing_objects_matched()
        except (tf.errors.OpError, IndexError, AssertionError) as e:
            # Not skipped to an older checkpoint: the other workers, whose
            # positions read back, would resume at another step.
            raise RuntimeError(
                f"Worker {self.worker}'s input position {prefix} could not be read "
                f"({type(e).__name__}: {str(e).strip().splitlines()[0][:200]}). Restore it "
                f"from a backup, or move {positions} away to resume with the input starting "
                "from the beginning of the data."
            ) from e
