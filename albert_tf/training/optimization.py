"""LAMB / AdamW as the official ALBERT code defines them, and the LR schedule.

Keras ships a `Lamb`, but it bias-corrects the moments and applies weight
decay outside the trust ratio. google-research/albert's ``lamb_optimizer``
does neither: the update is ``m / (sqrt(v) + eps) + wd · w`` and the layer-wise
trust ratio ``‖w‖ / ‖update‖`` scales that whole update. LayerNorm parameters
and biases (and a tagger's CRF scores) get neither weight decay nor the trust ratio.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence

import keras
import tensorflow as tf
from keras import ops

# Official exclusions, matched against our variable paths; and a tagger's CRF scores
# (tagger_head/crf/*), which start at zero: decay would pull them back to "no rule" and
# LAMB's trust ratio ‖w‖/‖update‖ would keep them near zero.
DEFAULT_EXCLUDE = ("layer_norm", "bias", "crf/")


class AlbertOptimizer(keras.optimizers.Optimizer):
    """LAMB (``layer_adaptation=True``) or AdamW with decoupled weight decay.

    Args:
        learning_rate: float or schedule.
        weight_decay_rate: decay added to the update (0.01 in the paper).
        beta_1, beta_2, epsilon: moment decay rates and denominator epsilon.
        layer_adaptation: scale each variable's update by ‖w‖/‖update‖ (LAMB).
        exclude: substrings of variable paths exempt from decay and adaptation.
        learning_rate_multipliers: substrings of variable paths → a factor on the
            learning rate of the variables they match (the first that matches), such
            as a CRF's scores, which learn nothing at a base-size model's rate.
        bias_correction: divide the moments by ``1 - beta**t`` (Adam's correction;
            Hugging Face's and Model Garden's AdamW do). Off by default, as the
            official optimizer: early updates are then ``(1 - beta_1**t) /
            sqrt(1 - beta_2**t)`` times larger (6.6 at step 12, 1.6 at step 500 with
            the defaults), which a tiny model fine-tuned at a high rate can take
            badly (docs/finetuning.md, the optimizer).

    Example:
        >>> import numpy as np
        >>> opt = AlbertOptimizer(learning_rate=0.1)
        >>> w = keras.Variable(np.ones(3, "float32"), name="kernel")
        >>> opt.apply([np.ones(3, "float32")], [w])
        >>> # m=0.1, v=0.001: update = 0.1/(0.0316+1e-6) + 0.01 ≈ 3.172 per unit;
        >>> # trust ratio ‖w‖/‖u‖ = 1/3.172, so each weight moves by lr exactly.
        >>> [round(x, 4) for x in np.asarray(w).tolist()]
        [0.9, 0.9, 0.9]
        >>> # AdamW with the bias correction: Adam's first step moves each weight by lr.
        >>> adam = AlbertOptimizer(0.1, weight_decay_rate=0.0, layer_adaptation=False,
        ...                        bias_correction=True)
        >>> w = keras.Variable(np.ones(3, "float32"), name="kernel")
        >>> adam.apply([np.full(3, 5.0, "float32")], [w])
        >>> [round(x, 4) for x in np.asarray(w).tolist()]
        [0.9, 0.9, 0.9]
        >>> # Without it (the official optimizer), m=0.5, v=0.025: 0.5/0.158 ≈ 3.16 lr.
        >>> plain = AlbertOptimizer(0.1, weight_decay_rate=0.0, layer_adaptation=False)
        >>> w = keras.Variable(np.ones(3, "float32"), name="kernel")
        >>> plain.apply([np.full(3, 5.0, "float32")], [w])
        >>> [round(x, 3) for x in np.asarray(w).tolist()]
        [0.684, 0.684, 0.684]
    """

    def __init__(
        self,
        learning_rate=0.00176,
        weight_decay_rate: float = 0.01,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        layer_adaptation: bool = True,
        exclude: Sequence[str] = DEFAULT_EXCLUDE,
        bias_correction: bool = False,
        learning_rate_multipliers: Mapping[str, float] | None = None,
        name: str | None = None,
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            name=name or ("lamb" if layer_adaptation else "adamw"),
            **kwargs,
        )
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.layer_adaptation = layer_adaptation
        self.bias_correction = bias_correction
        self.learning_rate_multipliers = dict(learning_rate_multipliers or {})
        self.exclude = tuple(exclude)
        self._exclude_re = re.compile("|".join(map(re.escape, self.exclude))) if exclude else None
        self._gradients_reduced = False

    @contextlib.contextmanager
    def gradients_already_reduced(self) -> Iterator[None]:
        """``apply`` calls traced inside take gradients that are already the
        sum over replicas (and identical on every replica).

        Keras' TensorFlow optimizer all-reduces the gradients in a replica
        context; a caller that reduced them itself (to clip the global norm of
        the summed gradient) would otherwise send every gradient twice.
        Tracing-time state: it affects the graph built inside the block.
        """
        previous, self._gradients_reduced = self._gradients_reduced, True
        try:
            yield
        finally:
            self._gradients_reduced = previous

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if self._gradients_reduced:
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v = self.add_optimizer_variables(var_list, ["m", "v"])
        # Decided once, from the Keras paths; update_step sees backend variables.
        self._adapts = [
            self._exclude_re is None or not self._exclude_re.search(v.path) for v in var_list
        ]
        self._rate_factors = [
            next((f for part, f in self.learning_rate_multipliers.items() if part in v.path), 1.0)
            for v in var_list
        ]

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        if isinstance(gradient, tf.IndexedSlices):
            # Embedding gradients arrive sparse; LAMB's trust ratio needs the
            # whole update (and the V×E table is small at E=128).
            gradient = tf.convert_to_tensor(gradient)
        gradient = ops.cast(gradient, variable.dtype)
        index = self._get_variable_index(variable)
        if self._rate_factors[index] != 1.0:
            lr = lr * self._rate_factors[index]
        m, v = self._m[index], self._v[index]
        self.assign(m, self.beta_1 * m + (1.0 - self.beta_1) * gradient)
        self.assign(v, self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient))
        if self.bias_correction:
            t = ops.cast(self.iterations + 1, variable.dtype)
            m_hat, v_hat = m / (1.0 - self.beta_1**t), v / (1.0 - self.beta_2**t)
            update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        else:
            update = m / (ops.sqrt(v) + self.epsilon)  # the official optimizer's
        if self._adapts[index]:
            if self.weight_decay_rate:
                update = update + self.weight_decay_rate * variable
            if self.layer_adaptation:
                w_norm = ops.sqrt(ops.sum(ops.square(variable)))
                u_norm = ops.sqrt(ops.sum(ops.square(update)))
                ratio = ops.where(
                    (w_norm > 0) & (u_norm > 0), w_norm / ops.maximum(u_norm, 1e-30), 1.0
                )
                update = ratio * update
        self.assign_sub(variable, lr * update)

    def get_config(self):
        config = super().get_config()
        config.update(
            weight_decay_rate=self.weight_decay_rate,
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            layer_adaptation=self.layer_adaptation,
            exclude=list(self.exclude),
            bias_correction=self.bias_correction,
            learning_rate_multipliers=dict(self.learning_rate_multipliers),
        )
        return config


class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to ``peak`` over ``warmup_steps``, then polynomial decay.

    As the official ``optimization.create_optimizer``: during warm-up
    lr = peak · step / warmup_steps; afterwards
    lr = (peak − end) · (1 − step / total_steps)^power + end, clamped at
    ``total_steps``.

    >>> schedule = WarmupPolynomialDecay(1.0, total_steps=100, warmup_steps=10)
    >>> [round(float(schedule(s)), 3) for s in (0, 5, 10, 55, 100, 150)]
    [0.0, 0.5, 0.9, 0.45, 0.0, 0.0]
    """

    def __init__(
        self,
        peak: float,
        total_steps: int,
        warmup_steps: int,
        end: float = 0.0,
        power: float = 1.0,
    ):
        if total_steps <= 0:
            raise ValueError(f"total_steps must be positive, got {total_steps}")
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(f"warmup_steps={warmup_steps} must lie in [0, {total_steps}]")
        self.peak, self.total_steps, self.warmup_steps = peak, total_steps, warmup_steps
        self.end, self.power = end, power

    def __call__(self, step):
        step = ops.cast(step, "float32")
        progress = ops.minimum(step, self.total_steps) / self.total_steps
        decayed = (self.peak - self.end) * (1.0 - progress) ** self.power + self.end
        if not self.warmup_steps:
            return decayed
        warm = self.peak * step / self.warmup_steps
        return ops.where(step < self.warmup_steps, warm, decayed)

    def get_config(self):
        return dict(
            peak=self.peak,
            total_steps=self.total_steps,
            warmup_steps=self.warmup_steps,
            end=self.end,
            power=self.power,
        )


def build_optimizer(
    learning_rate: float,
    total_steps: int,
    warmup_steps: int,
    *,
    weight_decay_rate: float,
    optimizer: str,
    precision: str,
    bias_correction: bool = False,
    learning_rate_multipliers: Mapping[str, float] | None = None,
) -> keras.optimizers.Optimizer:
    """LAMB (``optimizer="lamb"``) or AdamW with linear warm-up and polynomial decay;
    float16 wraps it in dynamic loss scaling. Every training loop builds its optimizer
    here. Call it under the strategy's scope."""
    schedule = WarmupPolynomialDecay(
        learning_rate, total_steps=total_steps, warmup_steps=warmup_steps
    )
    built = AlbertOptimizer(
        learning_rate=schedule,
        weight_decay_rate=weight_decay_rate,
        layer_adaptation=optimizer == "lamb",
        bias_correction=bias_correction,
        learning_rate_multipliers=learning_rate_multipliers,
    )
    if precision == "float16":
        return keras.optimizers.LossScaleOptimizer(built)
    return built
