"""`TaggingSettings`: the shape of a fresh tagger head and the learning rate of its CRF."""

from __future__ import annotations

import dataclasses

from albert_tf.tasks.settings import TaskSettings, setting


@dataclasses.dataclass(frozen=True)
class TaggingSettings(TaskSettings):
    """Tagging's options of a fine-tuning run (``finetune`` flags of the same names). Unset
    (None), a tagger being continued keeps its own head, a fresh one gets Hugging Face's."""

    tagger_lstm_units: int | None = setting(
        None,
        "tagging: a bidirectional LSTM of this many units each way between the encoder and "
        "the tag layer of a fresh head (default and 0: none, Hugging Face's head; a head with "
        "one does not convert to Hugging Face). Unset, a tagger being continued keeps its own.",
        lower_bound=0,
    )
    tagger_crf: bool | None = setting(
        None,
        "tagging: a linear-chain CRF over a fresh head's tags (learned tag-to-tag scores; "
        "trained on the chain's likelihood, decoded by Viterbi; does not convert to Hugging "
        "Face). Unset, a tagger being continued keeps its own, a fresh head has none.",
    )
    tagger_crf_learning_rate: float | None = setting(
        None,
        "tagging: the peak learning rate of a CRF head's scores (default: --learning_rate). "
        "They start at zero: at a base-size model's 1e-5 they barely move, and NER recipes "
        "give a CRF about 1e-3. Follows the same warm-up and decay.",
        lower_bound=0.0,
    )
