"""Masked-language-model head, decoding through the tied V×E embedding."""

from __future__ import annotations

import weakref

import keras
from keras import ops

from albert_tf.activations import get_activation
from albert_tf.layers.layer_norm import AlbertLayerNormalization


class MaskedLMHead(keras.layers.Layer):
    """Dense H→E, activation, LayerNorm, then logits against the embedding.

    The decoder is the transpose of the backbone's V×E token embedding (weight
    tying, as in the official ``cls/predictions``), plus a per-token output
    bias. Activation and LayerNorm epsilon come from the config — the
    official code uses ``hidden_act`` here too, not a fixed GELU.

    Args:
        token_embedding: the backbone's `keras_hub.layers.ReversibleEmbedding`.
        activation: Hugging Face activation name (``config.hidden_act``).
        layer_norm_eps: LayerNorm epsilon (``config.layer_norm_eps``).
        initializer_range: stddev of the dense kernel's truncated normal.

    Call arguments:
        sequence_output: float [batch, seq, H].
        mask_positions: optional int [batch, P]; when given, only those
            positions are decoded (what pretraining needs: V-wide logits for
            every position would cost a V×H matmul per token).

    Returns:
        float32 logits [batch, seq or P, V].
    """

    def __init__(
        self,
        token_embedding: keras.layers.Layer,
        activation: str,
        layer_norm_eps: float,
        initializer_range: float,
        **kwargs,
    ):
        super().__init__(**kwargs)
        # Not tracked: the backbone owns the embedding; tracking it here would
        # count (and save) the V×E matrix twice.
        self._token_embedding = weakref.ref(token_embedding)
        self.activation_name = activation
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        embedding_size = token_embedding.output_dim
        self.dense = keras.layers.Dense(
            embedding_size,
            activation=get_activation(activation),
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )
        self.layer_norm = AlbertLayerNormalization(
            epsilon=layer_norm_eps, dtype=self.dtype_policy, name="layer_norm"
        )

    @property
    def token_embedding(self):
        return self._token_embedding()

    def build(self, sequence_output_shape, mask_positions_shape=None):
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
            # [B, S, H] gathered at [B, P] -> [B, P, H]
            x = ops.take_along_axis(
                x, ops.expand_dims(ops.cast(mask_positions, "int32"), -1), axis=1
            )
        x = self.layer_norm(self.dense(x))  # [B, P, E]
        logits = self.token_embedding(x, reverse=True)  # [B, P, V]
        logits = ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")
        return logits

    def get_config(self):
        config = super().get_config()
        config.update(
            activation=self.activation_name,
            layer_norm_eps=self.layer_norm_eps,
            initializer_range=self.initializer_range,
        )
        return config
