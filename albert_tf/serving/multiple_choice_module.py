"""The SavedModel's `tf.Module`: raw text in, option probabilities out."""

from __future__ import annotations

import tensorflow as tf

from albert_tf.data.multiple_choice import pack_multiple_choice

_TEXT = tf.TensorSpec([None], tf.string)
_OPTIONS = tf.TensorSpec([None, None], tf.string)
_IDS = tf.TensorSpec([None, None, None], tf.int32)


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

    Args:
        model: an `AlbertMultipleChoice`.
        tokenizer: its `Tokenizer`.
        max_seq_length: longest packed sequence; longer input is truncated.
        max_qa_length: question+option pieces kept (the last ones).
        context_keep: which end of a too-long context is kept (``"start"`` or
            ``"end"``, `albert_tf.data.multiple_choice.pack_multiple_choice`).

    Example:
        >>> module = MultipleChoiceServingModule(model, tok, 128, 64)  # doctest: +SKIP
        >>> out = module.serving_default(tf.constant(["It rains."]), tf.constant(["Take _."]),
        ...     tf.constant([["an umbrella", "ice cream", ""]]))           # doctest: +SKIP
        >>> out["probabilities"].shape                                      # doctest: +SKIP
        TensorShape([1, 3])
    """

    def __init__(
        self,
        model,
        tokenizer,
        max_seq_length: int,
        max_qa_length: int,
        context_keep: str = "start",
    ):
        super().__init__(name="albert_multiple_choice")
        limit = model.config.max_position_embeddings
        if max_seq_length > limit:
            raise ValueError(
                f"max_seq_length={max_seq_length} exceeds the model's "
                f"max_position_embeddings={limit}"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.max_qa_length = max_qa_length
        self.context_keep = context_keep

    def _pack(self, context, question, options):
        batch = tf.shape(options)[0]
        checks = [
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
            tf.debugging.assert_equal(
                tf.reduce_all(tf.reduce_any(tf.strings.length(options) > 0, axis=1)),
                True,
                message="every item needs at least one non-empty option "
                "(an empty string marks an absent option)",
            ),
        ]
        with tf.control_dependencies(checks):
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

    def _score(self, token_ids, segment_ids, padding_mask):
        logits = self.model(
            {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask},
            training=False,
        )
        logits = tf.cast(logits, tf.float32)
        present = tf.reduce_any(padding_mask > 0, axis=-1)
        probabilities = tf.where(present, tf.nn.softmax(logits, axis=-1), 0.0)
        return {
            "probabilities": probabilities,
            "logits": logits,
            "prediction": tf.argmax(logits, axis=-1, output_type=tf.int64),
        }

    @tf.function(input_signature=[_TEXT, _TEXT, _OPTIONS])
    def serving_default(self, context, question, options):
        packed = self._pack(context, question, options)
        return self._score(packed["token_ids"], packed["segment_ids"], packed["padding_mask"])

    @tf.function(input_signature=[_IDS, _IDS, _IDS])
    def score_ids(self, token_ids, segment_ids, padding_mask):
        checks = [
            tf.debugging.assert_equal(
                tf.reduce_all(tf.reduce_any(tf.reduce_any(padding_mask > 0, -1), -1)),
                True,
                message="every item needs at least one option with a non-zero padding_mask",
            ),
            tf.debugging.assert_less_equal(
                tf.shape(token_ids)[-1],
                self.max_seq_length,
                message="sequences are longer than the exported max_seq_length",
            ),
            tf.debugging.assert_less(
                tf.reduce_max(token_ids),
                self.model.config.vocab_size,
                message="token_ids out of the vocabulary",
            ),
            tf.debugging.assert_non_negative(token_ids, message="negative token_ids"),
        ]
        with tf.control_dependencies(checks):
            token_ids = tf.identity(token_ids)
        return self._score(token_ids, segment_ids, padding_mask)

    @tf.function(input_signature=[_TEXT, _TEXT, _OPTIONS])
    def tokenize(self, context, question, options):
        packed = self._pack(context, question, options)
        pieces = self.tokenizer.id_to_token(packed["token_ids"])
        return packed | {"pieces": tf.where(packed["padding_mask"] > 0, pieces, "")}
