"""The SavedModel's `tf.Module` for span QA: a question and a context in, the answer's
characters out."""

from __future__ import annotations

import tensorflow as tf

from albert_tf.models.backbone import BACKBONE_INPUTS
from albert_tf.serving.id_checks import at_most_chars, check_max_seq_length
from albert_tf.tasks.span_qa.decoding import (
    MAX_ANSWER_LENGTH,
    best_answers,
    best_spans,
    choose,
    context_mask,
)
from albert_tf.tasks.span_qa.preprocessing import (
    DOC_STRIDE,
    MAX_QUERY_LENGTH,
    Windowing,
    pack_qa,
)
from albert_tf.tokenizers.offsets import char_slices, check_offsets

_TEXT = tf.TensorSpec([None], tf.string)

# Limits on one request row, checked before tokenisation so that a hostile request
# fails in milliseconds; the export records them in assets.extra/albert_tf.json.
MAX_CONTEXT_CHARS = 50_000
MAX_QUESTION_CHARS = 2_000
LIMITS = {"max_context_chars": MAX_CONTEXT_CHARS, "max_question_chars": MAX_QUESTION_CHARS}


class SpanQAServingModule(tf.Module):
    """Signatures of the exported span QA SavedModel.

    * ``serving_default(question [B], context [B])`` → ``answer`` string [B],
      ``start``/``end`` int32 [B] (the answer's characters in ``context``,
      Unicode code points, end exclusive, whole words; −1 for no answer) and ``score``
      float32 [B] (the answer's probability in its window: its start's softmax
      times its end's; for no answer, the [CLS] position's). A context longer
      than one window is read in windows ``doc_stride`` pieces apart and
      answered by the best start + end logit of all (on a tie, the earliest
      window, then the earliest start and end: `albert_tf.tasks.span_qa.decoding`,
      which the trainer runs too).
      With a ``no_answer_threshold`` (a model trained with impossible
      questions), "no answer" wins when the lowest null score of the windows
      beats the best span's by more than it.
    * ``tokenize(question [B], context [B])`` → the windows the model reads:
      ``token_ids``, ``segment_ids``, ``padding_mask`` int32 [windows, S],
      ``window_example`` int32 [windows], and ``pieces`` string [windows, S].

    An empty batch gets empty outputs. A question or context past `LIMITS`,
    or batches of different sizes, fail with ``InvalidArgumentError`` naming
    the problem, before tokenisation.

    Args:
        model: an `AlbertSpanQA`.
        tokenizer: its tokenizer (with ``tokenize_with_offsets``).
        windowing: `Windowing` (``max_seq_length``, ``max_query_length``, ``doc_stride``).
        max_answer_length: longest answer, in pieces.
        no_answer_threshold: None: always answer when the context has a span.

    Example:
        >>> module = SpanQAServingModule(model, tok, Windowing(384))     # doctest: +SKIP
        >>> question, context = tf.constant(["谁？"]), tf.constant(["江泽民在北京"])
        >>> out = module.serving_default(question, context)                 # doctest: +SKIP
        >>> out["answer"].numpy()[0].decode(), int(out["start"][0])        # doctest: +SKIP
        ('江泽民', 0)
    """

    #: The SavedModel's signatures, by method name.
    SIGNATURES = ("serving_default", "tokenize")

    def __init__(
        self,
        model,
        tokenizer,
        windowing: Windowing,
        max_answer_length: int = MAX_ANSWER_LENGTH,
        no_answer_threshold: float | None = None,
    ):
        super().__init__(name="albert_span_qa")
        check_max_seq_length(model, windowing.max_seq_length)
        check_offsets(tokenizer, "span QA")
        self.model = model
        self.tokenizer = tokenizer
        self.windowing = windowing
        self.max_answer_length = max_answer_length
        self.no_answer_threshold = no_answer_threshold

    @classmethod
    def for_export(
        cls, model, tokenizer, settings: dict, max_seq_length: int, max_qa_length: int | None = None
    ) -> tuple[SpanQAServingModule, dict, dict]:
        """The module an export serves (``settings``: ``finetune.json``) and what
        ``assets.extra/albert_tf.json`` records of it."""
        windowing = Windowing(
            max_seq_length,
            int(settings.get("max_query_length", MAX_QUERY_LENGTH)),
            int(settings.get("doc_stride", DOC_STRIDE)),
        )
        max_answer_length = int(settings.get("max_answer_length", MAX_ANSWER_LENGTH))
        threshold = settings.get("no_answer_threshold")
        module = cls(model, tokenizer, windowing, max_answer_length, threshold)
        metadata = {
            "max_query_length": windowing.max_query_length,
            "doc_stride": windowing.doc_stride,
            "max_answer_length": max_answer_length,
            "no_answer_threshold": threshold,
            "limits": LIMITS,
        }
        return module, metadata, {}

    def _pack(self, question: tf.Tensor, context: tf.Tensor) -> dict[str, tf.Tensor]:
        checks = [
            tf.debugging.assert_equal(
                tf.shape(question)[0],
                tf.shape(context)[0],
                message="question and context must have the same batch size (one question "
                "per context; repeat a context to ask it several questions)",
            ),
            at_most_chars(question, MAX_QUESTION_CHARS, "question"),
            at_most_chars(
                context, MAX_CONTEXT_CHARS, "context", "; send a long document as several contexts"
            ),
        ]
        with tf.control_dependencies(checks):
            question, context = tf.identity(question), tf.identity(context)
        return pack_qa(question, context, self.tokenizer, self.windowing)

    def _logits(self, packed: dict[str, tf.Tensor]) -> tf.Tensor:
        token_ids = packed["token_ids"]

        def run_model():
            features = {key: packed[key] for key in BACKBONE_INPUTS}
            return tf.cast(self.model(features, training=False), tf.float32)

        def no_windows():  # an empty batch: the encoder cannot run on zero rows
            # (one position, so that the [CLS] column of `best_spans` exists)
            return tf.zeros([0, tf.maximum(tf.shape(token_ids)[1], 1), 2], tf.float32)

        return tf.cond(tf.shape(token_ids)[0] > 0, run_model, no_windows)

    def answer(
        self, logits: tf.Tensor, packed: dict[str, tf.Tensor], context: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        """`serving_default`'s outputs from the windows' logits and `pack_qa`'s output."""
        mask = context_mask(tf.shape(logits)[1], packed["context_offset"], packed["window_length"])
        answers = best_answers(
            best_spans(logits, mask, self.max_answer_length, 1),
            packed,
            packed["word_starts"],
            packed["word_ends"],
            1,
        )
        chosen = choose(answers, self.no_answer_threshold)
        return {
            "answer": char_slices(context, chosen["start"], chosen["end"]),
            "start": chosen["start"],
            "end": chosen["end"],
            "score": chosen["probability"],
        }

    @tf.function(input_signature=[_TEXT, _TEXT])
    def serving_default(self, question, context):
        packed = self._pack(question, context)
        return self.answer(self._logits(packed), packed, context)

    @tf.function(input_signature=[_TEXT, _TEXT])
    def tokenize(self, question, context):
        packed = self._pack(question, context)
        return {
            "token_ids": packed["token_ids"],
            "segment_ids": packed["segment_ids"],
            "padding_mask": packed["padding_mask"],
            "window_example": packed["window_example"],
            "pieces": self.tokenizer.id_to_token(packed["token_ids"]),
        }
