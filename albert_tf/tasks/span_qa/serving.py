"""The SavedModel's `tf.Module` for span QA: a question and a context in, the answer's
characters out."""

from __future__ import annotations

import tensorflow as tf

from albert_tf.models.backbone import BACKBONE_INPUTS
from albert_tf.serving.id_checks import at_most_chars, check_max_seq_length
from albert_tf.tasks.span_qa.data import (
    DOC_STRIDE,
    MAX_ANSWER_LENGTH,
    MAX_QUERY_LENGTH,
    Windowing,
    best_spans,
    check_tokenizer,
    context_mask,
    pack_qa,
)
from albert_tf.tokenizers._text_ops import transcode_utf8

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
      answered by the best start + end logit of all (`best_spans`; on a tie, the
      earliest window, then the earliest start and end).
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
        check_tokenizer(tokenizer)
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
        example = packed["window_example"]
        num_examples = tf.shape(context)[0]
        windows = tf.shape(example)[0]
        offset, first_piece = packed["context_offset"], packed["window_start"]
        mask = context_mask(tf.shape(logits)[1], offset, packed["window_length"])
        spans = best_spans(logits, mask, self.max_answer_length, 1)
        score = spans["score"][:, 0]

        def pick(values: tf.Tensor, reduce) -> tuple[tf.Tensor, tf.Tensor]:
            """Per example, the first of its windows (the lowest index) where ``values``
            is ``reduce``'s, and that value."""
            best = reduce(values, example, num_examples)
            hit = values == tf.gather(best, example)
            index = tf.where(hit, tf.range(windows), windows)
            return tf.minimum(
                tf.math.unsorted_segment_min(index, example, num_examples),
                tf.maximum(windows - 1, 0),
            ), best

        window, best_score = pick(score, tf.math.unsorted_segment_max)
        null_window, null_score = pick(spans["null_score"], tf.math.unsorted_segment_min)

        def piece_of(position: tf.Tensor) -> tf.Tensor:
            """A window position's piece, as an index into the flat pieces of all contexts."""
            local = tf.gather(position, window) - tf.gather(offset, window)
            row_start = tf.cast(packed["word_starts"].row_starts(), tf.int32)
            return row_start + tf.gather(first_piece, window) + local

        # One spare entry: a context without pieces gathers it and is not answered.
        starts = tf.concat([packed["word_starts"].flat_values, [0]], 0)
        ends = tf.concat([packed["word_ends"].flat_values, [0]], 0)
        spare = tf.size(starts) - 1

        def safe(index: tf.Tensor) -> tf.Tensor:
            return tf.clip_by_value(index, 0, spare)

        # A window without a span scores -inf; a segment max over it is float32's lowest.
        answered = best_score > tf.float32.min
        if self.no_answer_threshold is not None:
            answered &= null_score - best_score <= self.no_answer_threshold
        start = tf.gather(starts, safe(piece_of(spans["start"][:, 0])))
        end = tf.gather(ends, safe(piece_of(spans["end"][:, 0])))
        start = tf.where(answered, start, -1)
        end = tf.where(answered, end, -1)
        text = tf.strings.substr(
            transcode_utf8(context),
            tf.maximum(start, 0),
            tf.maximum(end - start, 0),
            unit="UTF8_CHAR",
        )
        probability = tf.where(
            answered,
            tf.gather(spans["probability"][:, 0], window),
            tf.gather(spans["null_probability"], null_window),
        )
        return {
            "answer": tf.where(answered, text, ""),
            "start": start,
            "end": end,
            "score": tf.reshape(probability, [-1]),
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
