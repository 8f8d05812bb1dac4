"""`AlbertPretrainingModel`: backbone + masked-LM head + sentence-order head."""

from __future__ import annotations

import keras
import numpy as np

from albert_tf.heads.masked_lm_head import MaskedLMHead
from albert_tf.heads.sentence_order_head import SentenceOrderHead
from albert_tf.models.backbone import BACKBONE_INPUTS, AlbertBackbone
from albert_tf.models.task import AlbertTask

__all__ = ["BACKBONE_INPUTS", "AlbertPretrainingModel"]


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPretrainingModel(AlbertTask):
    """ALBERT with its two pretraining heads (paper §3: MLM + SOP).

    Called on a dict of int32 [batch, seq] tensors ``token_ids``,
    ``segment_ids``, ``padding_mask`` (1 = real token) and, optionally,
    ``mask_positions`` (int32 [batch, P]). Returns a dict with
    ``sequence_output``, ``pooled_output``, ``mlm_logits`` ([batch, seq, V]
    for every position, or [batch, P, V] at ``mask_positions``) and
    ``sop_logits`` ([batch, 2]).

    Example:
        >>> from albert_tf.config import AlbertConfig
        >>> cfg = AlbertConfig(vocab_size=100, hidden_size=32, embedding_size=8,
        ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
        >>> model = AlbertPretrainingModel.from_albert_config(cfg)
        >>> ids = np.array([[2, 10, 11, 3]], "int32")
        >>> out = model({"token_ids": ids, "segment_ids": 0 * ids,
        ...              "padding_mask": np.ones_like(ids)})
        >>> tuple(out["mlm_logits"].shape), tuple(out["sop_logits"].shape)
        ((1, 4, 100), (1, 2))
    """

    def __init__(self, backbone: AlbertBackbone, **kwargs):
        super().__init__(backbone, **kwargs)
        config = backbone.config
        self.mlm_head = MaskedLMHead(
            backbone.token_embedding,
            activation=config.hidden_act,
            layer_norm_eps=config.layer_norm_eps,
            initializer_range=config.initializer_range,
            tied_projection=(
                backbone.embeddings.projection if config.embedding_layout == "brightmart" else None
            ),
            dtype=backbone.dtype_policy,
            name="mlm_head",
        )
        self.sop_head = SentenceOrderHead(
            dropout=config.classifier_dropout_prob,
            initializer_range=config.initializer_range,
            dtype=backbone.dtype_policy,
            name="sop_head",
        )
        self(_dummy_inputs(batch=1, seq=2))  # build every variable now

    def call(self, inputs, training=None):
        outputs = dict(self.backbone({k: inputs[k] for k in BACKBONE_INPUTS}, training=training))
        outputs["mlm_logits"] = self.mlm_head(
            outputs["sequence_output"], inputs.get("mask_positions")
        )
        outputs["sop_logits"] = self.sop_head(outputs["pooled_output"], training=training)
        return outputs


def _dummy_inputs(batch: int, seq: int) -> dict[str, np.ndarray]:
    ids = np.zeros((batch, seq), "int32")
    return {"token_ids": ids, "segment_ids": ids, "padding_mask": np.ones_like(ids)}
