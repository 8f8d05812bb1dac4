"""Activation functions by their Hugging Face names.

The official ALBERT code's ``"gelu"`` is the tanh approximation, which
Hugging Face calls ``"gelu_new"``; ``"gelu"`` here is the exact erf form.
`AlbertConfig` translates the official dialect, so this table only needs the
unambiguous names.
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import tensorflow as tf

_SQRT_2_OVER_PI = 0.7978845608028654
_CUBIC = 0.044715
# tanh(√(2/π)·(10 + 0.044715·10³)) = tanh(43.6) is 1 to far below float64's epsilon.
_TANH_SATURATED = 10.0


def recomputation_barrier(*tensors):
    """``tensors``, unchanged, behind a point XLA may not optimise across.

    A custom gradient that recomputes part of its forward pass from the kept inputs
    (to keep less for the backward) writes the same operations again, and XLA's
    common-subexpression pass merges them with the forward's: the forward's
    intermediates are then kept after all. Passing the kept inputs through an
    optimisation barrier together with the incoming gradient makes the recomputation
    a different expression, and one that can only run once that gradient exists (as
    ``jax.checkpoint`` does). Outside XLA the op passes its inputs through.

    >>> x, dy = recomputation_barrier(tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0]))
    >>> x.numpy().tolist(), dy.numpy().tolist()
    ([1.0, 2.0], [3.0, 4.0])
    """
    # TensorFlow's own XLA op (XlaOptimizationBarrier); its Python wrapper is not public.
    from tensorflow.compiler.tf2xla.python import xla

    return tuple(xla.optimization_barrier(*tensors))


@tf.custom_gradient
def _gelu_tanh(x):
    # Written out with its derivative so that the backward pass reuses the
    # forward's tanh and x²: about half the elementwise passes of autodiff
    # through tf.nn.gelu, which matter on CPU where each is a trip to memory.
    # Past |x| = 10 the tanh is ±1 in every float format, so clipping x inside it
    # changes no result, and keeps x² finite in float16 (it overflows at |x| ≥ 256,
    # where (1 − t²)·slope would be 0·inf = NaN in the gradient).
    xc = tf.clip_by_value(x, -_TANH_SATURATED, _TANH_SATURATED)
    x2 = tf.square(xc)
    t = tf.tanh(xc * (_SQRT_2_OVER_PI + (_SQRT_2_OVER_PI * _CUBIC) * x2))
    half_x = 0.5 * x

    def grad(dy):
        # d/dx 0.5·x·(1 + t) = 0.5·(1 + t) + 0.5·x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²)
        slope = _SQRT_2_OVER_PI + (3.0 * _SQRT_2_OVER_PI * _CUBIC) * x2
        return dy * (0.5 + 0.5 * t + half_x * (1.0 - tf.square(t)) * slope)

    return half_x + half_x * t, grad


@tf.custom_gradient
def _gelu_tanh_recomputed(x):
    # The same function and derivative, but the backward keeps only x and
    # recomputes x² and the tanh from it: one FFN-sized tensor saved a layer
    # instead of three. Under XLA the recomputation fuses into the gradient's
    # elementwise chain, so it costs no extra trip to memory; the barrier keeps
    # XLA from merging it back into the forward's (which kept all three).
    def tanh_parts(x):
        xc = tf.clip_by_value(x, -_TANH_SATURATED, _TANH_SATURATED)
        x2 = tf.square(xc)
        return x2, tf.tanh(xc * (_SQRT_2_OVER_PI + (_SQRT_2_OVER_PI * _CUBIC) * x2))

    _, t = tanh_parts(x)
    half_x = 0.5 * x

    def grad(dy):
        x_again, dy = recomputation_barrier(x, dy)
        x2, t = tanh_parts(x_again)
        slope = _SQRT_2_OVER_PI + (3.0 * _SQRT_2_OVER_PI * _CUBIC) * x2
        return dy * (0.5 + 0.5 * t + (0.5 * x_again) * (1.0 - tf.square(t)) * slope)

    return half_x + half_x * t, grad


def gelu_new_recomputed(x):
    """`gelu_new` whose backward keeps only its input and recomputes the rest;
    what the ``xla`` implementation runs (`albert_tf.layers.implementations`).

    >>> import numpy as np
    >>> x = tf.constant(np.linspace(-4, 4, 9), tf.float32)
    >>> with tf.GradientTape(persistent=True) as tape:
    ...     tape.watch(x)
    ...     a, b = gelu_new(x), gelu_new_recomputed(x)
    >>> bool(np.array_equal(a, b)), bool(np.allclose(tape.gradient(a, x), tape.gradient(b, x)))
    (True, True)
    """
    return _gelu_tanh_recomputed(tf.convert_to_tensor(x))


@keras.saving.register_keras_serializable(package="albert_tf")
def gelu_new(x):
    """GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).

    >>> import numpy as np
    >>> x = np.linspace(-4, 4, 9).astype("float32")
    >>> ref = keras.activations.gelu(x, approximate=True)
    >>> bool(np.allclose(gelu_new(x), ref, atol=1e-6))
    True

    Stock ops, with a hand-written gradient; in an `AlbertDense` under the
    ``fused_cpu`` implementation one fused kernel computes it and another its
    gradient instead.
    """
    return _gelu_tanh(tf.convert_to_tensor(x))


@keras.saving.register_keras_serializable(package="albert_tf")
def gelu_exact(x):
    """GELU, exact: x·Φ(x) with the normal CDF through erf."""
    return keras.activations.gelu(x, approximate=False)


_ACTIVATIONS: dict[str, Callable] = {
    "gelu_new": gelu_new,
    "gelu": gelu_exact,
    "relu": keras.activations.relu,
    "tanh": keras.activations.tanh,
    "silu": keras.activations.silu,
    "linear": keras.activations.linear,
}


def get_activation(name: str) -> Callable:
    """Returns the Keras activation for a Hugging Face activation name."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"Unknown activation {name!r}; expected one of {sorted(_ACTIVATIONS)}."
        ) from None
