"""MLM + SOP pretraining with `tf.distribute`, resumable from checkpoints.

One code path serves every strategy (default, one device, mirrored,
multi-worker, TPU):

* Each step's global batch is the same examples whatever the strategy: every
  worker reads the global batch and each replica keeps its slice (see
  `_distribute`), so N workers train exactly like one worker.
* Losses are per-replica *sums* divided by counts all-reduced over replicas.
* Gradients are all-reduced, clipped by global norm, then handed to the
  optimizer divided by the replica count (Keras all-reduces by summing
  again); Keras' own ``global_clipnorm`` would clip each replica's partial
  gradient before the reduction.
* Gradient accumulation sums micro-batch gradients in ON_READ variables,
  each normalised by the counts of the whole step, so k micro-batches give
  the gradient of one k-times-larger batch.
* The checkpoint holds model, optimizer (its step counter is the global
  step) and the input iterator, so a restarted run continues where it
  stopped on the same data.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from tqdm import tqdm

from albert_tf import kernels
from albert_tf.config import AlbertConfig
from albert_tf.data.pipeline import held_out_dataset, pretraining_dataset
from albert_tf.models.pretraining_model import AlbertPretrainingModel
from albert_tf.training.evaluation import sum_over_batches, with_standard_errors
from albert_tf.training.losses import masked_lm_sums, sentence_order_sums, summarize
from albert_tf.training.optimization import AlbertOptimizer, WarmupPolynomialDecay
from albert_tf.training.precision import resolve_precision
from albert_tf.training.strategies import is_chief, worker_index

SENTENCE_TASKS = ("sop", "nsp", "none")
PRECISIONS = ("auto", "float32", "bfloat16", "float16")
RUN_FILE = "pretraining_run.json"
METRICS_FILE = "metrics.jsonl"


@dataclasses.dataclass(frozen=True)
class PretrainingOptions:
    """Everything about a pretraining run except the model's shape."""

    model_dir: str
    train_files: str
    eval_files: str | None = None
    max_seq_length: int = 512
    max_predictions_per_seq: int | None = None
    train_batch_size: int = 4096
    eval_batch_size: int = 64
    num_train_steps: int = 125_000
    num_warmup_steps: int = 3125
    learning_rate: float = 0.00176
    optimizer: str = "lamb"
    weight_decay_rate: float = 0.01
    clip_norm: float = 1.0
    gradient_accumulation_steps: int = 1
    sentence_task: str = "sop"
    precision: str = "auto"
    jit_compile: bool = False
    fused_kernels: bool = True
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    eval_every_steps: int = 0
    num_eval_steps: int = 100
    log_every_steps: int = 50
    seed: int = 12345
    progress_bar: bool = True

    def validate(self, num_replicas: int) -> None:
        if self.sentence_task not in SENTENCE_TASKS:
            raise ValueError(f"sentence_task must be one of {SENTENCE_TASKS}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}")
        if self.optimizer not in ("lamb", "adamw"):
            raise ValueError("optimizer must be 'lamb' or 'adamw'")
        micro = self.gradient_accumulation_steps * num_replicas
        if self.train_batch_size % micro:
            raise ValueError(
                f"train_batch_size={self.train_batch_size} is not divisible by "
                f"gradient_accumulation_steps × replicas = "
                f"{self.gradient_accumulation_steps} × {num_replicas}; choose a "
                f"multiple of {micro}."
            )
        if self.eval_files and self.eval_batch_size % num_replicas:
            raise ValueError(
                f"eval_batch_size={self.eval_batch_size} is not divisible by "
                f"{num_replicas} replicas."
            )

    @property
    def micro_batch_size(self) -> int:
        return self.train_batch_size // self.gradient_accumulation_steps


def _dtype_policy(precision: str) -> str | None:
    return {"float32": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}[precision]


class PretrainingTrainer:
    """Builds model, optimizer and data under a strategy and trains.

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
    ):
        self.config = config
        self.strategy = strategy or tf.distribute.get_strategy()
        self.num_replicas = self.strategy.num_replicas_in_sync
        options.validate(self.num_replicas)
        # "auto" resumes in the precision the run started with (the record
        # holds the resolved one), whatever machine it resumes on.
        recorded = self._read_run_record(options.model_dir).get("options", {}).get("precision")
        if options.precision == "auto" and recorded:
            precision = recorded
        else:
            precision = resolve_precision(options.precision, self.strategy)
        self.options = options = dataclasses.replace(options, precision=precision)
        self.chief = is_chief(self.strategy)
        self._check_run_compatible()
        self._last_eval: dict[str, float] | None = None
        keras.utils.set_random_seed(options.seed)

        with self.strategy.scope():
            self.model = AlbertPretrainingModel.from_albert_config(
                config, dtype=_dtype_policy(options.precision)
            )
            schedule = WarmupPolynomialDecay(
                options.learning_rate, options.num_train_steps, options.num_warmup_steps
            )
            optimizer = AlbertOptimizer(
                learning_rate=schedule,
                weight_decay_rate=options.weight_decay_rate,
                layer_adaptation=options.optimizer == "lamb",
            )
            if options.precision == "float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self._variables = self._variables_to_train()
            self.optimizer.build(self._variables)
            if options.gradient_accumulation_steps > 1:
                self._accumulators = [
                    tf.Variable(
                        tf.zeros(v.shape, tf.float32),
                        trainable=False,
                        synchronization=tf.VariableSynchronization.ON_READ,
                        aggregation=tf.VariableAggregation.SUM,
                    )
                    for v in self._variables
                ]
        # A plain iterator over global batches: checkpointable (a
        # DistributedIterator is not), and identical on every worker, so the
        # chief's saved position is right for all of them.
        self._train_iterator = iter(
            pretraining_dataset(
                options.train_files,
                batch_size=options.micro_batch_size,
                max_seq_length=options.max_seq_length,
                max_predictions_per_seq=options.max_predictions_per_seq,
                seed=options.seed,
            )
        )
        # Keras keeps dropout's random state in SeedGenerator variables that
        # a TF checkpoint of the model does not reach; without them a resumed
        # run would draw other dropout masks than an uninterrupted one.
        rng_states = [v for v in self.model.variables if v.path.endswith("seed_generator_state")]
        self.checkpoint = tf.train.Checkpoint(
            model=self.model,
            optimizer=self.optimizer,
            iterator=self._train_iterator,
            rng=rng_states,
        )
        self.manager = tf.train.CheckpointManager(
            self.checkpoint,
            self._checkpoint_dir(),
            max_to_keep=options.keep_checkpoint_max,
        )
        self._build_step_functions()
        # Only a run that could be set up claims the directory.
        self._write_run_record()

    # ------------------------------------------------------------------ set-up
    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def _checkpoint_dir(self) -> str:
        if self.chief:
            return os.path.join(self.options.model_dir, "checkpoints")
        # Non-chief workers must save too (the save is collective), but to a
        # scratch directory that is deleted afterwards.
        return os.path.join(self.options.model_dir, f"worker_{worker_index(self.strategy)}_scratch")

    def _checkpoint_path(self, step: int) -> str:
        return os.path.join(self._checkpoint_dir(), f"ckpt-{step}")

    def _run_record(self) -> dict[str, Any]:
        options = dataclasses.asdict(self.options)
        # These may change between a run and its resumption.
        for key in (
            "model_dir",
            "progress_bar",
            "log_every_steps",
            "eval_every_steps",
            "num_eval_steps",
            "eval_files",
            "train_files",
            "num_train_steps",
            "save_checkpoints_steps",
            "keep_checkpoint_max",
            "fused_kernels",
        ):
            options.pop(key)
        return {"albert_config": self.config.to_hf_dict(), "options": options}

    @staticmethod
    def _read_run_record(model_dir: str) -> dict[str, Any]:
        """The run record a previous run left in ``model_dir`` ({} if none)."""
        path = os.path.join(model_dir, RUN_FILE)
        if not os.path.exists(path):
            return {}
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def _check_run_compatible(self) -> None:
        """Refuses to resume a checkpoint written for another model or recipe."""
        previous = self._read_run_record(self.options.model_dir)
        record = self._run_record()
        if previous and previous != record:
            diffs = _diff(previous, record)
            raise ValueError(
                f"{self.options.model_dir} holds a run with a different model or "
                f"recipe ({'; '.join(diffs)}). Resume with the same settings, or "
                "pass a new --model_dir."
            )

    def _write_run_record(self) -> None:
        path = os.path.join(self.options.model_dir, RUN_FILE)
        if self.chief and not os.path.exists(path):
            os.makedirs(self.options.model_dir, exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self._run_record(), f, indent=2, sort_keys=True)
            os.replace(tmp, path)

    def _distribute(self, batch):
        """Each replica's slice of a global batch.

        Every worker reads the same global batch and keeps its replicas'
        rows, so a step's examples (and masks) do not depend on how many
        workers there are; the cost is that each worker prepares them all.
        """
        n = self.num_replicas

        def replica_slice(context):
            r = context.replica_id_in_sync_group

            def take(t):
                rows = tf.shape(t)[0]  # a last eval batch may be short
                return t[r * rows // n : (r + 1) * rows // n]

            return tf.nest.map_structure(take, batch)

        return self.strategy.experimental_distribute_values_from_function(replica_slice)

    # ------------------------------------------------------------------ steps
    def _variables_to_train(self) -> list:
        """The model's trainable variables that the loss reaches.

        Without a sentence task no gradient flows to the pooler or the SOP
        head: they keep their initial values (the paper's "None" model) rather
        than being decayed towards zero by the optimizer's weight decay.
        """
        variables = self.model.trainable_variables
        if self.options.sentence_task != "none":
            return variables
        unused = {
            id(v)
            for v in (
                *self.model.sop_head.trainable_variables,
                *self.model.backbone.pooler.trainable_variables,
            )
        }
        return [v for v in variables if id(v) not in unused]

    def _forward_sums(self, features, labels, training: bool):
        # XLA cannot compile the fused kernels (custom ops); it fuses anyway.
        use_fused = self.options.fused_kernels and not self.options.jit_compile
        with kernels.fused(use_fused):
            outputs = self.model(features, training=training)
        sums = masked_lm_sums(outputs["mlm_logits"], labels["mask_ids"], labels["mask_weights"])
        sums.update(sentence_order_sums(outputs["sop_logits"], labels["sentence_order_label"]))
        return sums

    @staticmethod
    def _local_counts(labels):
        """[masked tokens, examples] of this replica's micro-batch."""
        return tf.stack(
            [
                tf.reduce_sum(tf.cast(labels["mask_weights"], tf.float32)),
                tf.cast(tf.size(labels["sentence_order_label"]), tf.float32),
            ]
        )

    def _normalizers(self, labels):
        """Global counts, all-reduced before the forward pass so the
        all-reduce stays outside the (optionally XLA-compiled) model step."""
        ctx = tf.distribute.get_replica_context()
        total = ctx.all_reduce(tf.distribute.ReduceOp.SUM, self._local_counts(labels))
        return tf.maximum(total, 1.0)

    def _gradients(self, features, labels, normalizers):
        """Loss = mean MLM loss (+ mean sentence loss) over the global micro-batch."""
        variables = self._variables
        with tf.GradientTape() as tape:
            sums = self._forward_sums(features, labels, training=True)
            loss = sums["mlm_loss_sum"] / normalizers[0]
            if self.options.sentence_task != "none":
                loss += sums["sop_loss_sum"] / normalizers[1]
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, variables)
        return [tf.convert_to_tensor(g, tf.float32) for g in grads], sums

    def _apply(self, local_grads):
        """All-reduce, clip by global norm, apply. Returns the global norm."""
        ctx = tf.distribute.get_replica_context()
        grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, local_grads)
        scale = self._loss_scale()
        grads = [g / scale for g in grads]
        grads, norm = tf.clip_by_global_norm(grads, self.options.clip_norm)
        # Keras sums the replicas' gradients once more; hand it 1/N each.
        factor = scale / self.num_replicas
        self.optimizer.apply([g * factor for g in grads], self._variables)
        return norm

    def _loss_scale(self):
        if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
            return tf.cast(self.optimizer.dynamic_scale, tf.float32)
        return tf.constant(1.0)

    def _build_step_functions(self) -> None:
        strategy = self.strategy

        def reduce(values):
            return {
                k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                for k, v in values.items()
            }

        def fused_step(features, labels):
            grads, sums = self._gradients(features, labels, self._normalizers(labels))
            sums["grad_norm"] = self._apply(grads) / self.num_replicas
            return sums

        def accumulate_step(features, labels, normalizers):
            # Normalised by the whole step's counts: k micro-batches then sum
            # to exactly the gradient of one batch of k times the size.
            grads, sums = self._gradients(features, labels, normalizers)
            for acc, g in zip(self._accumulators, grads, strict=True):
                acc.assign_add(g)
            return sums

        def apply_accumulated():
            norm = self._apply([acc.read_value() for acc in self._accumulators])
            for acc in self._accumulators:
                acc.assign(tf.zeros_like(acc))
            return {"grad_norm": norm / self.num_replicas}

        def eval_step(features, labels):
            return self._forward_sums(features, labels, training=False)

        @tf.function
        def train_fn(features, labels):
            return reduce(strategy.run(fused_step, args=(features, labels)))

        @tf.function
        def count_fn(labels):
            counts = strategy.run(self._local_counts, args=(labels,))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, counts, axis=None)

        @tf.function
        def accumulate_fn(features, labels, normalizers):
            return reduce(strategy.run(accumulate_step, args=(features, labels, normalizers)))

        @tf.function
        def apply_fn():
            return reduce(strategy.run(apply_accumulated))

        @tf.function
        def eval_fn(features, labels):
            return reduce(strategy.run(eval_step, args=(features, labels)))

        if self.options.jit_compile:
            # XLA compiles the model's forward and backward pass; collectives
            # and the optimizer update stay outside the cluster.
            self._gradients = tf.function(self._gradients, jit_compile=True)
        self._train_fn, self._accumulate_fn, self._apply_fn = train_fn, accumulate_fn, apply_fn
        self._count_fn = count_fn
        self._eval_fn = eval_fn

    def _train_one_step(self) -> dict[str, float]:
        if self.options.gradient_accumulation_steps == 1:
            out = self._train_fn(*self._distribute(next(self._train_iterator)))
        else:
            # The step's micro-batches are read first: their total counts
            # normalise every one of them.
            batches = [
                self._distribute(next(self._train_iterator))
                for _ in range(self.options.gradient_accumulation_steps)
            ]
            normalizers = tf.maximum(tf.add_n([self._count_fn(y) for _, y in batches]), 1.0)
            totals: dict[str, Any] = {}
            for features, labels in batches:
                for k, v in self._accumulate_fn(features, labels, normalizers).items():
                    totals[k] = totals.get(k, 0.0) + v
            out = {**totals, **self._apply_fn()}
        return {k: float(v) for k, v in out.items()}

    # ------------------------------------------------------------------ loops
    def restore(self) -> int:
        """Restores the latest checkpoint, if any; returns the step."""
        latest = (
            self.manager.latest_checkpoint
            if self.chief
            else tf.train.latest_checkpoint(os.path.join(self.options.model_dir, "checkpoints"))
        )
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
        return self.step

    def train(self, log=print) -> dict[str, float]:
        """Trains to ``num_train_steps`` from wherever the checkpoint left off."""
        options = self.options
        start = self.restore()
        if start:
            log(f"resumed from step {start} ({self.manager.latest_checkpoint})")
        self._truncate_metrics(start)
        if start >= options.num_train_steps:
            log(f"already at step {start} >= num_train_steps={options.num_train_steps}")
            return {}
        bar = tqdm(
            total=options.num_train_steps,
            initial=start,
            disable=not (options.progress_bar and self.chief),
            unit="step",
            dynamic_ncols=True,
        )
        window: dict[str, float] = {}
        window_start, window_steps = time.perf_counter(), 0
        last: dict[str, float] = {}
        while self.step < options.num_train_steps:
            sums = self._train_one_step()
            if not math.isfinite(sums["mlm_loss_sum"]):
                raise FloatingPointError(
                    f"MLM loss is {sums['mlm_loss_sum']} at step {self.step}; lower "
                    "--learning_rate or use --precision=float32."
                )
            for k, v in sums.items():
                window[k] = window.get(k, 0.0) + v
            window_steps += 1
            step = self.step
            bar.update(1)
            if step % options.log_every_steps == 0 or step == options.num_train_steps:
                elapsed = time.perf_counter() - window_start
                last = summarize(window)
                last["grad_norm"] = window["grad_norm"] / window_steps
                last["examples_per_second"] = window_steps * options.train_batch_size / elapsed
                last["learning_rate"] = float(self.optimizer.learning_rate)
                self._write_scalars("train", last, step)
                bar.set_postfix(
                    loss=f"{last.get('mlm_loss', 0) + last.get('sop_loss', 0):.3f}",
                    mlm_acc=f"{last.get('mlm_accuracy', 0):.3f}",
                    sop_acc=f"{last.get('sop_accuracy', 0):.3f}",
                    ex_s=f"{last['examples_per_second']:.1f}",
                )
                window, window_start, window_steps = {}, time.perf_counter(), 0
            if (
                options.eval_files
                and options.eval_every_steps
                and (step % options.eval_every_steps == 0)
            ):
                self.evaluate(log=lambda *_: None)
            # Saved after this step's metrics are written: a run killed in
            # between resumes from the previous checkpoint and rewrites them,
            # so the learning curve never misses a step.
            if step % options.save_checkpoints_steps == 0:
                self.manager.save(checkpoint_number=step)
        bar.close()
        if self.manager.latest_checkpoint != self._checkpoint_path(self.step):
            self.manager.save(checkpoint_number=self.step)
        self._cleanup_scratch()
        return last

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
        totals = sum_over_batches(
            lambda batch: self._eval_fn(*self._distribute(batch)), dataset, options.num_eval_steps
        )
        if not totals:
            raise ValueError(f"The eval data {options.eval_files} holds no examples.")
        results = with_standard_errors(summarize(totals), totals)
        results["step"] = self.step
        self._write_scalars("eval", {k: v for k, v in results.items() if k != "step"}, self.step)
        log("eval " + ", ".join(f"{k}={v:.4f}" for k, v in results.items()))
        self._last_eval = dict(results)
        return results

    # ------------------------------------------------------------------ output
    def _summary_writer(self, name: str):
        if not hasattr(self, "_writers"):
            self._writers = {}
        if name not in self._writers:
            if self.chief:
                path = os.path.join(self.options.model_dir, "logs", name)
                self._writers[name] = tf.summary.create_file_writer(path)
            else:
                self._writers[name] = tf.summary.create_noop_writer()
        return self._writers[name]

    def _write_scalars(self, split: str, values: dict[str, float], step: int) -> None:
        """TensorBoard scalars, and a line of MODEL_DIR/metrics.jsonl (the
        learning curve in a form any script can read)."""
        writer = self._summary_writer(split)
        with writer.as_default(step=step):
            for k, v in values.items():
                tf.summary.scalar(k, v)
        writer.flush()
        if self.chief:
            record = {"split": split, "step": step, **{k: float(v) for k, v in values.items()}}
            path = os.path.join(self.options.model_dir, METRICS_FILE)
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    def _truncate_metrics(self, step: int) -> None:
        """Drops metrics.jsonl lines past ``step``: a resumed run redoes those
        steps, and the learning curve should hold each step once."""
        path = os.path.join(self.options.model_dir, METRICS_FILE)
        if not (self.chief and os.path.exists(path)):
            return
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
        kept = []
        for line in lines:
            try:
                if json.loads(line)["step"] <= step:
                    kept.append(line)
            except (ValueError, KeyError):
                pass  # a line cut short when the run was killed
        if len(kept) != len(lines):
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.writelines(kept)
            os.replace(tmp, path)

    def _cleanup_scratch(self) -> None:
        if not self.chief:
            shutil.rmtree(self._checkpoint_dir(), ignore_errors=True)


def _diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            out += _diff(x, y, f"{prefix}{key}.")
        elif x != y:
            out.append(f"{prefix}{key}: {x!r} -> {y!r}")
    return out


def weights_digest(model: keras.Model) -> np.ndarray:
    """All weights flattened, for comparing runs."""
    return np.concatenate([np.asarray(w).ravel() for w in model.weights])
