"""MLM + SOP pretraining with `tf.distribute`, resumable from checkpoints.

One code path serves every strategy (default, one device, mirrored,
multi-worker, TPU). `PretrainingTrainer` is the loop; its parts live beside it:

* `albert_tf.training.pretraining.options`: `PretrainingOptions`, the recipe.
* `albert_tf.training.pretraining.steps`: the compiled steps (how a global batch is
  split over replicas, losses normalised, gradients reduced, clipped and
  accumulated).
* `albert_tf.training.pretraining.checkpoint_layout`: where checkpoints go. They hold
  model, optimizer (its step counter is the global step) and the input
  iterator (with several workers, each worker's own, beside them), so a
  restarted run continues where it stopped on the same data.
* `albert_tf.training.pretraining.run_record`: refuses to resume another model or recipe.
* `albert_tf.training.metrics_log`: TensorBoard and ``metrics.jsonl``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import time
from collections.abc import Sequence

import keras
import tensorflow as tf
from tqdm import tqdm

from albert_tf import storage
from albert_tf.config import AlbertConfig
from albert_tf.data.pipeline import PipelineConfig, held_out_dataset, pretraining_dataset
from albert_tf.layers.encoder import set_recompute
from albert_tf.layers.implementations import (
    choose_implementation,
    model_implementation,
    set_implementation,
)
from albert_tf.models.pretraining_model import AlbertPretrainingModel
from albert_tf.training import optimization
from albert_tf.training.devices import Devices, auto_jit_compile, setup_line
from albert_tf.training.evaluation import sum_over_batches, with_standard_errors
from albert_tf.training.losses import summarize
from albert_tf.training.metrics_log import MetricsLog
from albert_tf.training.precision import dtype_policy, resolve_precision
from albert_tf.training.pretraining import checkpoint_layout, run_record
from albert_tf.training.pretraining.faults import FaultInjection, Faults
from albert_tf.training.pretraining.hooks import Hooks, TrainerHook
from albert_tf.training.pretraining.options import PretrainingOptions
from albert_tf.training.pretraining.preemption import PREEMPTED_EXIT_CODE, PreemptionSaver
from albert_tf.training.pretraining.save_schedule import SaveSchedule
from albert_tf.training.pretraining.steps import PretrainingSteps
from albert_tf.training.strategies import (
    WorkerLostError,
    agreed_minimum,
    is_chief,
    num_workers,
    worker_index,
    worker_lost_message,
)

__all__ = ["PretrainingTrainer", "data_service_job_name"]

# How a multi-worker step fails when a peer dies or stops answering.
_PEER_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.DeadlineExceededError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
)


def data_service_job_name(options: PretrainingOptions) -> str:
    """The tf.data service job of a run's training data.

    Stable, so a restarted run rejoins its job while the dispatcher keeps it;
    derived from the directory and everything that shapes the batches, so two
    runs (or one run with another input) never share a job.
    """
    model_dir = options.model_dir
    key = [
        model_dir if storage.is_remote(model_dir) else os.path.abspath(model_dir),
        options.train_files,
        options.seed,
        options.max_seq_length,
        options.max_predictions_per_seq,
        options.micro_batch_size,
        options.micro_batch_tokens,
        options.data_service_mode,
    ]
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
    return f"albert_tf_pretrain_{digest}"


def build_model(
    config: AlbertConfig, options: PretrainingOptions, devices: Devices | None = None
) -> AlbertPretrainingModel:
    """The model a run trains, in the run's (resolved) precision, with the layers'
    implementation chosen for ``devices`` (default: this process's) and the run's
    XLA and fused-kernel options. Call it under the strategy's scope."""
    model = AlbertPretrainingModel.from_albert_config(config, dtype=dtype_policy(options.precision))
    devices = devices or Devices.detect()
    name = choose_implementation(
        accelerator=devices.accelerator,
        jit_compile=bool(options.jit_compile),
        fused_kernels=options.fused_kernels,
    )
    set_implementation(model, name)
    set_recompute(model, options.recompute)
    return model


def build_optimizer(options: PretrainingOptions) -> keras.optimizers.Optimizer:
    """LAMB (or AdamW) with warm-up and polynomial decay; float16 wraps it in loss
    scaling. Call it under the strategy's scope."""
    return optimization.build_optimizer(
        options.learning_rate,
        options.num_train_steps,
        options.num_warmup_steps,
        weight_decay_rate=options.weight_decay_rate,
        optimizer=options.optimizer,
        precision=options.precision,
    )


def build_inputs(
    options: PretrainingOptions,
    num_replicas: int = 1,
    worker_rows: tuple[int, int] | None = None,
) -> tf.data.Dataset:
    """The run's masked global batches (features, labels), each a multiple of
    ``num_replicas`` examples; with ``worker_rows`` ``(num_workers, index)``,
    this worker's rows of each."""
    config = PipelineConfig(
        batch_size=options.micro_batch_size,
        max_seq_length=options.max_seq_length,
        max_predictions_per_seq=options.max_predictions_per_seq,
        seed=options.seed,
        tokens_per_batch=options.micro_batch_tokens,
        batch_size_multiple=num_replicas,
        worker_rows=worker_rows,
        data_service=options.data_service,
        data_service_mode=options.data_service_mode,
        job_name=data_service_job_name(options) if options.data_service else None,
    )
    return pretraining_dataset(options.train_files, config)


class PretrainingTrainer:
    """Builds model, optimizer and data under a strategy (`build_model`,
    `build_optimizer`, `build_inputs`), claims the run directory and trains.

    Example:
        >>> trainer = PretrainingTrainer(config, options, strategy)  # doctest: +SKIP
        >>> trainer.train()                                          # doctest: +SKIP
        >>> trainer.evaluate()                                       # doctest: +SKIP
    """

    def __init__(
        self,
        config: AlbertConfig,
        options: PretrainingOptions,
        strategy: tf.distribute.Strategy | None = None,
        hooks: Sequence[TrainerHook] = (),
    ):
        self.config = config
        self.strategy = strategy or tf.distribute.get_strategy()
        self.num_replicas = self.strategy.num_replicas_in_sync
        options.validate(self.num_replicas)
        if options.data_service and num_workers(self.strategy) > 1:
            # Every worker must read the same records in the same order (and keep
            # its rows of each global batch); a service job hands each batch to
            # one reader only.
            raise ValueError(
                "--data_service feeds one training process; with several workers "
                "(--strategy=multi_worker_mirrored) each must read the same global "
                "batch, which a tf.data service job does not give. Drop --data_service "
                "or train in one process."
            )
        #: What the defaults were chosen for.
        self.devices = Devices.detect(self.strategy)
        # "auto" resumes in the precision the run started with (the record
        # holds the resolved one), whatever machine it resumes on.
        previous = run_record.read_run_record(options.model_dir)
        recorded = previous.get("options", {}).get("precision")
        if options.precision == "auto" and recorded:
            precision = recorded
        else:
            precision = resolve_precision(options.precision, devices=self.devices)
        jit_compile = options.jit_compile
        if jit_compile is None:
            jit_compile = auto_jit_compile(self.devices)
        self.options = options = dataclasses.replace(
            options, precision=precision, jit_compile=jit_compile
        )
        self.chief = is_chief(self.strategy)
        # The record is read once (above) and built once, here.
        record = run_record.run_record(config, options)
        run_record.check_compatible(options.model_dir, record, previous)
        self.metrics = MetricsLog(options.model_dir, chief=self.chief)
        faults = Faults(options.faults)
        self.hooks = Hooks([*([FaultInjection(faults)] if faults else []), *hooks])
        #: The checkpoint `restore` read, if any.
        self.restored_from: str | None = None
        # Evaluation depends only on the weights: cached per step.
        self._last_eval: dict[str, float] | None = None
        keras.utils.set_random_seed(options.seed)

        with self.strategy.scope():
            self.model = build_model(config, options, self.devices)
            #: The model's implementation, chosen once for this run's devices and XLA.
            self.implementation = model_implementation(self.model)
            self.optimizer = build_optimizer(options)
            self.steps = PretrainingSteps(self.model, self.optimizer, self.strategy, options)
            self.hooks.install(self.steps)
        # A plain iterator: checkpointable (a DistributedIterator is not). Every
        # worker reads the same records in the same order and parses and masks
        # only its rows of each global batch. tf.data's buffers then hold rows
        # cut for this worker, so each worker saves its own input position
        # (checkpoint_layout). With a tf.data service the global batches come
        # from the service, one per request.
        self.workers = num_workers(self.strategy)
        self.worker = worker_index(self.strategy)
        worker_rows = (self.workers, self.worker) if self.workers > 1 else None
        self.train_iterator = iter(build_inputs(options, self.num_replicas, worker_rows))
        # A service iterator cannot be saved: its run resumes with the
        # service's next batches instead of at the same input position.
        in_checkpoint = not options.data_service and worker_rows is None
        self.checkpoint = checkpoint_layout.training_checkpoint(
            self.model,
            self.optimizer,
            self.train_iterator if in_checkpoint else None,
        )
        self.manager = tf.train.CheckpointManager(
            self.checkpoint,
            self._checkpoint_dir(),
            max_to_keep=options.keep_checkpoint_max,
        )
        #: This worker's own input positions (multi-worker runs only).
        self.input_manager: tf.train.CheckpointManager | None = None
        if worker_rows is not None:
            self.input_manager = tf.train.CheckpointManager(
                tf.train.Checkpoint(iterator=self.train_iterator),
                checkpoint_layout.input_position_dir(options.model_dir, *worker_rows),
                max_to_keep=options.keep_checkpoint_max,
            )
        # Only a run that could be set up claims the directory.
        if self.chief:
            run_record.write_run_record(options.model_dir, record)

    # ------------------------------------------------------------------ set-up
    def describe(self) -> str:
        """The start-up line: what was found and what was chosen for it."""
        options = self.options
        return setup_line(
            self.devices,
            self.strategy,
            options.precision,
            bool(options.jit_compile),
            options.fused_kernels,
        )

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def _checkpoint_dir(self) -> str:
        return checkpoint_layout.checkpoint_dir(
            self.options.model_dir, self.chief, worker_index(self.strategy)
        )

    def train_one_step(self, step: int | None = None) -> dict[str, tf.Tensor]:
        """One attempt at step ``step`` (default: the next one); its sums as tensors,
        ``applied`` False if it was skipped."""
        # The step's micro-batches are read first: with accumulation, their
        # total counts normalise every one of them.
        batches = [
            next(self.train_iterator) for _ in range(self.options.gradient_accumulation_steps)
        ]
        step = self.step + 1 if step is None else step
        self.hooks.before_step(step)
        sums = self.steps.train(batches)
        self.hooks.after_step(step)
        return sums

    # ------------------------------------------------------------------ loops
    def restore(self, log=print) -> int:
        """Restores the newest intact checkpoint, if any; returns the step.

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
            self.restored_from = path
            return self.step
        if damaged:
            raise RuntimeError(
                f"No intact checkpoint in {directory}: {', '.join(damaged)} could not be "
                "read (see above). Not starting from scratch over them: restore the files "
                "from a backup, or move them away (or pass a new --model_dir) to start again."
            )
        return self.step

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

    def train(self, log=print) -> dict[str, float]:
        """Trains to ``num_train_steps`` from wherever the checkpoint left off."""
        options = self.options
        start = self.restore(log=log)
        if start:
            log(f"resumed from step {start} ({self.restored_from})")
        self.metrics.truncate(start)
        if start >= options.num_train_steps:
            log(f"already at step {start} >= num_train_steps={options.num_train_steps}")
            return {}
        #: When this run saves (steps, and seconds measured as steps).
        self.save_schedule = SaveSchedule(
            options.save_checkpoints_steps,
            options.save_checkpoints_seconds,
            start_step=start,
            agree=functools.partial(agreed_minimum, self.strategy),
        )
        bar = tqdm(
            total=options.num_train_steps,
            initial=start,
            disable=not (options.progress_bar and self.chief),
            unit="step",
            dynamic_ncols=True,
        )
        preemption = PreemptionSaver(
            self.strategy,
            save=self._save_current_step,
            on_exit=lambda: self._preempted(bar, log),
            scratch_dir=os.path.join(options.model_dir, "preemption"),
            log=log,
        )
        try:
            with preemption:
                last = self._train_loop(bar, preemption, log)
        except _PEER_ERRORS as e:
            if num_workers(self.strategy) == 1:
                raise
            bar.close()
            saved = checkpoint_layout.saved_checkpoints(
                checkpoint_layout.chief_checkpoint_dir(options.model_dir)
            )
            resume = checkpoint_layout.checkpoint_step(saved[0]) if saved else 0
            raise WorkerLostError(worker_lost_message(e, self.step, resume)) from e
        bar.close()
        self._save_current_step()
        if not self.chief:
            storage.rmtree(self._checkpoint_dir(), ignore_errors=True)
        return last

    def _loop_length(self, step: int) -> int:
        """Steps the next call may run from ``step``: at most ``steps_per_loop``, and
        never past a step that logs, saves, evaluates or ends the run."""
        options = self.options
        intervals = [options.log_every_steps]
        if options.eval_files and options.eval_every_steps:
            intervals.append(options.eval_every_steps)
        next_stop = min(
            options.num_train_steps,
            self.save_schedule.next_stop(step),
            *(step + k - step % k for k in intervals if k > 0),
        )
        return max(1, min(options.steps_per_loop, next_stop - step))

    def _train_loop(self, bar, preemption: PreemptionSaver, log) -> dict[str, float]:
        options = self.options
        # The steps' outputs stay tensors until a metrics line needs them: the host
        # reads back whether (how many) steps were applied, and nothing else, so it
        # can run ahead of the device. Steps are counted here rather than read from
        # the optimizer.
        window: list[dict[str, tf.Tensor]] = []
        window_start, window_steps = time.perf_counter(), 0
        last: dict[str, float] = {}
        # Steps skipped for a non-finite gradient: in a row, since the last
        # metrics line, and in this process.
        consecutive = skipped = skipped_total = 0
        step = self.step
        while step < options.num_train_steps:
            preemption.check()
            if options.steps_per_loop == 1:
                attempts = 1
                sums = self.train_one_step(step + 1)
                applied = int(bool(sums.pop("applied")))
                run = 0 if applied else consecutive + 1
            else:
                # One compiled loop, also when a boundary leaves room for one step
                # (train_fn would be a second trace, with XLA a second compile).
                self.hooks.before_step(step + 1)
                sums = self.steps.train_loop(
                    self.train_iterator, self._loop_length(step), consecutive
                )
                attempts = int(sums.pop("attempts"))
                applied = int(sums.pop("applied_steps"))
                run = int(sums.pop("consecutive_skipped"))
                self.hooks.after_step(step + max(applied, 1))
            if applied < attempts:
                # Skipped (see steps.py): the batch is used up, the step is
                # retried on the next one.
                missed = attempts - applied
                consecutive = run
                skipped += missed
                skipped_total += missed
                bar.set_postfix(skipped=skipped_total)
                if attempts == 1:
                    log(f"step {step + 1}: non-finite gradient, skipped (weights unchanged)")
                else:
                    log(
                        f"{missed} of {attempts} steps from step {step + 1} on had a "
                        "non-finite gradient: skipped (weights unchanged by them)"
                    )
                if consecutive >= options.max_consecutive_nonfinite_steps:
                    raise FloatingPointError(
                        f"{consecutive} steps in a row had a non-finite loss or gradient, "
                        f"the last at step {step + applied + 1}; the weights are still those "
                        f"of step {step + applied}. Lower --learning_rate (or lengthen "
                        "--num_warmup_steps), use --precision=float32 or bfloat16 instead of "
                        "float16, or check the training data. "
                        "--max_consecutive_nonfinite_steps sets this limit."
                    )
                if applied == 0:
                    continue
            else:
                consecutive = 0
            window.append(sums)
            window_steps += applied
            step += applied
            bar.update(applied)
            if step % options.log_every_steps == 0 or step == options.num_train_steps:
                totals = {
                    k: float(tf.add_n([step_sums[k] for step_sums in window])) for k in window[0]
                }
                elapsed = time.perf_counter() - window_start
                last = summarize(totals)
                last["grad_norm"] = totals["grad_norm"] / window_steps
                last["examples_per_second"] = totals["examples"] / elapsed
                last["tokens_per_second"] = totals["tokens"] / elapsed
                last["learning_rate"] = float(self.optimizer.learning_rate)
                last["skipped_steps"] = float(skipped)
                skipped = 0
                self.metrics.write("train", last, step)
                bar.set_postfix(
                    loss=f"{last.get('mlm_loss', 0) + last.get('sop_loss', 0):.3f}",
                    mlm_acc=f"{last.get('mlm_accuracy', 0):.3f}",
                    sop_acc=f"{last.get('sop_accuracy', 0):.3f}",
                    ex_s=f"{last['examples_per_second']:.1f}",
                    skipped=skipped_total,
                )
                window, window_start, window_steps = [], time.perf_counter(), 0
            self.hooks.after_metrics(step)
            if (
                options.eval_files
                and options.eval_every_steps
                and (step % options.eval_every_steps == 0)
            ):
                self.evaluate(log=lambda *_: None)
            # Saved after this step's metrics are written: a run killed in
            # between resumes from the previous checkpoint and rewrites them,
            # so the learning curve never misses a step. Every worker decides the
            # same from the step alone (save_schedule).
            self.save_schedule.observe(step)
            if self.save_schedule.due(step):
                self.hooks.before_save(step)
                self.hooks.during_save(step, functools.partial(self._write_half, step))
                self._save(step)
            self.hooks.on_step_end(step)
        return last

    def _write_half(self, step: int) -> None:
        checkpoint_layout.write_half_checkpoint(
            self.checkpoint, checkpoint_layout.checkpoint_path(self._checkpoint_dir(), step)
        )

    def _save_current_step(self) -> None:
        current = checkpoint_layout.checkpoint_path(self._checkpoint_dir(), self.step)
        if self.manager.latest_checkpoint != current:
            self._save(self.step)

    def _save(self, step: int) -> None:
        # This worker's input position first: the run's checkpoint of a step is
        # written last, so a save cut short leaves no checkpoint that claims
        # positions it lacks.
        if self.input_manager is not None:
            self.input_manager.save(checkpoint_number=step)
        self.manager.save(checkpoint_number=step)

    def _preempted(self, bar, log) -> None:
        bar.close()
        if not self.chief:
            storage.rmtree(self._checkpoint_dir(), ignore_errors=True)
        log(
            f"preempted (SIGTERM): checkpoint saved at step {self.step}; exiting with "
            f"status {PREEMPTED_EXIT_CODE}. The same command resumes at step {self.step}."
        )

    def evaluate(self, log=print) -> dict[str, float]:
        """Held-out MLM loss/accuracy and sentence-task accuracy.

        The result depends only on the weights, so a second call at the same
        step (the entry point's final evaluation after a periodic one at the
        last step) returns the first instead of measuring and logging twice.
        """
        options = self.options
        if not options.eval_files:
            raise ValueError("No eval_files given.")
        cached = self._last_eval
        if cached is not None and cached["step"] == self.step:
            log("eval " + ", ".join(f"{k}={v:.4f}" for k, v in cached.items()))
            return dict(cached)
        # One pass in file order, the last short batch kept: a small held-out
        # set counts whole.
        dataset = held_out_dataset(
            options.eval_files,
            batch_size=options.eval_batch_size,
            max_seq_length=options.max_seq_length,
            max_predictions_per_seq=options.max_predictions_per_seq,
            seed=options.seed,
        )
        totals = sum_over_batches(self.steps.evaluate, dataset, options.num_eval_steps)
        if not totals:
            raise ValueError(f"The eval data {options.eval_files} holds no examples.")
        results = with_standard_errors(summarize(totals), totals)
        results["step"] = self.step
        self.metrics.write("eval", {k: v for k, v in results.items() if k != "step"}, self.step)
        log("eval " + ", ".join(f"{k}={v:.4f}" for k, v in results.items()))
        self._last_eval = dict(results)
        return results
