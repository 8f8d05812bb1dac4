"""`AlbertMultipleChoice`: backbone + multiple-choice head."""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from albert_tf.models.backbone import BACKBONE_INPUTS, AlbertBackbone
from albert_tf.models.task import AlbertTask
from albert_tf.tasks.multiple_choice.head import MultipleChoiceHead


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(AlbertTask):
    """Scores the options of multiple-choice questions (RACE, C3, ...).

    Inputs: a dict of int32 [batch, num_choices, seq] tensors ``token_ids``,
    ``segment_ids`` and ``padding_mask``; an option whose padding-mask row is
    all zero is *absent* (so items with fewer options share a batch without
    filler text). Output: float32 logits [batch, num_choices], with absent
    options at `ABSENT_OPTION_LOGIT` so that their softmax probability is 0.

    Example:
        >>> from albert_tf.config import AlbertConfig
        >>> cfg = AlbertConfig(vocab_size=100, hidden_size=32, embedding_size=8,
        ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
        >>> model = AlbertMultipleChoice.from_albert_config(cfg)
        >>> ids = np.ones((2, 5, 7), "int32")
        >>> mask = np.ones_like(ids); mask[0, 3:] = 0   # item 0 has 3 options
        >>> logits = model({"token_ids": ids, "segment_ids": 0 * ids,
        ...                 "padding_mask": mask})
        >>> tuple(logits.shape)
        (2, 5)
    """

    def __init__(self, backbone: AlbertBackbone, **kwargs):
        super().__init__(backbone, **kwargs)
        self.multiple_choice_head = MultipleChoiceHead(
            dropout=backbone.config.classifier_dropout_prob,
            initializer_range=backbone.config.initializer_range,
            dtype=backbone.dtype_policy,
            name="multiple_choice_head",
        )
        ids = np.zeros((1, 2, 2), "int32")
        self({"token_ids": ids, "segment_ids": ids, "padding_mask": ids + 1})

    def call(self, inputs, training=None):
        padding_mask = inputs["padding_mask"]
        shape = ops.shape(inputs["token_ids"])  # [B, C, S]
        flat = {
            key: ops.reshape(inputs[key], (-1, shape[-1]))  # [B*C, S]
            for key in BACKBONE_INPUTS
        }
        pooled = self.backbone(flat, training=training)["pooled_output"]
        choice_mask = ops.any(ops.cast(padding_mask, "bool"), axis=-1)  # [B, C]
        return self.multiple_choice_head(pooled, choice_mask, training=training)
