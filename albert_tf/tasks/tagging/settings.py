"""`TaggingSettings`: the shape of a fresh tagger head, the learning rate of its CRF, and
how long texts are read and training texts made."""

from __future__ import annotations

import dataclasses

from albert_tf.tasks.settings import TaskSettings, setting

#: How a word of several pieces gets its tag probabilities, as the Hugging Face
#: token-classification pipeline's aggregation strategies of these names
#: (`albert_tf.tasks.tagging.decoding.aggregate_pieces`).
WORD_AGGREGATIONS = ("first", "average", "max")


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
    tagging_stride: int | None = setting(
        None,
        "tagging: pieces between the starts of a long text's windows, 1 to max_seq_length - 2 "
        "(default: half a window). Windows overlap by the rest, and each piece is tagged by "
        "the window where it has the most context on both sides (BERT's rule), in training, "
        "evaluation and the export (which records it). max_seq_length - 2: no overlap. "
        "Hugging Face's pipeline stride is the overlap instead.",
        lower_bound=1,
    )
    word_aggregation: str = setting(
        "first",
        "tagging: how a word of several pieces gets its tag probabilities: first (its first "
        "piece's, the one training labels), average (the mean of its pieces') or max (the "
        "piece most sure of its tag); Hugging Face's pipeline names. Evaluation uses it, and "
        "the export records and serves it. Characters of Chinese are one piece each: no effect.",
        choices=WORD_AGGREGATIONS,
    )
    tagging_pack_chars: int = setting(
        0,
        "tagging: join consecutive training sentences, in file order, into texts of up to "
        "this many characters (a longer sentence stays alone), so that the model learns "
        "with each sentence's neighbours around it, as in the paragraphs it will be sent; "
        "dev and test sentences stay as they are. 0: off. Useful where the file keeps "
        "documents in order (People's Daily does).",
        lower_bound=0,
    )
