"""Masked-language-model head, decoding through the tied V×E embedding."""

from __future__ import annotations

import weakref
from typing import Any

import keras
import tensorflow as tf
from keras import ops

from albert_tf.activations import get_activation
from albert_tf.layers.dense import AlbertDense
from albert_tf.layers.layer_norm import AlbertLayerNormalization


@keras.saving.register_keras_serializable(package="albert_tf")
class MaskedLMHead(keras.layers.Layer):
    """Dense H→E, activation, LayerNorm, then logits against the embedding.

    The decoder is the transpose of the backbone's V×E token embedding (weight
    tying, as in the official ``cls/predictions``), plus a per-token output
    bias. Activation and LayerNorm epsilon come from the config — the
    official code uses ``hidden_act`` here too, not a fixed GELU.

    Tying: given the backbone's embedding *layer*, the head decodes through it
    without owning it (the backbone saves and counts it; the head's
    ``weights`` leave it out). Given a *serialized* embedding (the dict
    ``get_config`` writes), the head builds that embedding and owns it: what a
    head restored alone from its config needs. Task models never take the
    second path: their ``from_config`` rebuilds the backbone and ties the new
    head to it, as keras-hub's task models do.

    Args:
        token_embedding: the backbone's `keras_hub.layers.ReversibleEmbedding`,
            or its serialized config (then owned by this head).
        activation: Hugging Face activation name (``config.hidden_act``).
        layer_norm_eps: LayerNorm epsilon (``config.layer_norm_eps``).
        initializer_range: stddev of the dense kernel's truncated normal.
        tied_projection: brightmart/albert_zh's layout (``embedding_layout``):
            the backbone's E→H embedding projection (no bias). The head's dense
            layer and LayerNorm are then H wide, and its output is mapped back
            to E by that projection's transpose before the tied decoder.

    Call arguments:
        sequence_output: float [batch, seq, H].
        mask_positions: optional int [batch, P]; when given, only those
            positions are decoded (what pretraining needs: V-wide logits for
            every position would cost a V×H matmul per token).

    Returns:
        float32 logits [batch, seq or P, V].

    Example:
        >>> import keras_hub, numpy as np
        >>> embedding = keras_hub.layers.ReversibleEmbedding(50, 8)
        >>> head = MaskedLMHead(embedding, activation="gelu_new",
        ...                     layer_norm_eps=1e-12, initializer_range=0.02)
        >>> logits = head(np.ones((2, 5, 16), "float32"), np.array([[0, 3], [1, 4]]))
        >>> tuple(logits.shape), head.token_embedding is embedding
        ((2, 2, 50), True)
        >>> alone = MaskedLMHead.from_config(head.get_config())  # owns a new one
        >>> alone.token_embedding is embedding, alone.owned_token_embedding is not None
        (False, True)
    """

    def __init__(
        self,
        token_embedding: keras.layers.Layer | dict[str, Any],
        activation: str,
        layer_norm_eps: float,
        initializer_range: float,
        tied_projection: keras.layers.Dense | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if tied_projection is True:  # what get_config writes: the layer is not in it
            raise ValueError(
                "this head decodes through its backbone's embedding projection "
                "(embedding_layout='brightmart'); rebuild it with its task model "
                "(AlbertPretrainingModel.from_config), not alone"
            )
        # Like the embedding, borrowed from the backbone and not tracked here.
        self._tied_projection = weakref.ref(tied_projection) if tied_projection else None
        self.owned_token_embedding: keras.layers.Layer | None = None
        if isinstance(token_embedding, dict):
            # Ours, so it computes in our precision like our other sublayers.
            config = dict(token_embedding)
            config["config"] = {
                **config["config"],
                "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            }
            token_embedding = keras.layers.deserialize(config)
            self.owned_token_embedding = token_embedding  # tracked: ours to save
        # A borrowed embedding is not tracked: the backbone owns it; tracking
        # it here too would count (and save) the V×E matrix twice.
        self._token_embedding = weakref.ref(token_embedding)
        self.activation_name = activation
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        width = tied_projection.units if tied_projection else token_embedding.output_dim
        self.dense = AlbertDense(
            width,
            activation=get_activation(activation),
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )
        self.layer_norm = AlbertLayerNormalization(
            epsilon=layer_norm_eps, dtype=self.dtype_policy, name="layer_norm"
        )

    @property
    def token_embedding(self) -> keras.layers.Layer:
        """The V×E embedding the logits are decoded with (tied, not a copy)."""
        embedding = self._token_embedding()
        if embedding is None:
            raise RuntimeError(
                "The token embedding this head is tied to no longer exists; keep "
                "the layer that owns it (the backbone) alive as long as the head."
            )
        return embedding

    def build(self, sequence_output_shape, mask_positions_shape=None):
        if not self.token_embedding.built:  # an owned one, restored from config
            self.token_embedding.build((None, None))
        self.dense.build(sequence_output_shape)
        self.layer_norm.build((*sequence_output_shape[:-1], self.dense.units))
        self.output_bias = self.add_weight(
            name="output_bias",
            shape=(self.token_embedding.input_dim,),
            initializer="zeros",
        )
        self.built = True

    def call(self, sequence_output, mask_positions=None):
        x = sequence_output
        if mask_positions is not None:
            # [B, S, H] gathered at [B, P] -> [B, P, H]: one gather per row, not
            # take_along_axis's [B, P, H] index tensor broadcast from [B, P].
            x = tf.gather(x, tf.cast(mask_positions, tf.int32), axis=1, batch_dims=1)
        x = self.layer_norm(self.dense(x))  # [B, P, E] (brightmart: [B, P, H])
        if self._tied_projection is not None:
            projection = self._tied_projection()
            if projection is None:
                raise RuntimeError(
                    "The embedding projection this head decodes through no longer "
                    "exists; keep the backbone alive as long as the head."
                )
            x = ops.matmul(x, ops.transpose(ops.cast(projection.kernel, x.dtype)))  # H -> E
        logits = self.token_embedding(x, reverse=True)  # [B, P, V]
        logits = ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")
        return logits

    def get_config(self):
        config = super().get_config()
        config.update(
            token_embedding=keras.layers.serialize(self.token_embedding),
            activation=self.activation_name,
            layer_norm_eps=self.layer_norm_eps,
            initializer_range=self.initializer_range,
            tied_projection=self._tied_projection is not None,
        )
        return config
