"""Cross-layer parameter sharing: L applied layers drawn from a few objects."""

from __future__ import annotations

import dataclasses
from typing import Any

import keras
import tensorflow as tf

from albert_tf.config import RECOMPUTE_MODES, SHARE_MODES, SHARED_BLOCKS, group_of_layer
from albert_tf.layers.transformer_layer import AlbertTransformerLayer
from albert_tf.layers.walk import distinct_layers

# A block's identity: ("group", g, k) is shared by every layer of group g;
# ("layer", i, k) belongs to layer i alone. k is the inner-group index.
BlockKey = tuple[str, int, int]


@dataclasses.dataclass(frozen=True)
class LayerSlot:
    """One applied transformer layer and the blocks it uses."""

    layer_index: int
    inner_index: int
    attention: BlockKey
    feedforward: BlockKey


def sharing_plan(
    num_layers: int, num_groups: int, inner_group_num: int, share: str
) -> list[LayerSlot]:
    """Which attention and FFN weights each applied layer uses.

    Layer i belongs to group floor(i·G/L) and applies that group's
    ``inner_group_num`` inner layers in turn (official ALBERT). ``share``
    picks which blocks are keyed by group (shared) and which by layer
    (`albert_tf.config.SHARED_BLOCKS`):

    ========== ============ ============
    share      attention    feed-forward
    ========== ============ ============
    all        group        group
    attention  group        layer
    ffn        layer        group
    none       layer        layer
    ========== ============ ============

    Example:
        >>> [s.attention for s in sharing_plan(3, 1, 1, "attention")]
        [('group', 0, 0), ('group', 0, 0), ('group', 0, 0)]
        >>> [s.feedforward for s in sharing_plan(3, 1, 1, "attention")]
        [('layer', 0, 0), ('layer', 1, 0), ('layer', 2, 0)]
    """
    if share not in SHARED_BLOCKS:
        raise ValueError(f"Unknown share mode {share!r}; expected one of {list(SHARE_MODES)}.")
    attention_shared, feedforward_shared = SHARED_BLOCKS[share]
    slots = []
    for i in range(num_layers):
        g = group_of_layer(i, num_layers, num_groups)
        for k in range(inner_group_num):
            by_group, by_layer = ("group", g, k), ("layer", i, k)
            slots.append(
                LayerSlot(
                    layer_index=i,
                    inner_index=k,
                    attention=by_group if attention_shared else by_layer,
                    feedforward=by_group if feedforward_shared else by_layer,
                )
            )
    return slots


def _layer_name(slot: LayerSlot) -> str:
    # A layer object is named after the finer of its two keys.
    key = slot.attention if slot.attention[0] == "layer" else slot.feedforward
    kind, index, inner = key
    return f"{kind}_{index}_inner_{inner}"


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEncoder(keras.layers.Layer):
    """The ALBERT transformer stack with cross-layer parameter sharing.

    One `AlbertTransformerLayer` (a `keras_hub.layers.TransformerEncoder`) is
    created per distinct (attention block, FFN block) pair of the
    `sharing_plan`; when two pairs share one block, the later layer borrows it
    from the first. With the default ``share="all"`` and one group, this is a
    single TransformerEncoder object called ``num_layers`` times.

    Args:
        num_layers: L, the number of applied layers (per inner group).
        num_groups: G, groups of layers with their own weights.
        inner_group_num: inner layers applied per layer step.
        share: one of `albert_tf.config.SHARE_MODES`.
        num_heads, intermediate_size, activation, dropout, attention_dropout,
        layer_norm_eps, initializer_range: per-layer hyper-parameters.

    Call arguments:
        x: float tensor [batch, seq, H].
        padding_mask: int/bool tensor [batch, seq], 1 for real tokens.
        output_hidden_states: also return every layer's output.

    Returns:
        The last layer's output [batch, seq, H]; with ``output_hidden_states``
        a list: the input followed by the output of every applied layer
        (L·inner_group_num + 1 tensors), as the paper's Figure 2 analysis needs.
    """

    def __init__(
        self,
        num_layers: int,
        num_groups: int,
        inner_group_num: int,
        share: str,
        num_heads: int,
        intermediate_size: int,
        activation: Any,
        dropout: float,
        attention_dropout: float,
        layer_norm_eps: float,
        initializer_range: float,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_layers = num_layers
        self.num_groups = num_groups
        self.inner_group_num = inner_group_num
        self.share = share
        self.plan = sharing_plan(num_layers, num_groups, inner_group_num, share)

        self.transformer_layers: list[AlbertTransformerLayer] = []
        self._slot_to_layer: list[int] = []
        by_pair: dict[tuple[BlockKey, BlockKey], int] = {}
        owner: dict[BlockKey, AlbertTransformerLayer] = {}
        for slot in self.plan:
            pair = (slot.attention, slot.feedforward)
            if pair not in by_pair:
                layer = AlbertTransformerLayer(
                    intermediate_dim=intermediate_size,
                    num_heads=num_heads,
                    dropout=dropout,
                    attention_dropout=attention_dropout,
                    activation=activation,
                    layer_norm_epsilon=layer_norm_eps,
                    kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
                    attention_from=owner.get(slot.attention),
                    feedforward_from=owner.get(slot.feedforward),
                    dtype=self.dtype_policy,
                    name=_layer_name(slot),
                )
                owner.setdefault(slot.attention, layer)
                owner.setdefault(slot.feedforward, layer)
                by_pair[pair] = len(self.transformer_layers)
                self.transformer_layers.append(layer)
            self._slot_to_layer.append(by_pair[pair])

    def build(self, x_shape, padding_mask_shape=None):
        # Owners come first in `transformer_layers`, so borrowers find them built.
        for layer in self.transformer_layers:
            layer.build(x_shape)
        self.built = True

    #: What a training call recomputes in the backward pass instead of keeping
    #: (`RECOMPUTE_MODES`); set for a model by `set_recompute`.
    recompute: str = "none"

    def call(self, x, padding_mask=None, output_hidden_states=False, training=None):
        hidden_states = [x]
        recompute = self.recompute == "layer" and bool(training)
        for index in self._slot_to_layer:
            layer = self.transformer_layers[index]
            if recompute:
                x = _recomputed(layer, padding_mask)(x)
            else:
                x = layer(x, padding_mask=padding_mask, training=training)
            hidden_states.append(x)
        return hidden_states if output_hidden_states else x

    def compute_output_shape(self, x_shape, padding_mask_shape=None):
        return x_shape

    def compute_output_spec(self, x, padding_mask=None, output_hidden_states=False, training=None):
        def spec():
            return keras.KerasTensor(x.shape, dtype=self.compute_dtype)

        if output_hidden_states:
            # Distinct objects: a functional model maps each to its own output.
            return [spec() for _ in range(len(self.plan) + 1)]
        return spec()

    def get_config(self):
        config = super().get_config()
        first = self.transformer_layers[0]
        config.update(
            num_layers=self.num_layers,
            num_groups=self.num_groups,
            inner_group_num=self.inner_group_num,
            share=self.share,
            num_heads=first.num_heads,
            intermediate_size=first.intermediate_dim,
            activation=keras.activations.serialize(first.activation),
            dropout=first.dropout,
            attention_dropout=first.attention_dropout,
            layer_norm_eps=first.layer_norm_epsilon,
            initializer_range=first.kernel_initializer.stddev,
        )
        return config


# ``none``: autodiff keeps what each layer's backward needs; ``layer``: only each
# transformer layer's input is kept and the layer runs again in the backward pass
# (`tf.recompute_grad`): activation memory of one layer instead of L, for about a
# third more compute.


def _recomputed(layer: AlbertTransformerLayer, padding_mask):
    # The shared weights are the same variables in every application, so the
    # recomputed layers' weight gradients add up exactly as without recompute.
    def apply(x):
        return layer(x, padding_mask=padding_mask, training=True)

    return tf.recompute_grad(apply)


def set_recompute(model: keras.layers.Layer, mode: str) -> None:
    """Makes every `AlbertEncoder` in ``model`` recompute ``mode`` (`RECOMPUTE_MODES`)
    in training calls. Call it before the training step is traced.

    Recomputing runs each layer's forward pass twice, so it needs a layer whose
    forward pass is deterministic: no dropout (the second pass would draw other
    masks and the gradient would belong to neither). ALBERT v2 configs have none.
    """
    if mode not in RECOMPUTE_MODES:
        raise ValueError(f"recompute must be one of {RECOMPUTE_MODES}, got {mode!r}")
    encoders = [layer for layer in distinct_layers(model) if isinstance(layer, AlbertEncoder)]
    if not encoders:
        raise ValueError(f"{model.name!r} has no AlbertEncoder to recompute")
    if mode != "none":
        for encoder in encoders:
            first = encoder.transformer_layers[0]
            if first.dropout or first.attention_dropout:
                raise ValueError(
                    f"--recompute={mode} needs a model without dropout (this one has "
                    f"hidden_dropout_prob={first.dropout}, "
                    f"attention_probs_dropout_prob={first.attention_dropout}): a recomputed "
                    "layer would draw other dropout masks than its forward pass. Set both "
                    "to 0 in the model config (as ALBERT v2 does), or use --recompute=none."
                )
    for encoder in encoders:
        encoder.recompute = mode
