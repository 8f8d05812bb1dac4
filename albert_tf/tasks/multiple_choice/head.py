"""Scores each option of a multiple-choice question; absent options masked."""

from __future__ import annotations

import keras
from keras import ops

from albert_tf.heads.pooled_classifier_head import PooledClassifierHead

# Added to the logit of an absent option: exp() of it underflows to exactly
# 0 in float32, yet it stays finite so a row with no option yields no NaN.
ABSENT_OPTION_LOGIT = -1e9


@keras.saving.register_keras_serializable(package="albert_tf")
class MultipleChoiceHead(PooledClassifierHead):
    """Pooled output → dropout → Dense(1) → [batch, num_choices] logits.

    The backbone runs on the flattened [batch·num_choices, seq] inputs (one
    ``[CLS] context [SEP] question+option [SEP]`` sequence per option, as the
    official run_race); this head scores every option and folds the scores
    back into rows. ``choice_mask`` marks the options that exist, so a
    question with 3 options can share a batch with 5-option questions: the
    missing two get `ABSENT_OPTION_LOGIT` and probability 0.

    Args:
        dropout: rate before the scorer (``classifier_dropout_prob``).
        initializer_range: stddev of the kernel's truncated normal.

    Call arguments:
        pooled_output: float [batch·num_choices, H].
        choice_mask: int/bool [batch, num_choices], 1 where the option exists.

    Returns:
        float32 logits [batch, num_choices].
    """

    def __init__(self, dropout: float, initializer_range: float, **kwargs):
        super().__init__(1, dropout, initializer_range, **kwargs)

    def call(self, pooled_output, choice_mask, training=None):
        scores = super().call(pooled_output, training=training)  # [B*C, 1]
        num_choices = ops.shape(choice_mask)[1]
        logits = ops.reshape(scores, (-1, num_choices))  # [B, C]
        present = ops.cast(choice_mask, "bool")
        return ops.where(present, logits, ABSENT_OPTION_LOGIT)

    def get_config(self):
        config = super().get_config()
        del config["units"]  # always 1: one score per option
        return config
