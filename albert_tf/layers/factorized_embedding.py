"""The factorized embedding: V×E lookup, then an E→H projection."""

from __future__ import annotations

import keras
import keras_hub

from albert_tf.layers.layer_norm import AlbertLayerNormalization


@keras.saving.register_keras_serializable(package="albert_tf")
class FactorizedEmbedding(keras.layers.Layer):
    """Token, position and segment embeddings at width E, projected to width H.

    ALBERT's first parameter reduction (paper §3.1): the vocabulary is embedded
    at a small width E and a single dense layer maps E→H, so the embedding
    costs V·E + E·H parameters instead of V·H. As in the official code the
    three embeddings are summed, layer-normalised and dropped out *at width E*,
    and the projection exists only when E ≠ H.

    The token embedding is a `keras_hub.layers.ReversibleEmbedding`, so the
    masked-LM head can decode with the same V×E matrix (weight tying).

    ``layout="brightmart"`` is brightmart/albert_zh's variant (its checkpoints
    convert to it): the token embedding is projected to H first, by a matmul
    with no bias, and position and segment embeddings (width H) are added and
    normalised at width H:
    ``LN(tokens·W + positions + segments)`` instead of ``LN(tokens + positions
    + segments)·W + b``. The projection then exists whatever E and H are.

    Args:
        vocab_size: V.
        embedding_size: E.
        hidden_size: H.
        max_position_embeddings: longest sequence the position table covers.
        type_vocab_size: number of segment ids.
        layer_norm_eps: epsilon of the embedding LayerNorm.
        dropout: dropout rate applied after the LayerNorm.
        initializer_range: stddev of the truncated-normal initialiser.
        layout: ``"albert"`` (Google's) or ``"brightmart"`` (see above).

    Call arguments:
        token_ids: int tensor [batch, seq].
        segment_ids: int tensor [batch, seq].

    Returns:
        float tensor [batch, seq, H].

    Example:
        >>> import numpy as np
        >>> layer = FactorizedEmbedding(vocab_size=100, embedding_size=8,
        ...     hidden_size=32, max_position_embeddings=16, type_vocab_size=2,
        ...     layer_norm_eps=1e-12, dropout=0.0, initializer_range=0.02)
        >>> ids = np.zeros((2, 5), "int32")
        >>> tuple(layer(ids, ids).shape)
        (2, 5, 32)
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_size: int,
        hidden_size: int,
        max_position_embeddings: int,
        type_vocab_size: int,
        layer_norm_eps: float,
        dropout: float,
        initializer_range: float,
        layout: str = "albert",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if layout not in ("albert", "brightmart"):
            raise ValueError(f"layout must be 'albert' or 'brightmart', got {layout!r}")
        self.layout = layout
        brightmart = layout == "brightmart"
        # Position and segment embeddings are added at width H in brightmart's layout.
        added_width = self._added_width = hidden_size if brightmart else embedding_size
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.layer_norm_eps = layer_norm_eps
        self.dropout = dropout
        self.initializer_range = initializer_range

        def init():
            return keras.initializers.TruncatedNormal(stddev=initializer_range)

        self.token_embedding = keras_hub.layers.ReversibleEmbedding(
            vocab_size,
            embedding_size,
            tie_weights=True,
            embeddings_initializer=init(),
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.position_embedding = keras_hub.layers.PositionEmbedding(
            sequence_length=max_position_embeddings,
            initializer=init(),
            dtype=self.dtype_policy,
            name="position_embedding",
        )
        self.segment_embedding = keras.layers.Embedding(
            type_vocab_size,
            added_width,
            embeddings_initializer=init(),
            dtype=self.dtype_policy,
            name="segment_embedding",
        )
        self.layer_norm = AlbertLayerNormalization(
            epsilon=layer_norm_eps, dtype=self.dtype_policy, name="layer_norm"
        )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.projection = None
        if brightmart or embedding_size != hidden_size:
            self.projection = keras.layers.Dense(
                hidden_size,
                use_bias=not brightmart,
                kernel_initializer=init(),
                dtype=self.dtype_policy,
                name="projection",
            )

    def build(self, token_ids_shape, segment_ids_shape=None):
        batch_seq = tuple(token_ids_shape)
        width_e = (*batch_seq, self.embedding_size)
        added = (*batch_seq, self._added_width)
        self.token_embedding.build(batch_seq)
        self.position_embedding.build(added)
        self.segment_embedding.build(batch_seq)
        self.layer_norm.build(added)
        if self.projection is not None:
            self.projection.build(width_e)
        self.built = True

    def call(self, token_ids, segment_ids, training=None):
        if self.layout == "brightmart":
            tokens = self.projection(self.token_embedding(token_ids))  # [B, S, H]
            x = tokens + self.position_embedding(tokens) + self.segment_embedding(segment_ids)
            return self.dropout_layer(self.layer_norm(x), training=training)
        tokens = self.token_embedding(token_ids)  # [B, S, E]
        positions = self.position_embedding(tokens)  # [B, S, E]
        segments = self.segment_embedding(segment_ids)  # [B, S, E]
        x = self.layer_norm(tokens + positions + segments)
        x = self.dropout_layer(x, training=training)
        if self.projection is not None:
            x = self.projection(x)  # [B, S, E] -> [B, S, H]
        return x

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return (*tuple(token_ids_shape), self.hidden_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            embedding_size=self.embedding_size,
            hidden_size=self.hidden_size,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            layer_norm_eps=self.layer_norm_eps,
            dropout=self.dropout,
            initializer_range=self.initializer_range,
            layout=self.layout,
        )
        return config
