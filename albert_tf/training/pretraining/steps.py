"""The compiled steps of pretraining: train, accumulate, apply, count, evaluate.

* Each step's global batch is the same examples whatever the strategy: every
  worker reads the global batch and each replica keeps its slice, inside the
  compiled step (see `PretrainingSteps._distribute`), so N workers train exactly
  like one worker and the host dispatches one function call per step.
* The steps return tensors; nothing is read back to the host but whether the
  step was applied (`applied`), which the trainer needs to count steps. Losses
  and counts are read at logging intervals.
* Losses are per-replica *sums* divided by counts all-reduced over replicas.
* Gradients are all-reduced once, clipped by global norm, then applied
  without Keras all-reducing them again
  (`AlbertOptimizer.gradients_already_reduced`); Keras' own
  ``global_clipnorm`` would clip each replica's partial gradient before the
  reduction.
* A step whose summed gradient is not finite is skipped: weights, optimizer
  slots and the step counter (hence the learning rate) stay as they were.
  Under float16 the `LossScaleOptimizer` does this itself and also halves
  its loss scale.
* Gradient accumulation sums micro-batch gradients in ON_READ variables,
  each normalised by the counts of the whole step, so k micro-batches give
  the gradient of one k-times-larger batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import keras
import tensorflow as tf

from albert_tf import kernels
from albert_tf.models.pretraining_model import AlbertPretrainingModel
from albert_tf.training.losses import masked_lm_sums, sentence_order_sums
from albert_tf.training.optimization import AlbertOptimizer
from albert_tf.training.pretraining.options import PretrainingOptions


def variables_to_train(model: AlbertPretrainingModel, sentence_task: str) -> list:
    """The model's trainable variables that the loss reaches.

    Without a sentence task no gradient flows to the pooler or the SOP
    head: they keep their initial values (the paper's "None" model) rather
    than being decayed towards zero by the optimizer's weight decay.
    """
    variables = model.trainable_variables
    if sentence_task != "none":
        return variables
    unused = {
        id(v)
        for v in (
            *model.sop_head.trainable_variables,
            *model.backbone.pooler.trainable_variables,
        )
    }
    return [v for v in variables if id(v) not in unused]


#: What a training step sums (and the compiled loop adds up over its steps).
STEP_SUMS = (
    "mlm_loss_sum",
    "mlm_correct",
    "mlm_count",
    "sop_loss_sum",
    "sop_correct",
    "sop_count",
    "grad_norm",
    "examples",
    "tokens",
)


class PretrainingSteps:
    """The `tf.function` steps of one pretraining run under ``strategy``.

    Create it inside ``strategy.scope()``: it builds the optimizer's slots for
    the variables it trains, and the gradient accumulators.

    Attributes:
        variables: what the optimizer updates (see `variables_to_train`).
        train_fn: ``(features, labels) -> sums``, one optimizer step on one
            global batch (no accumulation).
        train_loop_fn: ``(iterator, num_steps) -> sums``, several steps in one
            call (see `train_loop`).
        count_fn: ``[labels, ...] -> [masked tokens, examples]`` of a step's
            micro-batches (at least 1 each: they divide).
        accumulate_fn: ``(features, labels, normalizers) -> sums``, adds one
            global micro-batch's gradient to the accumulators.
        apply_fn: ``() -> {"grad_norm", "applied"}``, applies and clears the
            accumulators.
        eval_fn: ``(features, labels) -> sums`` of a global batch, without training.
    """

    def __init__(
        self,
        model: AlbertPretrainingModel,
        optimizer: keras.optimizers.Optimizer,
        strategy: tf.distribute.Strategy,
        options: PretrainingOptions,
    ):
        self.model = model
        self.optimizer = optimizer
        self.strategy = strategy
        self.options = options
        self.num_replicas = strategy.num_replicas_in_sync
        self.variables = variables_to_train(model, options.sentence_task)
        optimizer.build(self.variables)
        #: Applied in order to each micro-batch's loss before its gradients; a
        #: `TrainerHook` may add one in `install`, before the steps are traced.
        self.loss_transforms: list[Callable[[tf.Tensor], tf.Tensor]] = []
        self._accumulators: list[tf.Variable] = []
        if options.gradient_accumulation_steps > 1:
            self._accumulators = [
                tf.Variable(
                    tf.zeros(v.shape, tf.float32),
                    trainable=False,
                    synchronization=tf.VariableSynchronization.ON_READ,
                    aggregation=tf.VariableAggregation.SUM,
                )
                for v in self.variables
            ]
        self._build()

    # ------------------------------------------------------------------ data
    def _distribute(self, batch):
        """Each replica's slice of a global batch; called inside the compiled steps,
        so the split costs the host nothing.

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

    @staticmethod
    def _batch_counts(features) -> dict[str, tf.Tensor]:
        """Examples and real tokens of a global batch (token-budget batches vary)."""
        mask = features["padding_mask"]
        return {
            "examples": tf.cast(tf.shape(mask)[0], tf.float32),
            "tokens": tf.reduce_sum(tf.cast(mask, tf.float32)),
        }

    def train(self, batches: Sequence) -> dict[str, tf.Tensor]:
        """One optimizer step on ``batches``, the step's global micro-batches
        (one without gradient accumulation). Returns summed losses, counts, the
        gradient norm and ``applied`` (False: a non-finite step, skipped), as
        tensors: reading them back is the caller's choice."""
        if not self._accumulators:
            (batch,) = batches  # no accumulation: a step is one micro-batch
            return self.train_fn(*batch)
        # The step's total counts normalise every one of its micro-batches.
        normalizers = self.count_fn([labels for _, labels in batches])
        totals: dict[str, Any] = {}
        for features, labels in batches:
            for k, v in self.accumulate_fn(features, labels, normalizers).items():
                totals[k] = totals[k] + v if k in totals else v
        return {**totals, **self.apply_fn()}

    def train_loop(
        self, iterator, num_steps: int, consecutive_skipped: int = 0
    ) -> dict[str, tf.Tensor]:
        """Up to ``num_steps`` attempts at optimizer steps in one compiled call, each
        on the next global batch of ``iterator`` (no accumulation).

        ``consecutive_skipped``: non-finite steps in a row before this call; the loop
        stops early when that run reaches ``max_consecutive_nonfinite_steps``.
        Returns the `STEP_SUMS` of the applied steps, ``attempts``,
        ``applied_steps`` and ``consecutive_skipped`` (the run of skips at the end).
        """
        return self.train_loop_fn(
            iterator,
            tf.constant(num_steps, tf.int32),
            tf.constant(consecutive_skipped, tf.int32),
            tf.constant(self.options.max_consecutive_nonfinite_steps, tf.int32),
        )

    def evaluate(self, batch) -> dict[str, tf.Tensor]:
        """Summed losses and counts of one global held-out batch."""
        return self.eval_fn(*batch)

    # ------------------------------------------------------------------ replica code
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
        """[masked tokens, examples] of a micro-batch: a replica's slice, or in
        `count_fn` a global batch."""
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
        with tf.GradientTape() as tape:
            sums = self._forward_sums(features, labels, training=True)
            loss = sums["mlm_loss_sum"] / normalizers[0]
            if self.options.sentence_task != "none":
                loss += sums["sop_loss_sum"] / normalizers[1]
            for transform in self.loss_transforms:
                loss = transform(loss)
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, self.variables)
        return [tf.convert_to_tensor(g, tf.float32) for g in grads], sums

    def _apply(self, local_grads):
        """All-reduce, clip by global norm, apply if finite. Returns the
        global norm (non-finite for a skipped step)."""
        ctx = tf.distribute.get_replica_context()
        grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, local_grads)
        scale = self._loss_scale()
        grads = [g / scale for g in grads]
        grads, norm = tf.clip_by_global_norm(grads, self.options.clip_norm)
        # Already summed over replicas: Keras must not all-reduce them again.
        # A LossScaleOptimizer divides by its scale itself, hence ``* scale``.
        grads = [g * scale for g in grads]
        with self._base_optimizer().gradients_already_reduced():
            if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
                # It skips non-finite steps itself, and lowers its scale.
                self.optimizer.apply(grads, self.variables)
            else:
                # The norm of the summed gradient: the same on every replica.
                self._apply_if(tf.math.is_finite(norm), grads)
        return norm

    def _apply_if(self, finite, grads) -> None:
        """``optimizer.apply(grads)`` only if ``finite``; as Keras'
        LossScaleOptimizer does it, since a strategy that updates variables
        through ``merge_call`` (TPUStrategy) needs the cond in cross-replica
        context."""

        def apply(grads):
            self.optimizer.apply(grads, self.variables)

        if tf.__internal__.distribute.strategy_supports_no_merge_call():
            tf.cond(finite, lambda: apply(grads), lambda: None)
            return

        def cross_replica(strategy, finite, grads):
            first = strategy.experimental_local_results(finite)[0]
            tf.cond(
                first,
                lambda: strategy.extended.call_for_each_replica(apply, args=(grads,)),
                lambda: None,
            )

        tf.distribute.get_replica_context().merge_call(cross_replica, args=(finite, grads))

    def _base_optimizer(self) -> AlbertOptimizer:
        optimizer = self.optimizer
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            optimizer = optimizer.inner_optimizer
        if not isinstance(optimizer, AlbertOptimizer):
            raise TypeError(f"PretrainingSteps needs an AlbertOptimizer, got {type(optimizer)}")
        return optimizer

    def _loss_scale(self):
        if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
            return tf.cast(self.optimizer.dynamic_scale, tf.float32)
        return tf.constant(1.0)

    # ------------------------------------------------------------------ tf.functions
    def _build(self) -> None:
        strategy = self.strategy

        def reduce(values):
            return {
                k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                for k, v in values.items()
            }

        def applied(step_before):
            # Exact for both skipping paths (ours and LossScaleOptimizer's).
            return {"applied": self.optimizer.iterations > step_before}

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

        def train_body(features, labels):
            before = tf.identity(self.optimizer.iterations)
            sums = reduce(strategy.run(fused_step, args=self._distribute((features, labels))))
            return {**sums, **self._batch_counts(features), **applied(before)}

        @tf.function
        def train_fn(features, labels):
            return train_body(features, labels)

        @tf.function
        def train_loop_fn(iterator, num_steps, consecutive_skipped, max_consecutive):
            def body(i, totals, done, run):
                out = train_body(*next(iterator))
                ok = out.pop("applied")
                if set(out) != set(STEP_SUMS):  # at trace time: STEP_SUMS is stale
                    raise ValueError(f"STEP_SUMS {STEP_SUMS} != step outputs {sorted(out)}")
                # A skipped step's sums are left out, as the one-step loop does.
                totals = {k: totals[k] + tf.where(ok, out[k], 0.0) for k in STEP_SUMS}
                done += tf.cast(ok, tf.int32)
                run = tf.where(ok, 0, run + 1)
                return i + 1, totals, done, run

            def more(i, totals, done, run):
                # Stops early once the skips in a row reach the limit: the host raises.
                return tf.logical_and(i < num_steps, run < max_consecutive)

            zeros = {k: tf.constant(0.0) for k in STEP_SUMS}
            attempts, totals, done, run = tf.while_loop(
                more, body, (tf.constant(0), zeros, tf.constant(0), consecutive_skipped)
            )
            return {
                **totals,
                "attempts": attempts,
                "applied_steps": done,
                "consecutive_skipped": run,
            }

        @tf.function
        def count_fn(labels_list):
            # [masked tokens, examples] of the whole step: the global batches' own
            # counts, the same as all-reducing every replica's.
            return tf.maximum(tf.add_n([self._local_counts(y) for y in labels_list]), 1.0)

        @tf.function
        def accumulate_fn(features, labels, normalizers):
            distributed = self._distribute((features, labels))
            sums = reduce(strategy.run(accumulate_step, args=(*distributed, normalizers)))
            return {**sums, **self._batch_counts(features)}

        @tf.function
        def apply_fn():
            before = tf.identity(self.optimizer.iterations)
            return {**reduce(strategy.run(apply_accumulated)), **applied(before)}

        @tf.function
        def eval_fn(features, labels):
            return reduce(strategy.run(eval_step, args=self._distribute((features, labels))))

        if self.options.jit_compile:
            # XLA compiles the model's forward and backward pass; collectives
            # and the optimizer update stay outside the cluster.
            self._gradients = tf.function(self._gradients, jit_compile=True)
        self.train_fn, self.accumulate_fn, self.apply_fn = train_fn, accumulate_fn, apply_fn
        self.train_loop_fn = train_loop_fn
        self.count_fn = count_fn
        self.eval_fn = eval_fn
