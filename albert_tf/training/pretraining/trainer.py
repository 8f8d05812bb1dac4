"""The pretraining run loop: MLM + SOP with `tf.distribute`, resumable from checkpoints.

One code path serves every strategy (default, one device, mirrored,
multi-worker, TPU). `PretrainingTrainer` sets a run up and runs its steps: it
restores, trains in compiled steps or loops of them, logs, evaluates and saves on
schedule, skips non-finite steps and stops on too many, and saves when preempted.
Its parts live beside it, one job each:

* `albert_tf.training.pretraining.options`: `PretrainingOptions`, the recipe.
* `albert_tf.training.pretraining.build`: the model, optimizer and input pipeline a
  run is built from.
* `albert_tf.training.pretraining.steps`: the compiled steps (how a global batch is
  split over replicas, losses normalised, gradients reduced, clipped and
  accumulated).
* `albert_tf.training.pretraining.run_checkpoints`: saving a step and restoring the
  newest intact checkpoint (model, optimizer, whose step counter is the global step,
  and the input position), so a restarted run continues where it stopped on the
  same data; `albert_tf.training.pretraining.checkpoint_layout`: where they go.
* `albert_tf.training.pretraining.held_out`: the held-out evaluation.
* `albert_tf.training.pretraining.run_record`: refuses to resume another model or recipe.
* `albert_tf.training.metrics_log`: TensorBoard and ``metrics.jsonl``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Sequence

import keras
import tensorflow as tf
from tqdm import tqdm

from albert_tf import storage
from albert_tf.config import AlbertConfig
from albert_tf.layers.implementations import model_implementation
from albert_tf.training.devices import Devices, auto_jit_compile, setup_line
from albert_tf.training.losses import summarize
from albert_tf.training.metrics_log import MetricsLog
from albert_tf.training.precision import resolve_precision
from albert_tf.training.pretraining import checkpoint_layout, run_record
from albert_tf.training.pretraining.build import (
    build_inputs,
    build_model,
    build_optimizer,
    data_service_job_name,
)
from albert_tf.training.pretraining.faults import FaultInjection, Faults
from albert_tf.training.pretraining.held_out import HeldOutEvaluation
from albert_tf.training.pretraining.hooks import Hooks, TrainerHook
from albert_tf.training.pretraining.options import PretrainingOptions
from albert_tf.training.pretraining.preemption import PREEMPTED_EXIT_CODE, PreemptionSaver
from albert_tf.training.pretraining.run_checkpoints import RunCheckpoints
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

# The builders are importable from here too, as benchmarks import them.
__all__ = [
    "PretrainingTrainer",
    "build_inputs",
    "build_model",
    "build_optimizer",
    "data_service_job_name",
]

# How a multi-worker step fails when a peer dies or stops answering.
_PEER_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.DeadlineExceededError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
)


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
        keras.utils.set_random_seed(options.seed)

        with self.strategy.scope():
            self.model = build_model(config, options, self.devices)
            #: The model's implementation, chosen once for this run's devices and XLA.
            self.implementation = model_implementation(self.model)
            self.optimizer = build_optimizer(options)
            self.steps = PretrainingSteps(self.model, self.optimizer, self.strategy, options)
            self.hooks.install(self.steps)
        self.held_out = HeldOutEvaluation(options, self.steps, self.metrics)
        # A plain iterator: checkpointable (a DistributedIterator is not). Every
        # worker reads the same records in the same order and parses and masks
        # only its rows of each global batch. tf.data's buffers then hold rows
        # cut for this worker, so each worker saves its own input position
        # (RunCheckpoints). With a tf.data service the global batches come
        # from the service, one per request.
        self.workers = num_workers(self.strategy)
        self.worker = worker_index(self.strategy)
        worker_rows = (self.workers, self.worker) if self.workers > 1 else None
        self.train_iterator = iter(build_inputs(options, self.num_replicas, worker_rows))
        self.checkpoints = RunCheckpoints(
            options,
            self.model,
            self.optimizer,
            self.train_iterator,
            workers=self.workers,
            worker=self.worker,
            chief=self.chief,
        )
        #: The run's `tf.train.CheckpointManager` on this worker.
        self.manager = self.checkpoints.manager
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

    def restore(self, log=print) -> int:
        """Restores the newest intact checkpoint, if any (`RunCheckpoints.restore`:
        damaged ones are skipped, none intact raises); returns the step."""
        path = self.checkpoints.restore(log)
        if path is not None:
            self.restored_from = path
        return self.step

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
            storage.rmtree(self.checkpoints.directory, ignore_errors=True)
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
                self.hooks.during_save(step, functools.partial(self.checkpoints.write_half, step))
                self.checkpoints.save(step)
            self.hooks.on_step_end(step)
        return last

    def _save_current_step(self) -> None:
        self.checkpoints.save_unless_saved(self.step)

    def _preempted(self, bar, log) -> None:
        bar.close()
        if not self.chief:
            storage.rmtree(self.checkpoints.directory, ignore_errors=True)
        log(
            f"preempted (SIGTERM): checkpoint saved at step {self.step}; exiting with "
            f"status {PREEMPTED_EXIT_CODE}. The same command resumes at step {self.step}."
        )

    def evaluate(self, log=print) -> dict[str, float]:
        """Held-out MLM loss/accuracy and sentence-task accuracy at this step
        (`HeldOutEvaluation`: a second call at the same step measures nothing)."""
        return self.held_out.evaluate(self.step, log)
