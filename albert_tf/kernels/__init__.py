"""Fused CPU kernels for training: tanh-GELU, LayerNorm and attention glue.

On CPU a training step's elementwise work costs memory passes, one per
TensorFlow op; the fused kernels (``fused_ops.cc``) replace GELU's ~18 ops
and LayerNorm's ~25 (forward + backward) with one or two, and attention's
mask + float32 softmax + casts and its head transposes with one kernel each
way, computing in float32 and rounding once. ``bench/README.md`` has what
they buy.

They are used only inside `fused()`, which the trainers enter; a model you
build and call yourself runs stock TensorFlow ops, so what you save with
``tf.saved_model.save`` loads in TF Serving and anywhere else without this
package. Inside `fused()` they are still skipped (stock ops run instead) when
a GPU or TPU is present, for dtypes other than float32/bfloat16, or when the
kernels cannot be built here (no C++ compiler: a warning says so once).

Example:
    >>> import numpy as np
    >>> from albert_tf import kernels
    >>> x = np.linspace(-3, 3, 7).astype("float32")
    >>> with kernels.fused():
    ...     y = kernels.gelu_tanh(x) if kernels.active() else None
    >>> y is None or bool(np.allclose(y, 0.5 * x * (1 + np.tanh(
    ...     np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), atol=1e-6))
    True
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from types import ModuleType

import tensorflow as tf

from albert_tf.kernels.build import KernelBuildError, build

__all__ = [
    "KernelBuildError",
    "active",
    "available",
    "fused",
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
# Process-wide, not thread-local: MirroredStrategy traces each replica's step
# in a thread of its own. The innermost `fused()` block decides.
_fused_stack: list[bool] = []


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


@contextlib.contextmanager
def fused(enabled: bool = True) -> Iterator[None]:
    """Within this block, layers traced on CPU use the fused kernels (or,
    with ``enabled=False``, do not, whatever an outer block said)."""
    _fused_stack.append(bool(enabled))
    try:
        yield
    finally:
        _fused_stack.pop()


def active() -> bool:
    """Whether a layer traced now should use the fused kernels."""
    if not _fused_stack or not _fused_stack[-1]:
        return False
    if tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"):
        return False
    return available()


def supports(x: tf.Tensor) -> bool:
    """Whether a layer traced now should run ``x`` through the fused kernels."""
    return active() and x.dtype in _DTYPES


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
