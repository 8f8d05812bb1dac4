"""`TokenClassifierHead`: a tag score for every piece of the sequence."""

from __future__ import annotations

import keras
from keras import ops

from albert_tf.tasks.tagging.crf import ConditionalRandomField


@keras.saving.register_keras_serializable(package="albert_tf")
class TokenClassifierHead(keras.layers.Layer):
    """Sequence output → [BiLSTM] → dropout → Dense(num_tags) → float32 logits
    [batch, seq, num_tags].

    With ``lstm_units=0`` (the default) this is Hugging Face's
    ``AlbertForTokenClassification`` head (its ``classifier``) and Model Garden's
    tagging head: one dense layer applied to every piece's last hidden state.
    With ``lstm_units > 0`` a bidirectional LSTM of that many units each way
    reads the hidden states first (the "ALBERT-BiLSTM" recipe of Chinese NER
    work): it adds the left-to-right order a small encoder has not learnt, at
    the cost of Hugging Face compatibility (such a head does not convert).
    With ``crf=True`` the head also holds a `ConditionalRandomField`'s
    tag-to-tag scores: the output is still the logits, which the CRF's loss
    and Viterbi decoding then read (no Hugging Face equivalent either).
    Sublayer names (``lstm``, ``dropout``, ``dense``, ``crf``) are part of the
    checkpoint name table.

    Args:
        num_tags: tags a piece can get (BIO: 1 + 2 per entity type).
        dropout: rate before the dense layer (``classifier_dropout_prob``).
        initializer_range: stddev of the dense kernel's truncated normal.
        lstm_units: units of each direction of the LSTM; 0 for none.
        crf: whether tags are scored and decoded as a chain (`ConditionalRandomField`).

    Example:
        >>> import numpy as np
        >>> head = TokenClassifierHead(7, dropout=0.1, initializer_range=0.02)
        >>> tuple(head(np.zeros((2, 5, 8), "float32")).shape)
        (2, 5, 7)
        >>> lstm = TokenClassifierHead(7, dropout=0.1, initializer_range=0.02, lstm_units=4)
        >>> tuple(lstm(np.zeros((2, 5, 8), "float32"), np.ones((2, 5), "int32")).shape)
        (2, 5, 7)
    """

    def __init__(
        self,
        num_tags: int,
        dropout: float,
        initializer_range: float,
        lstm_units: int = 0,
        crf: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if lstm_units < 0:
            raise ValueError(f"lstm_units must be >= 0 (0: no LSTM), got {lstm_units}")
        self.num_tags = num_tags
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.lstm_units = lstm_units
        self.use_crf = bool(crf)
        self.crf = None
        if crf:
            self.crf = ConditionalRandomField(num_tags, dtype=self.dtype_policy, name="crf")
        self.lstm = None
        if lstm_units:
            # No cuDNN kernel: a SavedModel exported on a GPU must still serve on CPU.
            # Named, so that the weights are "lstm/{forward,backward}_lstm/..." in any
            # process (an auto-named second LSTM would be "lstm_1").
            self.lstm = keras.layers.Bidirectional(
                keras.layers.LSTM(
                    lstm_units,
                    return_sequences=True,
                    use_cudnn=False,
                    dtype=self.dtype_policy,
                    name="lstm",
                ),
                dtype=self.dtype_policy,
                name="lstm",
            )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.dense = keras.layers.Dense(
            num_tags,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )

    def build(self, sequence_output_shape, *args):
        if self.lstm is not None:
            self.lstm.build(sequence_output_shape)
            sequence_output_shape = (*sequence_output_shape[:-1], 2 * self.lstm_units)
        self.dense.build(sequence_output_shape)
        if self.crf is not None:
            self.crf.build()
        self.built = True

    def call(self, sequence_output, padding_mask=None, training=None):
        x = sequence_output
        if self.lstm is not None:
            # The backward direction starts at each text's last piece, not at padding.
            mask = None if padding_mask is None else ops.cast(padding_mask, "bool")
            x = self.lstm(x, mask=mask, training=training)
        x = self.dropout_layer(x, training=training)
        return ops.cast(self.dense(x), "float32")  # the loss and softmax in float32

    def get_config(self):
        config = super().get_config()
        config.update(
            num_tags=self.num_tags,
            dropout=self.dropout,
            initializer_range=self.initializer_range,
            lstm_units=self.lstm_units,
            crf=self.use_crf,
        )
        return config
