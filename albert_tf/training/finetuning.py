"""Fine-tuning `AlbertMultipleChoice`: dev accuracy, best checkpoint, early stopping.

The loop follows google-research/albert's ``run_race``: cross-entropy over
the options' softmax, AdamW (or LAMB) with linear warm-up and linear decay,
gradients clipped to global norm 1. Batches are padded to their own longest
item (see `albert_tf.data.multiple_choice.multiple_choice_batches`), so the
step functions take any [batch, options, length] shape without retracing.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from albert_tf import kernels, storage
from albert_tf.checkpoints.saved_format import save_model
from albert_tf.data.multiple_choice import (
    MultipleChoiceExample,
    encode_multiple_choice,
    multiple_choice_batches,
)
from albert_tf.storage import write_json_atomic
from albert_tf.training.optimization import AlbertOptimizer, WarmupPolynomialDecay

#: Written next to the best checkpoint (the task, its packing settings and
#: metrics); `albert_tf.serving.export` reads it back from here.
SETTINGS_FILE = "finetune.json"
_IDS = tf.TensorSpec([None, None, None], tf.int32)


class FineTuningTrainer:
    """The fine-tuning loop: dev metric every ``eval_every`` steps, best checkpoint, early stop.

    Subclasses supply the task: `encode` (items to packed arrays), `batches`,
    `loss_and_correct`, `evaluate` (a dict holding `metric`, higher is better)
    and `task_settings`. Arguments common to every task:

    Args:
        model: the task model (its ``config`` and tokenizer must agree).
        tokenizer: the model's `Tokenizer`; saved with every checkpoint.
        output_dir: gets ``best/`` (a model directory with ``tokenizer/`` and
            ``finetune.json``) and ``metrics.jsonl`` (one line per evaluation).
        max_seq_length: packed sequence length limit.
        batch_size: items per step.
        learning_rate: peak learning rate.
        num_epochs: passes over the training items (ignored with ``num_train_steps``).
        num_train_steps: total steps; defaults to ``num_epochs`` passes.
        warmup_proportion: fraction of steps with linear warm-up.
        optimizer: ``"adamw"`` (official fine-tuning default) or ``"lamb"``.
        eval_every: steps between dev evaluations (and at the end).
        patience: evaluations without improvement before stopping (0: never stop).
        seed: shuffling seed.
        progress: show a progress bar.
        language: stored in ``finetune.json`` (the exporter and the app show it).
        fused_kernels: on CPU, run GELU, LayerNorm, attention's masked softmax
            and its head split/merge as fused kernels in its steps
            (`albert_tf.kernels`); saved models are unaffected.
    """

    #: The dev metric that picks the best checkpoint (higher is better).
    metric = "accuracy"
    #: The items `encode` takes; anything else passed to fit/evaluate is
    #: taken as `encode`'s output.
    item_type: type = object
    #: Shapes of the step functions' id inputs and labels.
    ids_spec = tf.TensorSpec([None, None], tf.int32)
    label_spec = tf.TensorSpec([None], tf.int32)

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
        eval_every: int = 500,
        patience: int = 5,
        seed: int = 0,
        progress: bool = True,
        language: str = "",
        fused_kernels: bool = True,
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
        self.model, self.tokenizer = model, tokenizer
        self.output_dir = os.fspath(output_dir)
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or 2 * batch_size
        self.learning_rate, self.num_epochs = learning_rate, num_epochs
        self.num_train_steps, self.warmup_proportion = num_train_steps, warmup_proportion
        self.optimizer_name, self.weight_decay_rate = optimizer, weight_decay_rate
        self.eval_every, self.patience, self.seed = eval_every, patience, seed
        self.progress, self.language = progress, language
        self.fused_kernels = fused_kernels
        ids = self.ids_spec
        self._predict = tf.function(self._logits, input_signature=[ids, ids, ids])

    # -- the task's part ---------------------------------------------------

    def encode(self, items: Sequence) -> list[dict[str, np.ndarray]]:
        """Packs items once; fit/evaluate accept the result to avoid re-tokenising."""
        raise NotImplementedError

    def batches(
        self, encoded: Sequence[dict[str, np.ndarray]], batch_size: int, shuffle: bool, seed: int
    ):
        """(features, labels) batches padded to their own longest item."""
        raise NotImplementedError

    def loss_and_correct(self, logits: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Mean loss of a batch and its number of right answers (0 for scores)."""
        raise NotImplementedError

    def evaluate(self, data) -> dict[str, float]:
        """Dev or test metrics, `metric` among them, and ``count``."""
        raise NotImplementedError

    def task_settings(self) -> dict:
        """What the exporter needs besides the model: written to ``finetune.json``."""
        raise NotImplementedError

    # -- shared --------------------------------------------------------------

    def _encoded(self, data) -> list[dict[str, np.ndarray]]:
        if data and isinstance(data[0], self.item_type):
            return self.encode(data)
        return list(data)

    def _logits(self, token_ids, segment_ids, padding_mask, training=False):
        features = {
            "token_ids": token_ids,
            "segment_ids": segment_ids,
            "padding_mask": padding_mask,
        }
        with kernels.fused(self.fused_kernels):
            return tf.cast(self.model(features, training=training), tf.float32)

    def _build_train_step(self, optimizer):
        model = self.model
        ids = self.ids_spec

        @tf.function(input_signature=[ids, ids, ids, self.label_spec])
        def train_step(token_ids, segment_ids, padding_mask, labels):
            with tf.GradientTape() as tape:
                logits = self._logits(token_ids, segment_ids, padding_mask, training=True)
                loss, correct = self.loss_and_correct(logits, labels)
            variables = model.trainable_variables
            grads = tape.gradient(loss, variables)  # AlbertOptimizer densifies sparse ones
            grads, _ = tf.clip_by_global_norm(grads, 1.0)  # as the official optimizer
            optimizer.apply(grads, variables)
            return loss, correct

        return train_step

    def settings(self) -> dict:
        return self.task_settings() | {
            "max_seq_length": self.max_seq_length,
            "batch_size": self.batch_size,
            "learning_rate": self.learning_rate,
            "optimizer": self.optimizer_name,
            "warmup_proportion": self.warmup_proportion,
            "seed": self.seed,
            "language": self.language,
        }

    def save(self, directory: str, metrics: dict) -> None:
        save_model(self.model, directory, tokenizer=self.tokenizer)
        write_json_atomic(
            os.path.join(directory, SETTINGS_FILE), self.settings() | {"metrics": metrics}
        )

    def fit(self, train, dev) -> dict:
        """Trains, evaluating on ``dev`` every ``eval_every`` steps.

        Returns:
            ``metric`` (its name), ``best_metric`` (also as ``best_<metric>``),
            ``best_step``, ``best_dir``, ``steps``, ``stopped_early``,
            ``history`` (one dict per evaluation), ``train_seconds``.
        """
        train_enc, dev_enc = self._encoded(train), self._encoded(dev)
        if not train_enc or not dev_enc:
            raise ValueError("fit() needs non-empty train and dev sets")
        steps_per_epoch = math.ceil(len(train_enc) / self.batch_size)
        total = self.num_train_steps or max(1, round(self.num_epochs * steps_per_epoch))
        schedule = WarmupPolynomialDecay(
            self.learning_rate, total_steps=total, warmup_steps=int(self.warmup_proportion * total)
        )
        optimizer = AlbertOptimizer(
            learning_rate=schedule,
            weight_decay_rate=self.weight_decay_rate,
            layer_adaptation=self.optimizer_name == "lamb",
        )
        train_step = self._build_train_step(optimizer)
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
        start = time.perf_counter()
        run_loss, run_correct, run_count, epoch = 0.0, 0.0, 0, 0
        while step < total and not stopped:
            for features, labels in self.batches(
                train_enc, self.batch_size, shuffle=True, seed=self.seed + epoch
            ):
                loss, correct = train_step(
                    features["token_ids"], features["segment_ids"], features["padding_mask"], labels
                )
                step += 1
                run_loss += float(loss) * len(labels)
                run_correct += float(correct)
                run_count += len(labels)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{float(loss):.3f}", best_dev=f"{max(best, 0.0):.3f}")
                if step % self.eval_every == 0 or step == total:
                    metrics = self.evaluate(dev_enc)
                    record = {"step": step, "epoch": epoch, "train_loss": run_loss / run_count}
                    if self.label_spec.dtype.is_integer:
                        record["train_accuracy"] = run_correct / run_count
                    record |= {f"dev_{k}": v for k, v in metrics.items() if k != "count"}
                    record["seconds"] = round(time.perf_counter() - start, 1)
                    run_loss, run_correct, run_count = 0.0, 0.0, 0
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
                        bar.set_postfix(loss=f"{float(loss):.3f}", best_dev=f"{best:.3f}")
                    # Without a bar (logs, CI) the evaluations are the progress report.
                    write(message)
                    if self.patience and stale >= self.patience:
                        stopped = True
                        write(f"early stopping: no improvement in {stale} evaluations")
                if step >= total or stopped:
                    break
            epoch += 1
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
            "history": history,
            "train_seconds": time.perf_counter() - start,
        }


class MultipleChoiceTrainer(FineTuningTrainer):
    """Fine-tunes a multiple-choice model (cross-entropy over its options, as
    ``run_race``) and keeps its best dev-accuracy checkpoint.

    Args (besides `FineTuningTrainer`'s):
        model: an `AlbertMultipleChoice` (e.g. from `albert_tf.load_multiple_choice`).
        max_qa_length: question+option pieces kept, as in run_race.
        context_keep: which end of a too-long context is kept (``"start"``,
            as run_race; ``"end"`` for "what comes next?" items).

    Example:
        >>> trainer = MultipleChoiceTrainer(model, tokenizer, output_dir="runs/mc",
        ...                                 max_seq_length=256, batch_size=16)  # doctest: +SKIP
        >>> result = trainer.fit(train_items, dev_items)                  # doctest: +SKIP
        >>> result["best_accuracy"], result["best_dir"]                  # doctest: +SKIP
        (0.61, 'runs/mc/best')
    """

    item_type = MultipleChoiceExample
    ids_spec = _IDS

    def __init__(
        self,
        model,
        tokenizer,
        *,
        max_qa_length: int = 128,
        context_keep: str = "start",
        **kwargs,
    ):
        super().__init__(model, tokenizer, **kwargs)
        self.max_qa_length, self.context_keep = max_qa_length, context_keep

    def encode(self, items: Sequence[MultipleChoiceExample]) -> list[dict[str, np.ndarray]]:
        """Packs items once; fit/evaluate accept the result to avoid re-tokenising."""
        return encode_multiple_choice(
            items,
            self.tokenizer,
            max_seq_length=self.max_seq_length,
            max_qa_length=self.max_qa_length,
            context_keep=self.context_keep,
        )

    def batches(self, encoded, batch_size, shuffle=False, seed=0):
        return multiple_choice_batches(encoded, batch_size, shuffle=shuffle, seed=seed)

    def loss_and_correct(self, logits, labels):
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        correct = tf.reduce_sum(
            tf.cast(tf.argmax(logits, -1, output_type=tf.int32) == labels, tf.float32)
        )
        return loss, correct

    # -- public ------------------------------------------------------------

    def evaluate(self, data) -> dict[str, float]:
        """Accuracy and mean loss on items (or their `encode` output)."""
        encoded = self._encoded(data)
        if not encoded:
            raise ValueError("evaluate() needs at least one item")
        # Sorting by size keeps padding low; order does not change accuracy.
        encoded = sorted(encoded, key=lambda e: e["token_ids"].size)
        correct, loss, count = 0, 0.0, 0
        for features, labels in multiple_choice_batches(encoded, self.eval_batch_size):
            logits = self._predict(
                features["token_ids"], features["segment_ids"], features["padding_mask"]
            )
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
            correct += int(np.sum(np.argmax(logits.numpy(), -1) == labels))
            loss += float(tf.reduce_sum(losses))
            count += len(labels)
        return {"accuracy": correct / count, "loss": loss / count, "count": count}

    def predict(self, data) -> np.ndarray:
        """Option probabilities, [items, max options] (0 for absent options)."""
        encoded = self._encoded(data)
        rows = []
        width = max(e["token_ids"].shape[0] for e in encoded)
        for features, _ in multiple_choice_batches(encoded, self.eval_batch_size):
            logits = self._predict(
                features["token_ids"], features["segment_ids"], features["padding_mask"]
            )
            probs = tf.nn.softmax(logits, -1).numpy()
            rows.append(np.pad(probs, ((0, 0), (0, width - probs.shape[1]))))
        return np.concatenate(rows)

    def task_settings(self) -> dict:
        return {
            "task": "multiple_choice",
            "max_qa_length": self.max_qa_length,
            "context_keep": self.context_keep,
        }
