"""`AlbertSpanQA`: backbone + a start and an end score for every piece."""

from __future__ import annotations

import keras
import numpy as np

from albert_tf.models.backbone import BACKBONE_INPUTS, AlbertBackbone
from albert_tf.models.task import AlbertTask
from albert_tf.tasks.span_qa.head import SpanHead


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSpanQA(AlbertTask):
    """Scores every piece of ``[CLS] question [SEP] context [SEP]`` as an answer's
    first and last piece (SQuAD-style extractive question answering).

    Hugging Face's ``AlbertForQuestionAnswering``: the backbone's last hidden
    states and one dense layer with two outputs per piece. Decoding the best
    span (the context's pieces only, at most ``max_answer_length`` long, or
    [CLS] for "no answer") is the trainer's and the SavedModel's
    (`albert_tf.tasks.span_qa.decoding`).

    Inputs: a dict of int32 [batch, seq] tensors ``token_ids``, ``segment_ids``
    (0 for the question, 1 for the context) and ``padding_mask``.
    Output: float32 logits [batch, seq, 2], start then end.

    Example:
        >>> from albert_tf.config import AlbertConfig
        >>> cfg = AlbertConfig(vocab_size=100, hidden_size=32, embedding_size=8,
        ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
        >>> model = AlbertSpanQA.from_albert_config(cfg)
        >>> ids = np.ones((4, 7), "int32")
        >>> logits = model({"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": ids})
        >>> tuple(logits.shape)
        (4, 7, 2)
    """

    def __init__(self, backbone: AlbertBackbone, **kwargs):
        super().__init__(backbone, **kwargs)
        self.span_head = SpanHead(
            initializer_range=backbone.config.initializer_range,
            dtype=backbone.dtype_policy,
            name="span_head",
        )
        ids = np.zeros((1, 2), "int32")
        self({"token_ids": ids, "segment_ids": ids, "padding_mask": ids + 1})

    def call(self, inputs, training=None):
        features = {key: inputs[key] for key in BACKBONE_INPUTS}
        sequence = self.backbone(features, training=training)["sequence_output"]
        return self.span_head(sequence)
