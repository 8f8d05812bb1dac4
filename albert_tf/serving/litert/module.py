"""`LiteRTModule`: what the ``.tflite`` file computes, before conversion."""

from __future__ import annotations

import tensorflow as tf

from albert_tf.serving.id_checks import check_max_seq_length
from albert_tf.serving.litert.text import (
    SentencePieceIds,
    WordPieceIds,
    byte_lengths,
    prepend_space,
    split_at_blanks,
)


class LiteRTModule(tf.Module):
    """What the ``.tflite`` file computes (`export_litert` converts it).

    Args:
        model: an `AlbertMultipleChoice`.
        tokenizer: its SentencePiece or WordPiece `Tokenizer`.
        max_seq_length, max_qa_length, context_keep: as for
            `albert_tf.tasks.multiple_choice.data.pack_multiple_choice`.
        max_options: K, the fixed width of ``options``.

    Example:
        >>> module = LiteRTModule(model, tok, 128, 64, max_options=2)  # doctest: +SKIP
        >>> module.tokenize(tf.constant(["It rains."]), tf.constant(["Take _."]),
        ...                 tf.constant(["an umbrella", "ice"]))["token_ids"].shape
        ... # doctest: +SKIP
        TensorShape([1, 2, 128])
    """

    def __init__(
        self,
        model,
        tokenizer,
        max_seq_length: int,
        max_qa_length: int,
        context_keep: str = "start",
        max_options: int = 4,
    ):
        super().__init__(name="albert_litert")
        check_max_seq_length(model, max_seq_length)
        if context_keep not in ("start", "end"):
            raise ValueError(f"context_keep must be 'start' or 'end', got {context_keep!r}")
        if not 0 < max_qa_length <= max_seq_length - 3:
            raise ValueError(
                f"need 0 < max_qa_length <= max_seq_length - 3, got {max_qa_length} "
                f"and {max_seq_length}"
            )
        self.model = model
        self.ids = (
            SentencePieceIds(tokenizer)
            if tokenizer.kind == "sentencepiece"
            else WordPieceIds(tokenizer)
        )
        self.max_seq_length = max_seq_length
        self.max_qa_length = max_qa_length
        self.context_keep = context_keep
        self.cls_id, self.sep_id, self.pad_id = tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id
        self.max_options = max_options
        # A fixed option count keeps every encoder shape static, which XNNPACK needs.
        spec = [
            tf.TensorSpec([1], tf.string, name="context"),
            tf.TensorSpec([1], tf.string, name="question"),
            tf.TensorSpec([max_options], tf.string, name="options"),
        ]
        self.serving_default = tf.function(self._serve, input_signature=spec)
        self.tokenize = tf.function(self._tokenize, input_signature=spec)

    def _qa(self, question, options) -> tuple[tf.Tensor, tf.Tensor]:
        """`build_qa` for every option, tokenised: (ids, row_splits [K + 1]).

        LiteRT cannot join strings, so the question's parts and the options are
        turned into normalised characters (`CharacterText`), read alternately
        (p0 o p1 o ... pk; without a blank: question, " ", option) with numeric
        ops, and turned back into text for the tokenizer.
        """
        text = self.ids.text
        parts, has_blank = split_at_blanks(question)
        part_chars, part_splits = text.ids(parts)
        # Options with a leading space, for the "question option" case.
        opt_chars, opt_splits = prepend_space(*text.ids(options))
        skip = tf.cast(has_blank, tf.int32)
        n_parts = tf.shape(part_splits)[0] - 1
        segment = tf.range(2 * n_parts - 1)
        is_option = (segment % 2 == 1)[None, :]
        part = segment // 2
        part_len = tf.gather(part_splits[1:] - part_splits[:-1], part)[None, :]
        opt_len = (opt_splits[1:] - opt_splits[:-1] - skip)[:, None]
        seg_len = tf.where(is_option, opt_len, part_len)  # [K, segments]
        seg_begin = tf.where(
            is_option,
            (tf.shape(part_chars)[0] + opt_splits[:-1] + skip)[:, None],
            tf.gather(part_splits[:-1], part)[None, :],
        )
        seg_end = tf.cumsum(seg_len, axis=1)
        pool = tf.concat([part_chars, opt_chars], axis=0)
        rows = tf.shape(opt_len)[0]
        splits = tf.concat([[0], tf.cumsum(seg_end[:, -1])], axis=0)
        # Each output character: its row, its place in the row, its segment.
        i = tf.range(splits[-1])
        row = tf.reduce_sum(tf.cast(i[:, None] >= splits[None, 1:rows], tf.int32), axis=1)
        t = tf.expand_dims(i - tf.gather(splits, row), -1)  # [n, 1]
        end = tf.gather(seg_end, row)  # [n, segments]
        first = end - tf.gather(seg_len, row)
        in_segment = (t < end) & (t >= first)
        index = tf.reduce_sum(tf.where(in_segment, t - first + tf.gather(seg_begin, row), 0), 1)
        return self.ids(text.strings(tf.gather(pool, index), splits))

    def _pack(self, context, question, options) -> dict[str, tf.Tensor]:
        seq = self.max_seq_length
        present = byte_lengths(options) > 0  # [K]
        ctx, _ = self.ids(context)
        qa, qa_splits = self._qa(question, options)
        ctx_len = tf.shape(ctx)[0]
        qa_len = qa_splits[1:] - qa_splits[:-1]
        kept_qa = tf.where(present, tf.minimum(qa_len, self.max_qa_length), 0)
        qa_start = qa_splits[1:] - kept_qa  # the last max_qa_length pieces
        budget = tf.where(present, seq - 3 - kept_qa, 0)
        kept_ctx = tf.minimum(ctx_len, budget)
        ctx_start = ctx_len - kept_ctx if self.context_keep == "end" else tf.zeros_like(kept_ctx)
        total = tf.where(present, 3 + kept_ctx + kept_qa, 0)[:, None]  # [K, 1]
        kept_ctx = kept_ctx[:, None]
        pos = tf.range(seq)[None, :]  # [1, S]
        # A pad id appended so that gathers of an empty context or qa stay in range.
        ctx_pool = tf.concat([ctx, [self.pad_id]], axis=0)
        qa_pool = tf.concat([qa, [self.pad_id]], axis=0)
        ctx_at = tf.gather(ctx_pool, tf.clip_by_value(ctx_start[:, None] + pos - 1, 0, ctx_len))
        qa_index = qa_start[:, None] + pos - 2 - kept_ctx
        qa_at = tf.gather(qa_pool, tf.clip_by_value(qa_index, 0, tf.shape(qa)[0]))
        in_mask = pos < total
        ids = tf.where(
            pos == 0,
            self.cls_id,
            tf.where(
                pos <= kept_ctx,
                ctx_at,
                tf.where((pos == 1 + kept_ctx) | (pos == total - 1), self.sep_id, qa_at),
            ),
        )
        return {
            "token_ids": tf.where(in_mask, ids, self.pad_id)[None],
            "segment_ids": tf.cast(in_mask & (pos > 1 + kept_ctx), tf.int32)[None],
            "padding_mask": tf.cast(in_mask, tf.int32)[None],
        }

    def _tokenize(self, context, question, options):
        return self._pack(context, question, options)

    def _serve(self, context, question, options):
        packed = self._pack(context, question, options)
        logits = tf.cast(self.model(packed, training=False), tf.float32)  # [1, K]
        present = tf.reduce_any(packed["padding_mask"] > 0, axis=-1)
        probabilities = tf.where(present, tf.nn.softmax(logits, axis=-1), 0.0)
        return {
            "probabilities": probabilities,
            "prediction": tf.argmax(logits, axis=-1, output_type=tf.int32),
        }
