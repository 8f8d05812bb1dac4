"""`AlbertTextClassifier`: backbone + a classifier on the pooled [CLS] vector."""

from __future__ import annotations

import keras
import numpy as np

from albert_tf.heads.pooled_classifier_head import PooledClassifierHead
from albert_tf.models.backbone import BACKBONE_INPUTS, AlbertBackbone
from albert_tf.models.task import AlbertTask


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextClassifier(AlbertTask):
    """Classifies a text or a text pair (SST-2, MNLI, TNEWS, ...) or scores it (STS-B).

    The paper's GLUE fine-tuning, as google-research/albert's ``run_classifier``
    and Hugging Face's ``AlbertForSequenceClassification`` build it: the
    backbone's pooled output, dropout (``classifier_dropout_prob``), then one
    dense layer. ``num_labels=1`` makes it a regression model (one score).

    Inputs: a dict of int32 [batch, seq] tensors ``token_ids``, ``segment_ids``
    and ``padding_mask`` (``[CLS] text [SEP] pair [SEP]``, pair in segment 1).
    Output: float32 logits [batch, num_labels].

    Example:
        >>> from albert_tf.config import AlbertConfig
        >>> cfg = AlbertConfig(vocab_size=100, hidden_size=32, embedding_size=8,
        ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
        >>> model = AlbertTextClassifier.from_albert_config(cfg, num_labels=3)
        >>> ids = np.ones((4, 7), "int32")
        >>> logits = model({"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": ids})
        >>> tuple(logits.shape)
        (4, 3)
    """

    def __init__(self, backbone: AlbertBackbone, num_labels: int, **kwargs):
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1 (1 = regression), got {num_labels}")
        super().__init__(backbone, **kwargs)
        self.num_labels = num_labels
        self.classifier_head = PooledClassifierHead(
            num_labels,
            dropout=backbone.config.classifier_dropout_prob,
            initializer_range=backbone.config.initializer_range,
            dtype=backbone.dtype_policy,
            name="classifier_head",
        )
        ids = np.zeros((1, 2), "int32")
        self({"token_ids": ids, "segment_ids": ids, "padding_mask": ids + 1})

    @classmethod
    def head_arguments(cls, arrays, head_prefix: str) -> dict:
        """``num_labels``, from the saved head's bias."""
        return {"num_labels": int(arrays[f"{head_prefix}dense/bias"].shape[0])}

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1

    def call(self, inputs, training=None):
        # A plain dict of exactly the backbone's inputs: Keras warns about (and
        # mis-matches) other mappings, such as the wrapper it makes of ours.
        features = {key: inputs[key] for key in BACKBONE_INPUTS}
        pooled = self.backbone(features, training=training)["pooled_output"]
        return self.classifier_head(pooled, training=training)

    def get_config(self):
        return super().get_config() | {"num_labels": self.num_labels}
