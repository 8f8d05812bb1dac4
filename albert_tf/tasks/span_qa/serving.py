"""The SavedModel's `tf.Module` for span QA: a question and a context in, the answer's
characters out."""

from __future__ import annotations

import tensorflow as tf

from albert_tf.models.backbone import BACKBONE_INPUTS
from albert_tf.serving.id_checks import at_most_chars, check_max_seq_length
from albert_tf.tasks.span_qa.decoding import (
    MAX_ANSWER_LENGTH,
    N_BEST_SIZE,
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
#: The most answers `SpanQAServingModule.answers` gives a question (its ``top_k``): the
#: outputs are [batch, top_k], so an unbounded ``top_k`` could exhaust the server's memory.
MAX_TOP_K = 100


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
    * ``answers(question [B], context [B], top_k int32 [])`` → the ``top_k`` best
      spans of each question, best first, with what a client needs to decide on
      "no answer" itself: ``answers`` string [B, top_k], ``starts``/``ends``
      int32 [B, top_k], ``scores`` float32 [B, top_k] (start + end logit, what the
      ranking compares) and ``probabilities`` [B, top_k] (as ``score`` above),
      padded with ``""``, −1, 0 and 0 where a question has fewer spans;
      ``null_score`` [B] (the lowest [CLS] start + end logit of its windows) and
      ``null_probability`` [B]; ``no_answer_threshold`` float32 [] (the export's,
      NaN when it has none). ``serving_default``'s answer is ``answers[:, 0]``
      unless ``null_score - scores[:, 0] > no_answer_threshold`` (or the question
      has no span). ``top_k`` must be 1 to `MAX_TOP_K`. The candidates are each
      window's ``max(top_k, n_best_size)`` best spans, so that the first
      ``top_k`` answers are those of the trainer's n-best list (spans that widen
      to the same words count once, so a window needs more than ``top_k``).
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
        n_best_size: spans kept per window for `answers` (at least ``top_k``).

    Example:
        >>> module = SpanQAServingModule(model, tok, Windowing(384))     # doctest: +SKIP
        >>> question, context = tf.constant(["谁？"]), tf.constant(["江泽民在北京"])
        >>> out = module.serving_default(question, context)                 # doctest: +SKIP
        >>> out["answer"].numpy()[0].decode(), int(out["start"][0])        # doctest: +SKIP
        ('江泽民', 0)
    """

    #: The SavedModel's signatures, by method name.
    SIGNATURES = ("serving_default", "answers", "tokenize")

    def __init__(
        self,
        model,
        tokenizer,
        windowing: Windowing,
        max_answer_length: int = MAX_ANSWER_LENGTH,
        no_answer_threshold: float | None = None,
        n_best_size: int = N_BEST_SIZE,
    ):
        super().__init__(name="albert_span_qa")
        check_max_seq_length(model, windowing.max_seq_length)
        check_offsets(tokenizer, "span QA")
        self.model = model
        self.tokenizer = tokenizer
        self.windowing = windowing
        self.max_answer_length = max_answer_length
        self.no_answer_threshold = no_answer_threshold
        self.n_best_size = n_best_size

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
        n_best_size = int(settings.get("n_best_size", N_BEST_SIZE))
        module = cls(model, tokenizer, windowing, max_answer_length, threshold, n_best_size)
        metadata = {
            "max_query_length": windowing.max_query_length,
            "doc_stride": windowing.doc_stride,
            "max_answer_length": max_answer_length,
            "no_answer_threshold": threshold,
            "limits": LIMITS,
            "max_top_k": MAX_TOP_K,
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

    def ranked(
        self, logits: tf.Tensor, packed: dict[str, tf.Tensor], context: tf.Tensor, top_k: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        """`answers`' outputs: `best_answers` with ``k = top_k``, padded to [B, top_k]."""
        mask = context_mask(tf.shape(logits)[1], packed["context_offset"], packed["window_length"])
        found = best_answers(
            best_spans(logits, mask, self.max_answer_length, tf.maximum(top_k, self.n_best_size)),
            packed,
            packed["word_starts"],
            packed["word_ends"],
            top_k,
        )
        shape = tf.stack([tf.cast(found["starts"].nrows(), tf.int32), top_k])

        def dense(key: str, default) -> tf.Tensor:
            return found[key].to_tensor(default_value=default, shape=shape)

        starts, ends = dense("starts", -1), dense("ends", -1)
        texts = char_slices(
            tf.repeat(context, top_k), tf.reshape(starts, [-1]), tf.reshape(ends, [-1])
        )
        threshold = self.no_answer_threshold
        return {
            "answers": tf.reshape(texts, shape),
            "starts": starts,
            "ends": ends,
            "scores": dense("scores", 0.0),
            "probabilities": dense("probabilities", 0.0),
            "null_score": found["null_score"],
            "null_probability": found["null_probability"],
            "no_answer_threshold": tf.constant(
                float("nan") if threshold is None else threshold, tf.float32
            ),
        }

    @tf.function(input_signature=[_TEXT, _TEXT])
    def serving_default(self, question, context):
        packed = self._pack(question, context)
        return self.answer(self._logits(packed), packed, context)

    @tf.function(input_signature=[_TEXT, _TEXT, tf.TensorSpec([], tf.int32)])
    def answers(self, question, context, top_k):
        message = f"top_k must be 1 to {MAX_TOP_K} answers per question (x below is the value)"
        checks = [
            tf.debugging.assert_greater_equal(top_k, 1, message=message),
            tf.debugging.assert_less_equal(top_k, MAX_TOP_K, message=message),
        ]
        with tf.control_dependencies(checks):
            top_k = tf.identity(top_k)
        packed = self._pack(question, context)
        return self.ranked(self._logits(packed), packed, context, top_k)

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
