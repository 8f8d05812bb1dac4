"""The compiled steps every training loop shares: split, forward, reduce, clip, apply.

`TrainingSteps` is the step machinery of pretraining and of every fine-tuning
task; a subclass says only what its objective sums (`forward_sums`), what
normalises the sums (`local_counts`) and how they make a loss (`loss`).

* Each step's global batch is the same examples whatever the strategy: every
  worker reads the global batch and each replica keeps its slice, inside the
  compiled step (`replica_slices`), so N workers train exactly like one worker
  and the host dispatches one function call per step.
* The steps return tensors; nothing is read back to the host but whether the
  step was applied (``applied``), which a loop needs to count steps. Losses
  and counts are read when a loop reports them.
* Losses are per-replica *sums* divided by counts all-reduced over replicas,
  so a replica with a short (or empty) slice weighs what its examples weigh.
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
* The compiled loop (`TrainingSteps.train_loop`) runs several optimizer steps in
  one call, with or without accumulation: the same arithmetic in the same order
  as one call a step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import keras
import tensorflow as tf

from albert_tf.training.optimization import AlbertOptimizer
from albert_tf.training.strategies import num_workers

#: What every training step adds to its objective's sums.
COMMON_SUMS = ("grad_norm", "examples", "tokens")

#: The default limit on non-finite steps in a row before a loop gives up.
MAX_CONSECUTIVE_NONFINITE_STEPS = 10


def replica_slices(strategy: tf.distribute.Strategy, batch, per_worker: bool = False):
    """Each replica's contiguous slice of a global batch, as a distributed value.

    Called inside a compiled step, so the split costs the host nothing. A
    batch of fewer rows than replicas leaves some replicas an empty slice.
    With ``per_worker``, ``batch`` is this worker's rows of the global batch
    (`albert_tf.data.pipeline.pretraining_dataset`'s ``worker_rows``), split
    among its local replicas: the same rows per replica as a global batch.
    """
    n = strategy.num_replicas_in_sync
    if per_worker:
        n //= num_workers(strategy)

    def replica_slice(context):
        # Replica ids run worker by worker: the local index is the remainder.
        r = context.replica_id_in_sync_group % n

        def take(t):
            rows = tf.shape(t)[0]  # a last batch may be short
            return t[r * rows // n : (r + 1) * rows // n]

        return tf.nest.map_structure(take, batch)

    return strategy.experimental_distribute_values_from_function(replica_slice)


def batch_counts(features) -> dict[str, tf.Tensor]:
    """Examples and real tokens of a batch or a replica's slice (sizes vary)."""
    mask = features["padding_mask"]
    return {
        "examples": tf.cast(tf.shape(mask)[0], tf.float32),
        "tokens": tf.reduce_sum(tf.cast(mask, tf.float32)),
    }


def distributed_function(
    strategy: tf.distribute.Strategy, fn: Callable, input_signature=None
) -> Callable:
    """``fn(features)`` run on every replica's slice of a global batch, its outputs
    gathered back in the batch's order: evaluation that uses every device."""

    def gathered(features):
        per_replica = strategy.run(fn, args=(replica_slices(strategy, features),))
        return tf.nest.map_structure(lambda t: strategy.gather(t, axis=0), per_replica)

    return tf.function(gathered, input_signature=input_signature)


class TrainingSteps:
    """The `tf.function` steps of one training run under ``strategy``.

    Create it inside ``strategy.scope()``: it builds the optimizer's slots for
    the variables it trains, and the gradient accumulators.

    Subclasses define `sum_names` and `forward_sums`, `local_counts`, `loss`.

    Args:
        model: what `forward_sums` runs.
        optimizer: an `AlbertOptimizer`, or a `LossScaleOptimizer` around one.
        strategy: the run's strategy (its variables were made in its scope).
        variables: what the optimizer updates (default: the model's trainable ones).
        clip_norm: global-norm clipping of the summed gradient.
        gradient_accumulation_steps: micro-batches per optimizer step.
        jit_compile: XLA for the forward and backward pass.
        max_consecutive_nonfinite_steps: where `train_loop` stops early.
        input_per_worker: training batches are each worker's rows of the global
            batch, not the global batch (see `replica_slices`).
        batch_spec: ``(features, labels)`` `tf.TensorSpec` structure of a global
            micro-batch; with unknown dimensions, batches padded to their own
            length share one trace (default: a trace per shape, as fixed-shape
            pretraining batches need).

    Attributes:
        train_fn: ``(features, labels) -> sums``, one optimizer step on one
            global batch (no accumulation).
        train_loop_fn: ``(iterator, num_steps, ...) -> sums``, several optimizer
            steps in one call, each on ``gradient_accumulation_steps`` micro-batches
            (see `train_loop`).
        count_fn: ``[labels, ...] -> counts`` of a step's micro-batches (at
            least 1 each: they divide).
        accumulate_fn: ``(features, labels, normalizers) -> sums``, adds one
            global micro-batch's gradient to the accumulators.
        apply_fn: ``() -> {"grad_norm", "applied"}``, applies and clears the
            accumulators.
        eval_fn: ``(features, labels) -> sums`` of a global batch, without training.
    """

    #: The objective's sums, e.g. ``("loss_sum", "correct")``; a step adds
    #: `COMMON_SUMS`.
    sum_names: tuple[str, ...] = ()

    def __init__(
        self,
        model: keras.Model,
        optimizer: keras.optimizers.Optimizer,
        strategy: tf.distribute.Strategy,
        *,
        variables: Sequence[tf.Variable] | None = None,
        clip_norm: float = 1.0,
        gradient_accumulation_steps: int = 1,
        jit_compile: bool = False,
        max_consecutive_nonfinite_steps: int = MAX_CONSECUTIVE_NONFINITE_STEPS,
        batch_spec=None,
        input_per_worker: bool = False,
    ):
        self.model = model
        self.optimizer = optimizer
        self.strategy = strategy
        self.num_replicas = strategy.num_replicas_in_sync
        self.clip_norm = clip_norm
        self.jit_compile = jit_compile
        self.input_per_worker = input_per_worker
        self.max_consecutive_nonfinite_steps = max_consecutive_nonfinite_steps
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.variables = list(model.trainable_variables if variables is None else variables)
        optimizer.build(self.variables)
        #: Applied in order to each micro-batch's loss before its gradients; a
        #: `TrainerHook` may add one in `install`, before the steps are traced.
        self.loss_transforms: list[Callable[[tf.Tensor], tf.Tensor]] = []
        self._accumulators: list[tf.Variable] = []
        if gradient_accumulation_steps > 1:
            self._accumulators = [
                tf.Variable(
                    tf.zeros(v.shape, tf.float32),
                    trainable=False,
                    synchronization=tf.VariableSynchronization.ON_READ,
                    aggregation=tf.VariableAggregation.SUM,
                )
                for v in self.variables
            ]
        self.step_sums = (*self.sum_names, *COMMON_SUMS)
        self._build(batch_spec, gradient_accumulation_steps)

    # ------------------------------------------------------------------ the objective
    def forward_sums(self, features, labels, training: bool) -> dict[str, tf.Tensor]:
        """The objective's `sum_names` over one replica's slice."""
        raise NotImplementedError

    def local_counts(self, labels) -> tf.Tensor:
        """A vector of counts (e.g. [examples]) of a micro-batch: a replica's slice,
        or in `count_fn` a global batch. `loss` divides by their global sums."""
        raise NotImplementedError

    def loss(self, sums: dict[str, tf.Tensor], normalizers: tf.Tensor) -> tf.Tensor:
        """This replica's share of the global micro-batch's loss."""
        raise NotImplementedError

    # ------------------------------------------------------------------ host side
    def train(self, batches: Sequence) -> dict[str, tf.Tensor]:
        """One optimizer step on ``batches``, the step's global micro-batches
        (one without gradient accumulation). Returns the summed objective, counts,
        the gradient norm and ``applied`` (False: a non-finite step, skipped), as
        tensors: reading them back is the caller's choice."""
        expected = self.gradient_accumulation_steps
        if len(batches) != expected:
            raise ValueError(
                f"a step takes {expected} micro-batch(es) (gradient_accumulation_steps), "
                f"got {len(batches)}"
            )
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
        on the next ``gradient_accumulation_steps`` global micro-batches of
        ``iterator``: the steps `train` would take on them, one by one.

        ``consecutive_skipped``: non-finite steps in a row before this call; the loop
        stops early when that run reaches ``max_consecutive_nonfinite_steps``.
        Returns the `step_sums` of the applied steps, ``attempts``,
        ``applied_steps`` and ``consecutive_skipped`` (the run of skips at the end).
        """
        return self.train_loop_fn(
            iterator,
            tf.constant(num_steps, tf.int32),
            tf.constant(consecutive_skipped, tf.int32),
            tf.constant(self.max_consecutive_nonfinite_steps, tf.int32),
        )

    def evaluate(self, batch) -> dict[str, tf.Tensor]:
        """Summed objective of one global held-out batch."""
        return self.eval_fn(*batch)

    # ------------------------------------------------------------------ replica code
    def _forward(self, features, labels, training: bool):
        return self.forward_sums(features, labels, training)

    def _normalizers(self, labels):
        """Global counts, all-reduced before the forward pass so the
        all-reduce stays outside the (optionally XLA-compiled) model step."""
        ctx = tf.distribute.get_replica_context()
        total = ctx.all_reduce(tf.distribute.ReduceOp.SUM, self.local_counts(labels))
        return tf.maximum(total, 1.0)

    def _gradients(self, features, labels, normalizers):
        with tf.GradientTape() as tape:
            sums = self._forward(features, labels, training=True)
            loss = self.loss(sums, normalizers)
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
        grads, norm = tf.clip_by_global_norm(grads, self.clip_norm)
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
            raise TypeError(
                f"{type(self).__name__} needs an AlbertOptimizer, got {type(optimizer)}"
            )
        return optimizer

    def _loss_scale(self):
        if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
            return tf.cast(self.optimizer.dynamic_scale, tf.float32)
        return tf.constant(1.0)

    # ------------------------------------------------------------------ tf.functions
    def _build(self, batch_spec, accumulation: int) -> None:
        strategy = self.strategy

        def function(*signature):
            if batch_spec is None:
                return tf.function
            return lambda fn: tf.function(fn, input_signature=list(signature))

        features_spec, labels_spec = batch_spec or (None, None)
        counts_spec = tf.TensorSpec([None], tf.float32)

        def reduce(values):
            return {
                k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                for k, v in values.items()
            }

        def applied(step_before):
            # Exact for both skipping paths (ours and LossScaleOptimizer's).
            return {"applied": self.optimizer.iterations > step_before}

        def training_slices(batch):
            return replica_slices(strategy, batch, per_worker=self.input_per_worker)

        def fused_step(features, labels):
            grads, sums = self._gradients(features, labels, self._normalizers(labels))
            sums["grad_norm"] = self._apply(grads) / self.num_replicas
            # Counted per slice and summed: a worker may hold only its rows.
            return {**sums, **batch_counts(features)}

        def accumulate_step(features, labels, normalizers):
            # Normalised by the whole step's counts: k micro-batches then sum
            # to exactly the gradient of one batch of k times the size.
            grads, sums = self._gradients(features, labels, normalizers)
            for acc, g in zip(self._accumulators, grads, strict=True):
                acc.assign_add(g)
            return {**sums, **batch_counts(features)}

        def apply_accumulated():
            norm = self._apply([acc.read_value() for acc in self._accumulators])
            for acc in self._accumulators:
                acc.assign(tf.zeros_like(acc))
            return {"grad_norm": norm / self.num_replicas}

        def eval_step(features, labels):
            return self._forward(features, labels, training=False)

        def train_body(features, labels):
            before = tf.identity(self.optimizer.iterations)
            sums = reduce(strategy.run(fused_step, args=training_slices((features, labels))))
            return {**sums, **applied(before)}

        def step_counts(labels_list):
            # The whole step's counts, all-reduced over every replica's slices.
            def counts(*slices):
                local = tf.add_n([self.local_counts(y) for y in slices])
                ctx = tf.distribute.get_replica_context()
                return ctx.all_reduce(tf.distribute.ReduceOp.SUM, local)

            per_replica = strategy.run(counts, args=[training_slices(y) for y in labels_list])
            total = strategy.experimental_local_results(per_replica)[0]
            return tf.maximum(total, 1.0)

        def accumulate_body(features, labels, normalizers):
            distributed = training_slices((features, labels))
            return reduce(strategy.run(accumulate_step, args=(*distributed, normalizers)))

        def apply_body():
            before = tf.identity(self.optimizer.iterations)
            return {**reduce(strategy.run(apply_accumulated)), **applied(before)}

        def accumulated_step(iterator):
            """One optimizer step of the loop on ``accumulation`` micro-batches: what
            `train` does from the host, in the same order."""
            batches = [next(iterator) for _ in range(accumulation)]
            normalizers = step_counts([labels for _, labels in batches])
            # The micro-batches go through a while loop, not an unrolled one: its
            # iterations run one after another, so one micro-batch's activations are
            # live at a time. Their shapes may differ (a token budget, batches
            # padded to their own length), which a TensorArray's elements may.
            leaves = [tf.nest.flatten(batch) for batch in batches]
            arrays = [
                tf.TensorArray(t.dtype, size=accumulation, element_shape=t.shape, infer_shape=False)
                for t in leaves[0]
            ]
            for j, batch_leaves in enumerate(leaves):
                arrays = [a.write(j, t) for a, t in zip(arrays, batch_leaves, strict=True)]

            def micro_batch(j, totals):
                batch = tf.nest.pack_sequence_as(batches[0], [a.read(j) for a in arrays])
                out = accumulate_body(*batch, normalizers)
                return j + 1, {k: totals[k] + out[k] for k in totals}

            # What each micro-batch sums: the objective's and `batch_counts`.
            zeros = {k: tf.constant(0.0) for k in (*self.sum_names, "examples", "tokens")}
            _, totals = tf.while_loop(
                lambda j, _: j < accumulation, micro_batch, (tf.constant(0), zeros)
            )
            return {**totals, **apply_body()}

        def loop_step(iterator):
            if not self._accumulators:
                return train_body(*next(iterator))
            return accumulated_step(iterator)

        step_sums = self.step_sums

        @function(features_spec, labels_spec)
        def train_fn(features, labels):
            return train_body(features, labels)

        @tf.function
        def train_loop_fn(iterator, num_steps, consecutive_skipped, max_consecutive):
            def body(i, totals, done, run):
                out = loop_step(iterator)
                ok = out.pop("applied")
                if set(out) != set(step_sums):  # at trace time: sum_names is stale
                    raise ValueError(f"step sums {step_sums} != step outputs {sorted(out)}")
                # A skipped step's sums are left out, as the one-step loop does.
                totals = {k: totals[k] + tf.where(ok, out[k], 0.0) for k in step_sums}
                done += tf.cast(ok, tf.int32)
                run = tf.where(ok, 0, run + 1)
                return i + 1, totals, done, run

            def more(i, totals, done, run):
                # Stops early once the skips in a row reach the limit: the host raises.
                return tf.logical_and(i < num_steps, run < max_consecutive)

            zeros = {k: tf.constant(0.0) for k in step_sums}
            attempts, totals, done, run = tf.while_loop(
                more, body, (tf.constant(0), zeros, tf.constant(0), consecutive_skipped)
            )
            return {
                **totals,
                "attempts": attempts,
                "applied_steps": done,
                "consecutive_skipped": run,
            }

        @function([labels_spec] * accumulation)
        def count_fn(labels_list):
            return step_counts(labels_list)

        @function(features_spec, labels_spec, counts_spec)
        def accumulate_fn(features, labels, normalizers):
            return accumulate_body(features, labels, normalizers)

        @tf.function
        def apply_fn():
            return apply_body()

        @function(features_spec, labels_spec)
        def eval_fn(features, labels):
            distributed = replica_slices(strategy, (features, labels))
            return reduce(strategy.run(eval_step, args=distributed))

        if self.jit_compile:
            # XLA compiles the model's forward and backward pass; collectives
            # and the optimizer update stay outside the cluster.
            self._gradients = tf.function(self._gradients, jit_compile=True)
        self.train_fn, self.accumulate_fn, self.apply_fn = train_fn, accumulate_fn, apply_fn
        self.train_loop_fn = train_loop_fn
        self.count_fn = count_fn
        self.eval_fn = eval_fn
