"""How a model's layers compute: one named implementation per model, chosen once.

The weights and the function are the same under every implementation; what
differs is the arithmetic's form, which suits one runtime and not another:

* ``"stock"``: stock TensorFlow ops. Training folds 1/√head_dim into the query's
  weights and masks scores with ``where``; at ``training=False`` the query is
  scaled and the mask added as 0 / -1e9, which oneDNN runs inside the score
  matmul. What a model built and called by hand runs.
* ``"fused_cpu"``: GELU, LayerNorm, attention's masked float32 softmax and its head
  split/merge through the fused CPU kernels (`albert_tf.kernels`), one op each way
  where stock ops take tens. What the trainers pick on CPU.
* ``"xla"``: stock ops in the training form at every call (folded scale, ``where``
  mask): XLA fuses the elementwise work itself, and the oneDNN form gains nothing
  there; the tanh GELU's backward recomputes its parts from the input, which
  XLA fuses, instead of keeping three FFN-sized tensors. What the trainers pick
  with ``jit_compile``.
* ``"serving"``: stock ops in the inference form at every call (scale on the query,
  additive mask), the form a serving graph's oneDNN rewrites fuse, and the only one
  lower-precision projections (`albert_tf.serving.precision`) are made for. What the
  exports use: TF Serving and LiteRT have no albert_tf kernels.

`set_implementation` gives a model (every layer in it, shared ones once) one of
them; `implementation` does so for a block, as exports do with a trained model.

Example:
    >>> import keras
    >>> from albert_tf.layers.layer_norm import AlbertLayerNormalization
    >>> model = keras.Sequential([AlbertLayerNormalization()])
    >>> set_implementation(model, "fused_cpu")
    >>> with implementation(model, "serving"):
    ...     model_implementation(model)
    'serving'
    >>> model_implementation(model)
    'fused_cpu'
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import keras

from albert_tf.layers.walk import distinct_layers


@dataclasses.dataclass(frozen=True)
class Implementation:
    """One way of computing the model's layers (see the module docstring).

    Attributes:
        name: its name, as `set_implementation` and the start-up line give it.
        fused_kernels: GELU, LayerNorm and attention's softmax and head copies run
            as `albert_tf.kernels` ops (where the dtype allows).
        scale_on_query: in attention, whether the query is scaled and the mask
            added (the inference form) rather than the scale folded into the
            weights and the mask applied with ``where``: True, False, or None
            for "at ``training=False`` only".
        recompute_elementwise: the backward keeps an activation's input only and
            recomputes its elementwise parts (the tanh GELU), which XLA fuses into
            the gradient: less saved memory for no extra pass.
        blocked_attention: self-attention over sequences of at least
            `albert_tf.layers.attention.BLOCKED_FROM` goes by key blocks
            (`albert_tf.layers.blocked_attention`), keeping no [B, heads, S, S]
            tensor for the backward pass (not with attention dropout in training).
    """

    name: str
    fused_kernels: bool
    scale_on_query: bool | None
    recompute_elementwise: bool = False
    blocked_attention: bool = False

    def scales_query(self, training) -> bool:
        """Whether attention uses the inference form in a call with ``training``."""
        if self.scale_on_query is None:
            return training is False
        return self.scale_on_query


STOCK = Implementation("stock", fused_kernels=False, scale_on_query=None)
FUSED_CPU = Implementation("fused_cpu", fused_kernels=True, scale_on_query=False)
XLA = Implementation(
    "xla",
    fused_kernels=False,
    scale_on_query=False,
    recompute_elementwise=True,
    blocked_attention=True,
)
SERVING = Implementation("serving", fused_kernels=False, scale_on_query=True)

IMPLEMENTATIONS: dict[str, Implementation] = {i.name: i for i in (STOCK, FUSED_CPU, XLA, SERVING)}


def get_implementation(name: str) -> Implementation:
    """The implementation called ``name``."""
    try:
        return IMPLEMENTATIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown implementation {name!r}; expected one of {sorted(IMPLEMENTATIONS)}"
        ) from None


def choose_implementation(*, accelerator: bool, jit_compile: bool, fused_kernels: bool) -> str:
    """What a training loop runs: ``xla`` under XLA (it cannot compile custom ops),
    ``fused_cpu`` on CPU when the kernels are wanted and load here, else ``stock``.

    >>> choose_implementation(accelerator=True, jit_compile=False, fused_kernels=True)
    'stock'
    >>> choose_implementation(accelerator=False, jit_compile=True, fused_kernels=True)
    'xla'
    """
    if jit_compile:
        return XLA.name
    if fused_kernels and not accelerator:
        from albert_tf import kernels  # builds them on first use

        if kernels.available():  # else it has warned once, saying why
            return FUSED_CPU.name
    return STOCK.name


def _layers(model: keras.layers.Layer) -> list[keras.layers.Layer]:
    return [layer for layer in distinct_layers(model) if hasattr(layer, "implementation")]


def set_implementation(model: keras.layers.Layer, name: str) -> None:
    """Makes every layer of ``model`` that has implementations compute with ``name``.

    Call it before the model's functions are traced: a trace keeps the
    implementation it was made with.
    """
    chosen = get_implementation(name)
    layers = list(_layers(model))
    if not layers:
        raise ValueError(f"{model.name!r} has no layers with implementations to set")
    for layer in layers:
        layer.implementation = chosen


def model_implementation(model: keras.layers.Layer) -> str | None:
    """The name of ``model``'s implementation; None if its layers differ or it has none."""
    names = {layer.implementation.name for layer in _layers(model)}
    return names.pop() if len(names) == 1 else None


@contextlib.contextmanager
def implementation(model: keras.layers.Layer, name: str) -> Iterator[None]:
    """``model`` computes with ``name`` within this block, and as before after it."""
    before = [(layer, layer.implementation) for layer in _layers(model)]
    set_implementation(model, name)
    try:
        yield
    finally:
        for layer, previous in before:
            layer.implementation = previous
