"""`AlbertTokenClassifier`: backbone + a tag score for every piece."""

from __future__ import annotations

import keras
import numpy as np

from albert_tf.models.backbone import BACKBONE_INPUTS, AlbertBackbone
from albert_tf.models.task import AlbertTask
from albert_tf.tasks.tagging.head import TokenClassifierHead


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTokenClassifier(AlbertTask):
    """Tags every piece of a text (named entities: BIO tags per word or character).

    Hugging Face's ``AlbertForTokenClassification``: the backbone's last
    hidden states, dropout (``classifier_dropout_prob``), one dense layer per
    piece; with ``lstm_units``, a bidirectional LSTM before them
    (`TokenClassifierHead`); with ``crf``, tag-to-tag scores for training and
    decoding them as a chain (`ConditionalRandomField`). The tags' meaning
    (``O``, ``B-PER``, ``I-PER``, ...) lives in ``finetune.json``, not in the model.

    Inputs: a dict of int32 [batch, seq] tensors ``token_ids``, ``segment_ids``
    and ``padding_mask`` (``[CLS] text [SEP]``).
    Output: float32 logits [batch, seq, num_tags].

    Example:
        >>> from albert_tf.config import AlbertConfig
        >>> cfg = AlbertConfig(vocab_size=100, hidden_size=32, embedding_size=8,
        ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
        >>> model = AlbertTokenClassifier.from_albert_config(cfg, num_tags=5)
        >>> ids = np.ones((4, 7), "int32")
        >>> logits = model({"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": ids})
        >>> tuple(logits.shape)
        (4, 7, 5)
    """

    def __init__(
        self,
        backbone: AlbertBackbone,
        num_tags: int,
        lstm_units: int = 0,
        crf: bool = False,
        **kwargs,
    ):
        if num_tags < 2:
            raise ValueError(f"num_tags must be >= 2 (O and an entity tag), got {num_tags}")
        super().__init__(backbone, **kwargs)
        self.num_tags = num_tags
        self.lstm_units = lstm_units
        self.crf = bool(crf)
        self.tagger_head = TokenClassifierHead(
            num_tags,
            dropout=backbone.config.classifier_dropout_prob,
            initializer_range=backbone.config.initializer_range,
            lstm_units=lstm_units,
            crf=crf,
            dtype=backbone.dtype_policy,
            name="tagger_head",
        )
        ids = np.zeros((1, 2), "int32")
        self({"token_ids": ids, "segment_ids": ids, "padding_mask": ids + 1})

    @classmethod
    def head_arguments(cls, arrays, head_prefix: str) -> dict:
        """``num_tags``, from the saved head's bias; ``lstm_units``, from its LSTM's;
        ``crf``, whether it has transition scores."""
        lstm = [a for name, a in arrays.items() if name.startswith(f"{head_prefix}lstm/")]
        units = min((int(a.shape[-1]) // 4 for a in lstm if len(a.shape) == 1), default=0)
        return {
            "num_tags": int(arrays[f"{head_prefix}dense/bias"].shape[0]),
            "lstm_units": units,
            "crf": f"{head_prefix}crf/transitions" in arrays,
        }

    def call(self, inputs, training=None):
        features = {key: inputs[key] for key in BACKBONE_INPUTS}
        sequence = self.backbone(features, training=training)["sequence_output"]
        return self.tagger_head(sequence, inputs["padding_mask"], training=training)

    def get_config(self):
        return super().get_config() | {
            "num_tags": self.num_tags,
            "lstm_units": self.lstm_units,
            "crf": self.crf,
        }
