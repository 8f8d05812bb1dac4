"""`AlbertBackbone`: factorized embedding → shared transformer stack → pooler."""

from __future__ import annotations

from typing import Any

import keras

from albert_tf.activations import get_activation
from albert_tf.config import AlbertConfig
from albert_tf.layers.encoder import AlbertEncoder
from albert_tf.layers.factorized_embedding import FactorizedEmbedding

# The backbone's inputs, each int32 [batch, seq]; the task models pass these on.
BACKBONE_INPUTS = ("token_ids", "segment_ids", "padding_mask")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertBackbone(keras.Model):
    """The ALBERT encoder network, without task heads.

    A functional Keras model. Inputs (all int32 [batch, seq]):

    * ``token_ids``: piece ids.
    * ``segment_ids``: 0 for the first segment, 1 for the second.
    * ``padding_mask``: 1 for real tokens, 0 for padding.

    Outputs, a dict:

    * ``sequence_output``: [batch, seq, H], the last layer.
    * ``pooled_output``: [batch, H], tanh(dense) of the [CLS] position.
    * ``hidden_states`` (only with ``output_hidden_states=True``): a list of
      the projected embedding and each applied layer's output,
      ``num_hidden_layers · inner_group_num + 1`` tensors of [batch, seq, H].

    Args:
        config: the `AlbertConfig`.
        output_hidden_states: also output every layer's hidden state.
        dtype: a Keras dtype policy, e.g. ``"mixed_bfloat16"``.

    Example:
        >>> import numpy as np
        >>> cfg = AlbertConfig(vocab_size=100, hidden_size=32, embedding_size=8,
        ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
        >>> backbone = AlbertBackbone(cfg)
        >>> ids = np.array([[2, 10, 11, 3, 0]], "int32")
        >>> out = backbone({"token_ids": ids, "segment_ids": 0 * ids,
        ...                 "padding_mask": (ids > 0).astype("int32")})
        >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
        ((1, 5, 32), (1, 32))
    """

    def __init__(
        self,
        config: AlbertConfig,
        output_hidden_states: bool = False,
        dtype: Any = None,
        **kwargs,
    ):
        # === Layers ===
        embeddings = FactorizedEmbedding(
            vocab_size=config.vocab_size,
            embedding_size=config.embedding_size,
            hidden_size=config.hidden_size,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size,
            layer_norm_eps=config.layer_norm_eps,
            dropout=config.hidden_dropout_prob,
            initializer_range=config.initializer_range,
            layout=config.embedding_layout,
            dtype=dtype,
            name="embeddings",
        )
        encoder = AlbertEncoder(
            num_layers=config.num_hidden_layers,
            num_groups=config.num_hidden_groups,
            inner_group_num=config.inner_group_num,
            share=config.share,
            num_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size,
            activation=get_activation(config.hidden_act),
            dropout=config.hidden_dropout_prob,
            attention_dropout=config.attention_probs_dropout_prob,
            layer_norm_eps=config.layer_norm_eps,
            initializer_range=config.initializer_range,
            dtype=dtype,
            name="encoder",
        )
        pooler = keras.layers.Dense(
            config.hidden_size,
            activation="tanh",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=config.initializer_range),
            dtype=dtype,
            name="pooler",
        )

        # === Functional model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name) for name in BACKBONE_INPUTS
        }
        x = embeddings(inputs["token_ids"], inputs["segment_ids"])
        encoded = encoder(
            x, padding_mask=inputs["padding_mask"], output_hidden_states=output_hidden_states
        )
        sequence_output = encoded[-1] if output_hidden_states else encoded
        pooled_output = pooler(sequence_output[:, 0, :])
        outputs = {"sequence_output": sequence_output, "pooled_output": pooled_output}
        if output_hidden_states:
            outputs["hidden_states"] = encoded
        super().__init__(
            inputs=inputs,
            outputs=outputs,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        # A functional model ignores `dtype`; keep it so task heads match.
        self.dtype_policy = keras.dtype_policies.get(dtype or keras.config.dtype_policy())
        self.config = config
        self.output_hidden_states = output_hidden_states
        self.embeddings = embeddings
        self.encoder = encoder
        self.pooler = pooler

    @property
    def token_embedding(self):
        """The V×E `ReversibleEmbedding` the MLM head decodes with."""
        return self.embeddings.token_embedding

    def get_config(self) -> dict[str, Any]:
        # Not the functional model's nested layer graph: the constructor's
        # arguments, so that from_config returns an AlbertBackbone.
        return {
            "name": self.name,
            "trainable": self.trainable,
            "config": self.config.to_hf_dict(),
            "output_hidden_states": self.output_hidden_states,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> AlbertBackbone:
        config = dict(config)
        albert = dict(config.pop("config"))
        albert.pop("model_type", None)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(AlbertConfig(**albert), **config)
