"""The SavedModel's `tf.Module` for a text classifier: raw text in, labels out."""

from __future__ import annotations

import tensorflow as tf

from albert_tf.models.backbone import BACKBONE_INPUTS
from albert_tf.serving import length_buckets
from albert_tf.serving.id_checks import at_most_chars, check_max_seq_length, checked_ids
from albert_tf.tasks.classification.data import pack_classification

_TEXT = tf.TensorSpec([None], tf.string)
_IDS = tf.TensorSpec([None, None], tf.int32)

# Limits on one request row, checked before tokenisation so that a hostile request
# fails in milliseconds; the export records them in assets.extra/albert_tf.json.
MAX_TEXT_CHARS = 100_000
#: A classifier's label names by class index, in ``assets.extra``.
LABELS_FILE = "labels.json"
LIMITS = {"max_text_chars": MAX_TEXT_CHARS, "max_text_pair_chars": MAX_TEXT_CHARS}


def _checks(text: tf.Tensor, text_pair: tf.Tensor) -> list:
    return [
        tf.debugging.assert_equal(
            tf.shape(text)[0],
            tf.shape(text_pair)[0],
            message="text and text_pair must have the same batch size "
            '(send "" as the text_pair of a single text)',
        ),
        at_most_chars(text, MAX_TEXT_CHARS, "text"),
        at_most_chars(text_pair, MAX_TEXT_CHARS, "text_pair"),
    ]


class TextClassifierServingModule(tf.Module):
    """Signatures of the exported text-classification SavedModel.

    * ``serving_default(text [B], text_pair [B])``, an empty ``text_pair``
      meaning a single text →
      ``probabilities`` float32 [B, N], ``prediction`` int64 [B] and ``label``
      string [B] (the class's name); a regression model (N = 1) answers
      ``score`` float32 [B] instead. Tokenisation runs in-graph.
    * ``score_ids(token_ids, segment_ids, padding_mask)``, int32 [B, S] each,
      for clients that tokenise themselves: same outputs.
    * ``tokenize(text, text_pair)``: the packed ids and the pieces as strings.

    An empty batch gets empty outputs. A text past `LIMITS` fails with
    ``InvalidArgumentError`` naming the limit, before tokenisation.

    Args:
        model: an `AlbertTextClassifier`.
        tokenizer: its `Tokenizer`.
        max_seq_length: longest packed sequence; longer input is truncated
            (the longer of text and pair loses its end first).
        label_names: the name of each class (ignored for regression).

    Example:
        >>> module = TextClassifierServingModule(model, tok, 128, ["neg", "pos"])  # doctest: +SKIP
        >>> out = module.serving_default(tf.constant(["好用"]), tf.constant([""]))  # doctest: +SKIP
        >>> out["label"]                                                        # doctest: +SKIP
        <tf.Tensor: shape=(1,), dtype=string, numpy=array([b'pos'], dtype=object)>
    """

    #: The SavedModel's signatures, by method name.
    SIGNATURES = ("serving_default", "score_ids", "tokenize")

    def __init__(self, model, tokenizer, max_seq_length: int, label_names=()):
        super().__init__(name="albert_text_classifier")
        check_max_seq_length(model, max_seq_length)
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.regression = model.num_labels == 1
        if not self.regression and len(label_names) != model.num_labels:
            raise ValueError(
                f"{len(label_names)} label names for {model.num_labels} labels: {label_names}"
            )
        self.label_names = tf.constant(list(label_names) or [""], tf.string)

    @classmethod
    def for_export(
        cls, model, tokenizer, settings: dict, max_seq_length: int, max_qa_length: int | None = None
    ) -> tuple[TextClassifierServingModule, dict, dict]:
        """The module an export serves (``settings``: ``finetune.json``), what
        ``assets.extra/albert_tf.json`` records of it, and ``labels.json``
        (``max_qa_length`` is multiple choice's; ignored)."""
        label_names = list(settings.get("label_names", []))
        module = cls(model, tokenizer, max_seq_length, label_names)
        metadata = {
            "label_names": label_names,
            "limits": LIMITS,
            "length_buckets": length_buckets.RULE,
        }
        return module, metadata, {LABELS_FILE: label_names}

    def _pack(self, text, text_pair):
        with tf.control_dependencies(_checks(text, text_pair)):
            text, text_pair = tf.identity(text), tf.identity(text_pair)
        return pack_classification(text, text_pair, self.tokenizer, self.max_seq_length)

    def _answer(self, logits: tf.Tensor) -> dict[str, tf.Tensor]:
        if self.regression:
            return {"score": logits[:, 0]}
        prediction = tf.argmax(logits, axis=-1, output_type=tf.int64)
        return {
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "prediction": prediction,
            "label": tf.gather(self.label_names, prediction),
        }

    def _score(self, token_ids, segment_ids, padding_mask):
        def run_model():
            packed = dict(zip(BACKBONE_INPUTS, (token_ids, segment_ids, padding_mask), strict=True))
            # Large requests in length buckets (`albert_tf.serving.length_buckets`).
            logits = length_buckets.score(lambda p: self.model(p, training=False), packed)
            return self._answer(tf.cast(logits, tf.float32))

        def empty_batch():
            # The encoder cannot run on zero sequences: empty answers of the right shapes.
            return self._answer(tf.zeros([0, self.model.num_labels], tf.float32))

        return tf.cond(tf.shape(token_ids)[0] > 0, run_model, empty_batch)

    @tf.function(input_signature=[_TEXT, _TEXT])
    def serving_default(self, text, text_pair):
        packed = self._pack(text, text_pair)
        return self._score(packed["token_ids"], packed["segment_ids"], packed["padding_mask"])

    @tf.function(input_signature=[_IDS, _IDS, _IDS])
    def score_ids(self, token_ids, segment_ids, padding_mask):
        ids = checked_ids(
            token_ids,
            segment_ids,
            padding_mask,
            max_seq_length=self.max_seq_length,
            vocab_size=self.model.config.vocab_size,
        )
        return self._score(*ids)

    @tf.function(input_signature=[_TEXT, _TEXT])
    def tokenize(self, text, text_pair):
        packed = self._pack(text, text_pair)
        pieces = self.tokenizer.id_to_token(packed["token_ids"])
        return packed | {"pieces": tf.where(packed["padding_mask"] > 0, pieces, "")}
