"""Fine-tuning on the shared step machinery: dev metric, best checkpoint, early stopping.

`FineTuningTrainer` is the loop every task shares; a task subclass supplies
its packing, batches, loss and metrics (`albert_tf.tasks.multiple_choice.trainer`,
`albert_tf.tasks.classification.trainer`). The loop follows
google-research/albert's ``run_race`` and ``run_classifier``: AdamW (or LAMB)
with linear warm-up and linear decay, gradients clipped to global norm 1.

It scales as pretraining does, through the same compiled steps
(`albert_tf.training.steps.TrainingSteps`): any `tf.distribute` strategy (the
model is built in its scope), mixed precision from the model's dtype policy
(float16 adds loss scaling), gradient accumulation, XLA and several steps per
compiled call. Batches are padded to their own longest item, so the step
functions take any [batch, (options,) length] shape; with XLA their length is
rounded up to a multiple of `XLA_LENGTH_MULTIPLE`, so a few shapes compile
(not one per batch) and short texts are not padded to ``max_seq_length``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import time
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from albert_tf import storage
from albert_tf.checkpoints.saved_format import SETTINGS_FILE, save_model
from albert_tf.layers.implementations import choose_implementation, set_implementation
from albert_tf.storage import write_json_atomic
from albert_tf.training.devices import Devices
from albert_tf.training.optimization import build_optimizer
from albert_tf.training.steps import (
    MAX_CONSECUTIVE_NONFINITE_STEPS,
    TrainingSteps,
    distributed_function,
)

#: The model inputs of every task's batches.
FEATURES = ("token_ids", "segment_ids", "padding_mask")
#: With XLA, batch lengths are rounded up to a multiple of this.
XLA_LENGTH_MULTIPLE = 64
#: How often, at most, the progress bar reads the training loss back.
_BAR_REFRESH_SECONDS = 1.0


class TaskSteps(TrainingSteps):
    """A task's compiled steps: its summed loss and right answers over examples."""

    sum_names = ("loss_sum", "correct", "scored")

    def __init__(self, trainer: FineTuningTrainer, optimizer, **kwargs):
        self.trainer = trainer
        super().__init__(
            trainer.model, optimizer, trainer.strategy, batch_spec=trainer.batch_spec, **kwargs
        )

    def forward_sums(self, features, labels, training: bool):
        logits = tf.cast(self.model(features, training=training), tf.float32)
        loss_sum, correct = self.trainer.loss_sums(logits, labels)
        scored = tf.reduce_sum(self.trainer.example_count(labels))
        return {"loss_sum": loss_sum, "correct": correct, "scored": scored}

    def local_counts(self, labels):
        """[examples]: the loss is a mean over the global batch's examples (what
        the task counts as one: `FineTuningTrainer.example_count`)."""
        return self.trainer.example_count(labels)

    def loss(self, sums, normalizers):
        return sums["loss_sum"] / normalizers[0]


class FineTuningTrainer:
    """The fine-tuning loop: dev metric every ``eval_every`` steps, best checkpoint, early stop.

    Subclasses supply the task: `encode` (items to packed arrays), `batches`,
    `loss_sums`, `evaluate` (a dict holding `metric`, higher is better)
    and `task_settings`. Arguments common to every task:

    Args:
        model: the task model (its ``config`` and tokenizer must agree), built
            in ``strategy``'s scope, in the run's precision (its dtype policy:
            ``mixed_float16`` trains with loss scaling).
        tokenizer: the model's `Tokenizer`; saved with every checkpoint.
        output_dir: gets ``best/`` (a model directory with ``tokenizer/`` and
            ``finetune.json``) and ``metrics.jsonl`` (one line per evaluation).
        max_seq_length: packed sequence length limit.
        batch_size: items per optimizer step (all replicas, all micro-batches).
        learning_rate: peak learning rate.
        num_epochs: passes over the training items (ignored with ``num_train_steps``).
        num_train_steps: total steps; defaults to ``num_epochs`` passes.
        warmup_proportion: fraction of steps with linear warm-up.
        optimizer: ``"adamw"`` (official fine-tuning default) or ``"lamb"``.
        adam_bias_correction: Adam's moment bias correction (`AlbertOptimizer`).
        learning_rate_multipliers: factors on the learning rate of the variables whose
            paths hold each key (`AlbertOptimizer`), e.g. ``{"crf/": 100.0}``.
        eval_every: steps between dev evaluations (and at the end).
        patience: evaluations without improvement before stopping (0: never stop).
        seed: shuffling seed.
        progress: show a progress bar.
        language: stored in ``finetune.json`` (the exporter and the app show it).
        fused_kernels: on CPU without XLA, give the model the ``fused_cpu``
            implementation (`albert_tf.layers.implementations`): GELU, LayerNorm,
            attention's masked softmax and head split/merge as fused kernels.
            The model keeps it after training; albert_tf's exports use the
            ``serving`` one whatever this says, and so must your own
            ``tf.saved_model.save`` (``set_implementation(model, "serving")``).
        strategy: the `tf.distribute` strategy (default: the current one).
        gradient_accumulation_steps: micro-batches of ``batch_size / k`` items
            per optimizer step, for batches that do not fit at once.
        jit_compile: XLA for the forward and backward pass.
        steps_per_loop: optimizer steps per compiled call (each accumulating its
            micro-batches inside the loop).
        max_consecutive_nonfinite_steps: a step with a non-finite gradient is
            skipped (weights unchanged); this many in a row stop the run.
    """

    #: The dev metric that picks the best checkpoint (higher is better).
    metric = "accuracy"
    #: The items `encode` takes; anything else passed to fit/evaluate is
    #: taken as `encode`'s output.
    item_type: type = object
    #: Shapes of the step functions' id inputs and labels.
    ids_spec = tf.TensorSpec([None, None], tf.int32)
    label_spec = tf.TensorSpec([None], tf.int32)
    #: What pads labels that have a length axis (per-piece labels) under XLA.
    label_padding = 0

    def __init__(
        self,
        model,
        tokenizer,
        *,
        output_dir: str | os.PathLike[str],
        max_seq_length: int = 512,
        batch_size: int = 16,
        eval_batch_size: int | None = None,
        learning_rate: float = 1e-5,
        num_epochs: float = 3.0,
        num_train_steps: int | None = None,
        warmup_proportion: float = 0.1,
        optimizer: str = "adamw",
        weight_decay_rate: float = 0.01,
        adam_bias_correction: bool = False,
        learning_rate_multipliers: dict[str, float] | None = None,
        eval_every: int = 500,
        patience: int = 5,
        seed: int = 0,
        progress: bool = True,
        language: str = "",
        fused_kernels: bool = True,
        strategy: tf.distribute.Strategy | None = None,
        gradient_accumulation_steps: int = 1,
        jit_compile: bool = False,
        steps_per_loop: int = 1,
        max_consecutive_nonfinite_steps: int = MAX_CONSECUTIVE_NONFINITE_STEPS,
    ):
        if max_seq_length > model.config.max_position_embeddings:
            raise ValueError(
                f"max_seq_length={max_seq_length} exceeds the model's "
                f"max_position_embeddings={model.config.max_position_embeddings}"
            )
        if tokenizer.vocabulary_size != model.config.vocab_size:
            raise ValueError(
                f"tokenizer has {tokenizer.vocabulary_size} pieces, the model "
                f"{model.config.vocab_size}: wrong tokenizer for this checkpoint"
            )
        if optimizer not in ("adamw", "lamb"):
            raise ValueError(f"optimizer must be 'adamw' or 'lamb', got {optimizer!r}")
        if gradient_accumulation_steps < 1 or batch_size % gradient_accumulation_steps:
            raise ValueError(
                f"batch_size={batch_size} must be a multiple of "
                f"gradient_accumulation_steps={gradient_accumulation_steps} (each "
                "micro-batch holds batch_size / gradient_accumulation_steps items)"
            )
        if steps_per_loop < 1:
            raise ValueError(f"steps_per_loop must be at least 1, got {steps_per_loop}")
        self.strategy = strategy or tf.distribute.get_strategy()
        if (
            self.strategy is not tf.distribute.get_strategy()
            and model.weights
            and not any(
                # Keras variables hold the strategy's variable as ``value``.
                self.strategy.extended.variable_created_in_scope(getattr(v, "value", v))
                for v in model.weights[:1]
            )
        ):
            raise ValueError(
                f"the model's variables were not created under the {type(self.strategy).__name__}"
                "'s scope: build or load the model inside `with strategy.scope():`"
            )
        self.model, self.tokenizer = model, tokenizer
        self.output_dir = os.fspath(output_dir)
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self._given_eval_batch_size = eval_batch_size
        self.learning_rate, self.num_epochs = learning_rate, num_epochs
        self.num_train_steps, self.warmup_proportion = num_train_steps, warmup_proportion
        self.optimizer_name, self.weight_decay_rate = optimizer, weight_decay_rate
        self.adam_bias_correction = adam_bias_correction
        self.learning_rate_multipliers = dict(learning_rate_multipliers or {})
        self.eval_every, self.patience, self.seed = eval_every, patience, seed
        self.progress, self.language = progress, language
        self.fused_kernels = fused_kernels
        #: The model's implementation, chosen here once for what trains it.
        self.implementation = choose_implementation(
            accelerator=Devices.detect(self.strategy).accelerator,
            jit_compile=jit_compile,
            fused_kernels=fused_kernels,
        )
        set_implementation(model, self.implementation)
        self.set_gradient_accumulation(gradient_accumulation_steps)
        self.jit_compile, self.steps_per_loop = jit_compile, steps_per_loop
        self.max_consecutive_nonfinite_steps = max_consecutive_nonfinite_steps
        #: The training precision, read from the model (mixed_float16 -> float16).
        self.precision = _precision_of(model)
        # Dev and test batches are split over the replicas too.
        self._predict = distributed_function(self.strategy, self._logits, [self.batch_spec[0]])

    def set_gradient_accumulation(self, steps: int) -> None:
        """Micro-batches per optimizer step (also after construction, as a memory plan
        chooses them before `fit`); a dev/test batch size not given follows them."""
        self.gradient_accumulation_steps = steps
        # Evaluation holds no gradients: twice what one micro-batch holds fits.
        self.eval_batch_size = self._given_eval_batch_size or 2 * (self.batch_size // steps)

    @property
    def batch_spec(self) -> tuple[dict[str, tf.TensorSpec], tf.TensorSpec]:
        """A batch's (features, labels) specs: any batch size and length, one trace."""
        return {name: self.ids_spec for name in FEATURES}, self.label_spec

    # -- the task's part ---------------------------------------------------

    def encode(self, items: Sequence) -> list[dict[str, np.ndarray]]:
        """Packs items once; fit/evaluate accept the result to avoid re-tokenising."""
        raise NotImplementedError

    def batches(
        self, encoded: Sequence[dict[str, np.ndarray]], batch_size: int, shuffle: bool, seed: int
    ):
        """(features, labels) batches padded to their own longest item."""
        raise NotImplementedError

    def loss_sums(self, logits: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Summed loss of a batch (a mean over examples is the training loss) and its
        number of right answers (0 for scores)."""
        raise NotImplementedError

    def evaluate(self, data) -> dict[str, float]:
        """Dev or test metrics, `metric` among them, and ``count``."""
        raise NotImplementedError

    def training_units(self, encoded: Sequence) -> int:
        """How many sequences one pass over ``encoded`` trains on (an epoch's length)."""
        return len(encoded)

    def trained_variables(self) -> list:
        """The variables fine-tuning updates: all the model's trainable ones, less
        those the task's output does not depend on (they would get no gradient)."""
        return list(self.model.trainable_variables)

    def example_count(self, labels: tf.Tensor) -> tf.Tensor:
        """float32 [1]: the examples in a batch's labels, which the training loss
        and accuracy are means over (a batch's rows; a tagger's scored pieces)."""
        return tf.cast(tf.shape(labels)[:1], tf.float32)

    def task_settings(self) -> dict:
        """What the exporter needs besides the model: written to ``finetune.json``."""
        raise NotImplementedError

    # -- shared --------------------------------------------------------------

    def _encoded(self, data) -> list[dict[str, np.ndarray]]:
        if data and isinstance(data[0], self.item_type):
            return self.encode(data)
        return list(data)

    def _logits(self, features, training=False):
        return tf.cast(self.model(features, training=training), tf.float32)

    def logits(self, features: dict) -> tf.Tensor:
        """The model's float32 logits of one batch, split over the strategy's replicas."""
        return self._predict(self._fixed_shape({name: features[name] for name in FEATURES}))

    def build_steps(self, total_steps: int) -> TaskSteps:
        """The optimizer ``fit`` uses for ``total_steps`` steps (AdamW or LAMB, warm-up
        and linear decay; loss scaling under float16) and its compiled steps."""
        with self.strategy.scope():
            optimizer = build_optimizer(
                self.learning_rate,
                total_steps,
                int(self.warmup_proportion * total_steps),
                weight_decay_rate=self.weight_decay_rate,
                optimizer=self.optimizer_name,
                precision=self.precision,
                bias_correction=self.adam_bias_correction,
                learning_rate_multipliers=self.learning_rate_multipliers,
            )
            return TaskSteps(
                self,
                optimizer,
                variables=self.trained_variables(),
                clip_norm=1.0,  # as the official optimizer
                gradient_accumulation_steps=self.gradient_accumulation_steps,
                jit_compile=self.jit_compile,
                max_consecutive_nonfinite_steps=self.max_consecutive_nonfinite_steps,
            )

    def _fixed_shape(self, features: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """With XLA, ids padded (pad id 0, mask 0) to the next multiple of
        `XLA_LENGTH_MULTIPLE`, at most ``max_seq_length``: a handful of shapes
        compile, where every batch length would compile anew."""
        length = features["token_ids"].shape[-1]
        if length > self.max_seq_length:
            raise ValueError(
                f"a batch of {length} tokens is longer than max_seq_length="
                f"{self.max_seq_length}: encode the items with this trainer (or its settings)"
            )
        if not self.jit_compile:
            return features
        target = min(self.max_seq_length, -(-length // XLA_LENGTH_MULTIPLE) * XLA_LENGTH_MULTIPLE)
        widths = [(0, 0)] * (features["token_ids"].ndim - 1) + [(0, target - length)]
        return {k: np.pad(v, widths) if k in FEATURES else v for k, v in features.items()}

    def training_batches(self, encoded: Sequence[dict[str, np.ndarray]]) -> tf.data.Dataset:
        """Endless shuffled micro-batches (a new order each epoch, from ``seed``)."""
        micro = self.batch_size // self.gradient_accumulation_steps
        label_dtype = self.label_spec.dtype.as_numpy_dtype

        def epochs():
            for epoch in itertools.count():
                for features, labels in self.batches(
                    encoded, micro, shuffle=True, seed=self.seed + epoch
                ):
                    features = self._fixed_shape(features)
                    labels = np.asarray(labels, label_dtype)
                    # A label per piece (labels [batch, length]): as long as the padded ids.
                    if self.label_spec.shape.rank > 1 and self.label_spec.shape[1] is None:
                        extra = features["token_ids"].shape[-1] - labels.shape[-1]
                        widths = [(0, 0)] * (labels.ndim - 1) + [(0, extra)]
                        labels = np.pad(labels, widths, constant_values=self.label_padding)
                    yield {name: features[name] for name in FEATURES}, labels

        return tf.data.Dataset.from_generator(epochs, output_signature=self.batch_spec).prefetch(2)

    def settings(self) -> dict:
        return (
            self.task_settings()
            | {
                "max_seq_length": self.max_seq_length,
                "batch_size": self.batch_size,
                "learning_rate": self.learning_rate,
                "optimizer": self.optimizer_name,
                "adam_bias_correction": self.adam_bias_correction,
                "warmup_proportion": self.warmup_proportion,
                "seed": self.seed,
                "language": self.language,
                "precision": self.precision,
                "gradient_accumulation_steps": self.gradient_accumulation_steps,
            }
            | (
                {"learning_rate_multipliers": self.learning_rate_multipliers}
                if self.learning_rate_multipliers
                else {}
            )
        )

    def save(self, directory: str, metrics: dict) -> None:
        save_model(self.model, directory, tokenizer=self.tokenizer)
        write_json_atomic(
            os.path.join(directory, SETTINGS_FILE), self.settings() | {"metrics": metrics}
        )

    def _next_stop(self, step: int, total: int) -> int:
        return min(total, step + self.eval_every - step % self.eval_every)

    def fit(self, train, dev) -> dict:
        """Trains, evaluating on ``dev`` every ``eval_every`` steps.

        Returns:
            ``metric`` (its name), ``best_metric`` (also as ``best_<metric>``),
            ``best_step``, ``best_dir``, ``steps``, ``stopped_early``,
            ``skipped_steps`` (non-finite, not applied), ``history`` (one dict
            per evaluation), ``train_seconds``.
        """
        train_enc, dev_enc = self._encoded(train), self._encoded(dev)
        if not train_enc or not dev_enc:
            raise ValueError("fit() needs non-empty train and dev sets")
        accumulation = self.gradient_accumulation_steps
        micro = self.batch_size // accumulation
        micro_per_epoch = math.ceil(self.training_units(train_enc) / micro)
        steps_per_epoch = math.ceil(micro_per_epoch / accumulation)
        total = self.num_train_steps or max(1, round(self.num_epochs * steps_per_epoch))
        steps = self.build_steps(total)
        batches = iter(self.training_batches(train_enc))
        storage.makedirs(self.output_dir)  # a gs:// (file://, ram://) output_dir too
        best_dir = os.path.join(self.output_dir, "best")
        log_path = os.path.join(self.output_dir, "metrics.jsonl")
        history: list[dict] = []
        best, best_step, stale, step, stopped = -math.inf, 0, 0, 0, False
        bar = None
        if self.progress:
            from tqdm import tqdm

            bar = tqdm(total=total, desc="fine-tuning", unit="step", dynamic_ncols=True)
        write = bar.write if bar is not None else lambda line: print(line, flush=True)
        start = last_refresh = time.perf_counter()
        # The steps' sums stay tensors until an evaluation reports them (and the
        # bar reads a loss at most once a second): the host runs ahead of the device.
        window: list[dict[str, tf.Tensor]] = []
        consumed = consecutive = skipped = 0
        while step < total and not stopped:
            if self.steps_per_loop > 1:
                length = min(self.steps_per_loop, self._next_stop(step, total) - step)
                out = steps.train_loop(batches, length, consecutive)
                attempts = int(out.pop("attempts"))
                applied = int(out.pop("applied_steps"))
                consecutive = int(out.pop("consecutive_skipped"))
            else:
                out = steps.train([next(batches) for _ in range(accumulation)])
                attempts, applied = 1, int(bool(out.pop("applied")))
                consecutive = 0 if applied else consecutive + 1
            consumed += attempts * accumulation
            if applied < attempts:
                skipped += attempts - applied
                where = (
                    f"step {step + 1}"
                    if attempts == 1
                    else f"{attempts - applied} of {attempts} steps from step {step + 1} on"
                )
                write(f"{where}: non-finite gradient, skipped (weights unchanged by it)")
                if consecutive >= self.max_consecutive_nonfinite_steps:
                    raise FloatingPointError(
                        f"{consecutive} steps in a row had a non-finite loss or gradient; the "
                        f"weights are still those of step {step + applied}. Lower "
                        "--learning_rate, use --precision=float32 or bfloat16 instead of "
                        "float16, or check the training data."
                    )
                if applied == 0:
                    continue
            window.append(out)
            step += applied
            now = time.perf_counter()
            if bar is not None:
                bar.update(applied)
                if now - last_refresh >= _BAR_REFRESH_SECONDS:
                    loss = float(out["loss_sum"] / tf.maximum(out["scored"], 1.0))
                    bar.set_postfix(loss=f"{loss:.3f}", best_dev=f"{max(best, 0.0):.3f}")
                    last_refresh = now
            if step % self.eval_every == 0 or step == total:
                totals = {k: float(tf.add_n([w[k] for w in window])) for k in window[0]}
                window = []
                metrics = self.evaluate(dev_enc)
                record = {
                    "step": step,
                    "epoch": (consumed - 1) // micro_per_epoch,
                    "train_loss": totals["loss_sum"] / max(totals["scored"], 1.0),
                }
                if self.label_spec.dtype.is_integer:
                    record["train_accuracy"] = totals["correct"] / max(totals["scored"], 1.0)
                record |= {f"dev_{k}": v for k, v in metrics.items() if k != "count"}
                record["seconds"] = round(time.perf_counter() - start, 1)
                history.append(record)
                storage.append_text(log_path, json.dumps(record) + "\n")
                if metrics[self.metric] > best:
                    best, best_step, stale = metrics[self.metric], step, 0
                    self.save(best_dir, record)
                else:
                    stale += 1
                message = (
                    f"step {step}: dev {self.metric} {metrics[self.metric]:.4f} "
                    f"(best {best:.4f} at step {best_step})"
                )
                if bar is not None:
                    bar.set_postfix(loss=f"{record['train_loss']:.3f}", best_dev=f"{best:.3f}")
                # Without a bar (logs, CI) the evaluations are the progress report.
                write(message)
                if self.patience and stale >= self.patience:
                    stopped = True
                    write(f"early stopping: no improvement in {stale} evaluations")
        if bar is not None:
            bar.close()
        return {
            "metric": self.metric,
            "best_metric": best,
            f"best_{self.metric}": best,
            "best_step": best_step,
            "best_dir": best_dir,
            "steps": step,
            "stopped_early": stopped,
            "skipped_steps": skipped,
            "history": history,
            "train_seconds": time.perf_counter() - start,
        }


def _precision_of(model) -> str:
    """float32, bfloat16 or float16: what the model computes in."""
    name = getattr(model.dtype_policy, "name", "float32")
    return {"mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}.get(name, "float32")
