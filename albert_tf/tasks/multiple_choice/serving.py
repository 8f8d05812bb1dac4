"""The SavedModel's `tf.Module`: raw text in, option probabilities out."""

from __future__ import annotations

import tensorflow as tf

from albert_tf.baselines.overlap_in_graph import OverlapScorer
from albert_tf.models.backbone import BACKBONE_INPUTS
from albert_tf.serving import length_buckets
from albert_tf.serving.id_checks import check_max_seq_length, checked_ids
from albert_tf.tasks.multiple_choice.data import pack_multiple_choice
from albert_tf.tasks.multiple_choice.head import ABSENT_OPTION_LOGIT

_TEXT = tf.TensorSpec([None], tf.string)
_OPTIONS = tf.TensorSpec([None, None], tf.string)
_IDS = tf.TensorSpec([None, None, None], tf.int32)

# Limits on one item, checked before tokenisation so that a hostile request fails
# in milliseconds. Tokenising the question and option is repeated for every option,
# the context once per item: with these limits the worst item costs about 10 s on
# 2 loaded CPU cores (docs/serving.md, "When things go wrong"). The export records
# them in assets.extra/albert_tf.json.
MAX_OPTIONS = 64  # width of `options` (padding "" included) or of the ids' option axis
MAX_CONTEXT_CHARS = 100_000
MAX_QUESTION_CHARS = 20_000
MAX_OPTION_CHARS = 20_000
# The text read with each option: the question with every `_` replaced by the option
# (else question, space, option). Bounds questions with many blanks, which multiply.
MAX_QA_CHARS = MAX_QUESTION_CHARS + 1 + MAX_OPTION_CHARS
#: Question+option pieces an export keeps when fine-tuning recorded none.
DEFAULT_MAX_QA_LENGTH = 128
LIMITS = {
    "max_options": MAX_OPTIONS,
    "max_context_chars": MAX_CONTEXT_CHARS,
    "max_question_chars": MAX_QUESTION_CHARS,
    "max_option_chars": MAX_OPTION_CHARS,
    "max_qa_chars": MAX_QA_CHARS,
}


def _at_most(value: tf.Tensor, limit: int, name: str, what: str) -> tf.Operation:
    """An assertion whose error names the limit and, via ``name``, the value."""
    return tf.debugging.assert_less_equal(
        tf.identity(value, name=name),
        tf.cast(limit, value.dtype),
        message=f"{what} exceeds the serving limit of {limit:,} (x below is the value)",
    )


def _text_checks(context: tf.Tensor, question: tf.Tensor, options: tf.Tensor) -> list:
    """Batch sizes, one present option per item and the `LIMITS`: cheap, no tokenising."""

    def chars(x: tf.Tensor) -> tf.Tensor:
        return tf.cast(tf.strings.length(x, unit="UTF8_CHAR"), tf.int64)

    question_chars, option_chars = chars(question), chars(options)
    blanks = question_chars - chars(tf.strings.regex_replace(question, "_", ""))
    qa_chars = tf.where(
        blanks[:, None] > 0,
        (question_chars - blanks)[:, None] + blanks[:, None] * option_chars,
        question_chars[:, None] + 1 + option_chars,
    )
    batch = tf.shape(options)[0]
    return [
        tf.debugging.assert_equal(
            tf.shape(context)[0],
            batch,
            message="context and options must have the same batch size",
        ),
        tf.debugging.assert_equal(
            tf.shape(question)[0],
            batch,
            message="question and options must have the same batch size",
        ),
        _at_most(tf.shape(options)[1], MAX_OPTIONS, "options_per_item", "options per item"),
        _at_most(
            tf.reduce_max(chars(context)), MAX_CONTEXT_CHARS, "context_chars", "context length"
        ),
        _at_most(
            tf.reduce_max(question_chars), MAX_QUESTION_CHARS, "question_chars", "question length"
        ),
        _at_most(tf.reduce_max(option_chars), MAX_OPTION_CHARS, "option_chars", "option length"),
        _at_most(
            tf.reduce_max(qa_chars),
            MAX_QA_CHARS,
            "question_with_option_chars",
            "length of the question with the option filled into its blanks",
        ),
        tf.debugging.assert_equal(
            tf.reduce_all(tf.reduce_any(option_chars > 0, axis=1)),
            True,
            message="every item needs at least one non-empty option "
            "(an empty string marks an absent option)",
        ),
    ]


class MultipleChoiceServingModule(tf.Module):
    """Signatures of the exported multiple-choice SavedModel.

    * ``serving_default(context [B], question [B], options [B, C])`` →
      ``probabilities`` float32 [B, C] (0 for absent options, each row sums
      to 1), ``logits`` float32 [B, C] (absent: -1e9), ``prediction`` int64 [B].
      An empty option string is an absent option. Tokenisation runs in-graph.
    * ``score_ids(token_ids, segment_ids, padding_mask)``, int32 [B, C, S]
      each, for clients that tokenise themselves: same outputs.
    * ``tokenize(context, question, options)``: the packed ids plus the pieces
      as strings and truncation flags, for display and debugging.

    With an ``overlap_combination`` (fitted on dev, `albert_tf.baselines.combination`),
    ``serving_default``'s ``logits`` are ``model_weight · model_logits +
    overlap_weight · overlap`` and it also returns both parts: ``model_logits``
    and ``overlap`` float32 [B, C], the options' length-normalised, rarity-weighted
    overlap with context and question (`OverlapScorer`). ``score_ids`` has no text,
    so it scores with the model alone.

    An empty batch (B = 0) gets empty outputs ([0, C] and [0]). Requests past
    the `LIMITS` (options per item, characters per field) fail with
    ``InvalidArgumentError`` naming the limit and the value, before tokenisation.

    Args:
        model: an `AlbertMultipleChoice`.
        tokenizer: its `Tokenizer`.
        max_seq_length: longest packed sequence; longer input is truncated.
        max_qa_length: question+option pieces kept (the last ones).
        context_keep: which end of a too-long context is kept (``"start"`` or
            ``"end"``, `albert_tf.tasks.multiple_choice.data.pack_multiple_choice`).
        overlap_combination: ``model_weight``, ``overlap_weight``, ``documents`` and
            ``document_frequency`` (unit → documents), or None for the model alone.

    Example:
        >>> module = MultipleChoiceServingModule(model, tok, 128, 64)  # doctest: +SKIP
        >>> out = module.serving_default(tf.constant(["It rains."]), tf.constant(["Take _."]),
        ...     tf.constant([["an umbrella", "ice cream", ""]]))           # doctest: +SKIP
        >>> out["probabilities"].shape                                      # doctest: +SKIP
        TensorShape([1, 3])
    """

    #: The SavedModel's signatures, by method name.
    SIGNATURES = ("serving_default", "score_ids", "tokenize")
    #: State the signatures read besides the model's variables and the tokenizer.
    RESOURCES = ("overlap",)

    def __init__(
        self,
        model,
        tokenizer,
        max_seq_length: int,
        max_qa_length: int,
        context_keep: str = "start",
        overlap_combination: dict | None = None,
    ):
        super().__init__(name="albert_multiple_choice")
        check_max_seq_length(model, max_seq_length)
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.max_qa_length = max_qa_length
        self.context_keep = context_keep
        self.overlap = None
        if overlap_combination is not None:
            self.overlap = OverlapScorer(
                overlap_combination["documents"], overlap_combination["document_frequency"]
            )
            self.weights = (
                float(overlap_combination["model_weight"]),
                float(overlap_combination["overlap_weight"]),
            )

    @classmethod
    def for_export(
        cls, model, tokenizer, settings: dict, max_seq_length: int, max_qa_length: int | None = None
    ) -> tuple[MultipleChoiceServingModule, dict, dict]:
        """The module an export serves, with fine-tuning's packing (``settings``:
        ``finetune.json``), what ``assets.extra/albert_tf.json`` records of it, and
        no extra files."""
        max_qa_length = max_qa_length or settings.get(
            "max_qa_length", min(DEFAULT_MAX_QA_LENGTH, max_seq_length - 3)
        )
        # Packing as in fine-tuning: the model learned from contexts cut this way.
        context_keep = settings.get("context_keep", "start")
        combination = settings.get("overlap_combination")
        module = cls(model, tokenizer, max_seq_length, max_qa_length, context_keep, combination)
        metadata = {
            "max_qa_length": max_qa_length,
            "context_keep": context_keep,
            # What the signatures refuse (InvalidArgumentError), for clients to check first.
            "limits": LIMITS,
            # How large requests are run (the same logits, less padding).
            "length_buckets": length_buckets.RULE,
        }
        if combination is not None:
            # The weights and where they came from (the frequencies are in "finetune").
            metadata["overlap_combination"] = {
                key: value for key, value in combination.items() if key != "document_frequency"
            } | {"units": len(combination["document_frequency"]), "score_ids": "model alone"}
        return module, metadata, {}

    def _pack(self, context, question, options):
        # Every input waits for the checks, so nothing is tokenised before they pass.
        with tf.control_dependencies(_text_checks(context, question, options)):
            context = tf.identity(context)
            question = tf.identity(question)
            options = tf.identity(options)
        return pack_multiple_choice(
            self.tokenizer,
            context,
            question,
            options,
            max_seq_length=self.max_seq_length,
            max_qa_length=self.max_qa_length,
            context_keep=self.context_keep,
        )

    def _logits(self, token_ids, segment_ids, padding_mask):
        """[B, C] logits of [B, C, S] packed ids, large requests in length buckets
        (`albert_tf.serving.length_buckets`): each option's sequence is scored alone."""
        shape = tf.shape(token_ids)
        flat = {
            k: tf.reshape(t, [-1, shape[2]])  # [B·C, S]
            for k, t in zip(BACKBONE_INPUTS, (token_ids, segment_ids, padding_mask), strict=True)
        }

        def one_option_each(packed):  # [n, S] → [n, 1, S] → [n]
            return self.model({k: v[:, None] for k, v in packed.items()}, training=False)[:, 0]

        return tf.reshape(length_buckets.score(one_option_each, flat), shape[:2])

    def _score(self, token_ids, segment_ids, padding_mask):
        def run_model():
            logits = tf.cast(self._logits(token_ids, segment_ids, padding_mask), tf.float32)
            present = tf.reduce_any(padding_mask > 0, axis=-1)
            return {
                "probabilities": tf.where(present, tf.nn.softmax(logits, axis=-1), 0.0),
                "logits": logits,
                "prediction": tf.argmax(logits, axis=-1, output_type=tf.int64),
            }

        def empty_batch():
            # The encoder cannot run on zero sequences: an empty batch gets empty answers.
            nothing = tf.zeros([0, tf.shape(token_ids)[1]], tf.float32)
            return {
                "probabilities": nothing,
                "logits": nothing,
                "prediction": tf.zeros([0], tf.int64),
            }

        return tf.cond(tf.shape(token_ids)[0] > 0, run_model, empty_batch)

    def _combined(self, scored: dict, context, question, options) -> dict:
        """The model's outputs with the overlap added (`OverlapScorer`)."""
        overlap = self.overlap(tf.strings.join([context, question], " "), options)
        model_weight, overlap_weight = self.weights
        # Absent options keep the model's mask (`ABSENT_OPTION_LOGIT`).
        present = scored["logits"] > ABSENT_OPTION_LOGIT / 2
        logits = tf.where(
            present, model_weight * scored["logits"] + overlap_weight * overlap, scored["logits"]
        )
        return {
            "probabilities": tf.where(present, tf.nn.softmax(logits, axis=-1), 0.0),
            "logits": logits,
            "prediction": tf.argmax(logits, axis=-1, output_type=tf.int64),
            "model_logits": scored["logits"],
            "overlap": overlap,
        }

    @tf.function(input_signature=[_TEXT, _TEXT, _OPTIONS])
    def serving_default(self, context, question, options):
        packed = self._pack(context, question, options)
        scored = self._score(packed["token_ids"], packed["segment_ids"], packed["padding_mask"])
        if self.overlap is None:
            return scored
        return self._combined(scored, context, question, options)

    @tf.function(input_signature=[_IDS, _IDS, _IDS])
    def score_ids(self, token_ids, segment_ids, padding_mask):
        options = [
            _at_most(tf.shape(token_ids)[1], MAX_OPTIONS, "options_per_item", "options per item"),
            tf.debugging.assert_equal(
                tf.reduce_all(tf.reduce_any(tf.reduce_any(padding_mask > 0, -1), -1)),
                True,
                message="every item needs at least one option with a non-zero padding_mask",
            ),
        ]
        ids = checked_ids(
            token_ids,
            segment_ids,
            padding_mask,
            max_seq_length=self.max_seq_length,
            vocab_size=self.model.config.vocab_size,
            extra_checks=tuple(options),
        )
        return self._score(*ids)

    @tf.function(input_signature=[_TEXT, _TEXT, _OPTIONS])
    def tokenize(self, context, question, options):
        packed = self._pack(context, question, options)
        pieces = self.tokenizer.id_to_token(packed["token_ids"])
        return packed | {"pieces": tf.where(packed["padding_mask"] > 0, pieces, "")}
