"""Two-way classifier on the pooled output: sentence order (or NSP)."""

from __future__ import annotations

import keras

from albert_tf.heads.pooled_classifier_head import PooledClassifierHead


@keras.saving.register_keras_serializable(package="albert_tf")
class SentenceOrderHead(PooledClassifierHead):
    """Dropout then Dense(2) on the pooled [CLS] vector.

    Label 0: segments in their original order; label 1: swapped (SOP) — or,
    with NSP data, B drawn from another document. The same layer serves both
    sentence tasks of the paper's Table 5; only the data differs.

    Args:
        dropout: rate before the classifier (``classifier_dropout_prob``).
        initializer_range: stddev of the kernel's truncated normal.

    Call arguments:
        pooled_output: float [batch, H].

    Returns:
        float32 logits [batch, 2].
    """

    def __init__(self, dropout: float, initializer_range: float, **kwargs):
        super().__init__(2, dropout, initializer_range, **kwargs)

    def get_config(self):
        config = super().get_config()
        del config["units"]  # always 2
        return config
