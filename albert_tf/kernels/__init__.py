"""Fused CPU kernels for training: tanh-GELU, LayerNorm and attention glue.

On CPU a training step's elementwise work costs memory passes, one per
TensorFlow op; the fused kernels (``fused_ops.cc``) replace GELU's ~18 ops
and LayerNorm's ~25 (forward + backward) with one or two, and attention's
mask + float32 softmax + casts and its head transposes with one kernel each
way, computing in float32 and rounding once. ``bench/README.md`` has what
they buy.

They run where a model's implementation is ``fused_cpu``
(`albert_tf.layers.implementations`), which the trainers choose on CPU; a
model you build and call yourself runs stock ops, and the exports use the
``serving`` implementation, so what they save loads in TF Serving and anywhere
else without this package. A model a trainer has trained keeps ``fused_cpu``:
``set_implementation(model, "serving")`` before saving it with
``tf.saved_model.save`` yourself. Under ``fused_cpu`` stock ops still run for dtypes
other than float32/bfloat16, when a GPU or TPU is present, or when the
kernels cannot be built here (no C++ compiler: a warning says so once).

Example:
    >>> import numpy as np
    >>> from albert_tf import kernels
    >>> x = np.linspace(-3, 3, 7).astype("float32")
    >>> y = kernels.gelu_tanh(x) if kernels.available() else None
    >>> y is None or bool(np.allclose(y, 0.5 * x * (1 + np.tanh(
    ...     np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), atol=1e-6))
    True
"""

from __future__ import annotations

import logging
import threading
from types import ModuleType

import tensorflow as tf

from albert_tf.kernels.build import KernelBuildError, build

__all__ = [
    "KernelBuildError",
    "available",
    "gelu_tanh",
    "layer_norm",
    "load",
    "masked_softmax",
    "merge_heads",
    "split_heads",
    "supports",
]

_LOG = logging.getLogger(__name__)
_DTYPES = (tf.float32, tf.bfloat16)

_lock = threading.Lock()
_library: ModuleType | None = None
_error: str | None = None


def load() -> ModuleType:
    """Builds (first time on this machine) and loads the kernels.

    Raises:
        KernelBuildError: they cannot be built or loaded here.
    """
    global _library, _error
    with _lock:
        if _library is not None:
            return _library
        if _error is not None:
            raise KernelBuildError(_error)
        try:
            _library = tf.load_op_library(build())
        except (KernelBuildError, tf.errors.NotFoundError, OSError) as e:
            # Only the first failure gets here: later calls re-raise above.
            _error = str(e)
            _LOG.warning("albert_tf fused kernels unavailable, using stock TensorFlow ops: %s", e)
            raise KernelBuildError(_error) from e
        return _library


def available() -> bool:
    """Whether the kernels are (or can be) loaded; `load` warns once when not."""
    try:
        load()
        return True
    except KernelBuildError:
        return False


def supports(x: tf.Tensor) -> bool:
    """Whether a layer traced now can run ``x`` through the fused kernels: a
    float32 or bfloat16 tensor, kernels that load, and no GPU or TPU (they are
    CPU kernels; a model there runs stock ops whatever its implementation)."""
    if x.dtype not in _DTYPES:
        return False
    if tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"):
        return False
    return available()


def gelu_tanh(x) -> tf.Tensor:
    """0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) by the fused kernel, with its gradient."""
    ops = load()

    @tf.custom_gradient
    def forward(x):
        def grad(dy):
            return ops.albert_gelu_tanh_grad(dy, x)

        return ops.albert_gelu_tanh(x), grad

    return forward(tf.convert_to_tensor(x))


def layer_norm(x, gamma, beta, epsilon: float) -> tf.Tensor:
    """LayerNorm over the last axis by the fused kernel, with its gradients.

    ``x`` is float32 or bfloat16 (the result has its dtype); ``gamma`` and
    ``beta`` are cast to float32, as Keras keeps them under mixed precision.
    """
    ops = load()
    x = tf.convert_to_tensor(x)
    gamma = tf.cast(gamma, tf.float32)
    beta = tf.cast(beta, tf.float32)

    @tf.custom_gradient
    def forward(x, gamma, beta):
        shape = tf.shape(x)
        x2d = tf.reshape(x, [-1, shape[-1]])
        y, mean, rstd = ops.albert_layer_norm(x2d, gamma, beta, epsilon=float(epsilon))

        def grad(dy):
            dx, dgamma, dbeta = ops.albert_layer_norm_grad(
                tf.reshape(dy, tf.shape(x2d)), x2d, gamma, mean, rstd
            )
            return tf.reshape(dx, shape), dgamma, dbeta

        return tf.reshape(y, shape), grad

    return forward(x, gamma, beta)


def masked_softmax(scores, mask) -> tf.Tensor:
    """Softmax over the last axis of [B, N, S, K] scores where ``mask``
    ([B, S, K] or [B, 1, K], true = allowed) allows; disallowed scores count
    as -1e9."""
    ops = load()
    mask = tf.cast(mask, tf.bool)

    @tf.custom_gradient
    def forward(scores):
        probs = ops.albert_masked_softmax(scores, mask)

        def grad(dprobs):
            return ops.albert_masked_softmax_grad(dprobs, probs, mask)

        return probs, grad

    return forward(tf.convert_to_tensor(scores))


def split_heads(x, num: int, heads: int) -> list[tf.Tensor]:
    """[B, S, num·heads·D] → ``num`` tensors [B, heads, S, D] in one copy."""
    ops = load()

    @tf.custom_gradient
    def forward(x):
        outs = ops.albert_split_heads(x, num=num, heads=heads)

        def grad(*douts):
            douts = [tf.zeros_like(o) if d is None else d for d, o in zip(douts, outs, strict=True)]
            return ops.albert_merge_heads(douts)

        return list(outs), grad

    return forward(tf.convert_to_tensor(x))


def merge_heads(tensors) -> tf.Tensor:
    """``num`` tensors [B, N, S, D] → [B, S, num·N·D]; inverse of `split_heads`."""
    ops = load()
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    heads = tensors[0].shape[1]

    @tf.custom_gradient
    def forward(*tensors):
        def grad(dy):
            return ops.albert_split_heads(dy, num=len(tensors), heads=heads)

        return ops.albert_merge_heads(list(tensors)), grad

    return forward(*tensors)
