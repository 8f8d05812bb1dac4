"""Fine-tuning `AlbertSpanQA` for extractive question answering, as the official ``run_squad``.

The loss is the mean of the start's and the end's cross-entropy over each
window's positions ([CLS] when the window does not hold the answer); the best
checkpoint by dev F1 (SQuAD's, `albert_tf.training.finetuning.metrics.squad_scores`;
Chinese questions are also scored by CMRC 2018's own script, `cmrc_scores`).
Questions are answered across their windows by the best start + end logit, by
the SavedModel's decoding (`albert_tf.tasks.span_qa.decoding`); with impossible
questions (SQuAD 2.0) a "no answer" threshold on the null score's margin is
chosen on dev and saved for serving.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from albert_tf.checkpoints.saved_format import load_task_model, read_finetune_settings
from albert_tf.tasks.span_qa import SPEC
from albert_tf.tasks.span_qa.data import QAExample
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
    encode_span_qa,
    span_qa_batches,
)
from albert_tf.tokenizers.offsets import check_offsets
from albert_tf.training.finetuning.metrics import (
    best_no_answer_threshold,
    cmrc_scores,
    squad_scores,
)
from albert_tf.training.finetuning.trainer import FineTuningTrainer

#: The threshold that leaves every question unanswered (every margin exceeds it).
NEVER_ANSWER = -1e30


@dataclasses.dataclass(frozen=True)
class Prediction:
    """One candidate answer: characters of the context (end exclusive; −1 for no
    answer), its text, its start + end logit and its probability in its window."""

    text: str
    start: int
    end: int
    score: float
    probability: float


class SpanQATrainer(FineTuningTrainer):
    """Fine-tunes a span QA model and keeps its best dev checkpoint by F1.

    Args (besides `FineTuningTrainer`'s):
        model: an `AlbertSpanQA`.
        max_query_length, doc_stride: how questions and long contexts are cut
            into windows (`Windowing`).
        max_answer_length: longest answer, in pieces.
        n_best_size: candidate spans kept per window and per question.
        no_answer_threshold: answer "" when the null score beats the best span
            by more than this (None: always answer, SQuAD 1.1).
        choose_threshold: during `fit`, choose ``no_answer_threshold`` on each
            dev evaluation when dev has impossible questions (SQuAD 2.0's best F1
            threshold); the best checkpoint's is saved with it and used after `fit`.

    Example:
        >>> trainer = SpanQATrainer(model, tokenizer, output_dir="runs/qa")  # doctest: +SKIP
        >>> trainer.fit(train_items, dev_items)["best_f1"]                  # doctest: +SKIP
        0.81
    """

    item_type = QAExample
    metric = "f1"
    label_spec = tf.TensorSpec([None, 2], tf.int32)

    def __init__(
        self,
        model,
        tokenizer,
        *,
        max_query_length: int = MAX_QUERY_LENGTH,
        doc_stride: int = DOC_STRIDE,
        max_answer_length: int = MAX_ANSWER_LENGTH,
        n_best_size: int = N_BEST_SIZE,
        no_answer_threshold: float | None = None,
        choose_threshold: bool = True,
        **kwargs,
    ):
        check_offsets(tokenizer, "span QA")  # before anything is built: a must
        super().__init__(model, tokenizer, **kwargs)
        self.windowing = Windowing(self.max_seq_length, max_query_length, doc_stride)
        if max_answer_length < 1 or n_best_size < 1:
            raise ValueError(
                f"max_answer_length ({max_answer_length}) and n_best_size ({n_best_size}) "
                "must be at least 1"
            )
        self.max_answer_length, self.n_best_size = max_answer_length, n_best_size
        #: What `predict` and `evaluate` use, and `task_settings` saves.
        self.no_answer_threshold = no_answer_threshold
        self.choose_threshold = choose_threshold
        self._fitting = False

    def encode(self, items: Sequence[QAExample]) -> list[dict]:
        return encode_span_qa(items, self.tokenizer, self.windowing)

    def batches(self, encoded, batch_size, shuffle=False, seed=0):
        windows = [window for item in encoded for window in item["windows"]]
        return span_qa_batches(windows, batch_size, shuffle=shuffle, seed=seed)

    def training_units(self, encoded) -> int:
        return sum(len(item["windows"]) for item in encoded)

    def trained_variables(self) -> list:
        # The pooler ([CLS] → tanh) feeds no span; Hugging Face's QA model has none.
        pooler = {id(v) for v in self.model.backbone.pooler.trainable_variables}
        return [v for v in self.model.trainable_variables if id(v) not in pooler]

    def loss_sums(self, logits, labels):
        start = tf.nn.sparse_softmax_cross_entropy_with_logits(labels[:, 0], logits[..., 0])
        end = tf.nn.sparse_softmax_cross_entropy_with_logits(labels[:, 1], logits[..., 1])
        guess = tf.argmax(logits, 1, output_type=tf.int32)  # [batch, 2]
        right = tf.reduce_all(guess == labels, -1)
        return tf.reduce_sum(start + end) / 2, tf.reduce_sum(tf.cast(right, tf.float32))

    def _answers(self, encoded: list[dict]) -> tuple[dict, float]:
        """`best_answers` of every item (its `n_best_size` best spans over all its
        windows, its "no answer" and their margin), by the SavedModel's decoding;
        the summed window loss."""
        windows = [w for item in encoded for w in item["windows"]]
        order = sorted(range(len(windows)), key=lambda k: len(windows[k]["token_ids"]))
        # Each window's `best_spans`, in window order (batches go by length).
        found: list[dict] = [{}] * len(windows)
        loss = 0.0
        size, k = self.eval_batch_size, self.n_best_size
        for begin in range(0, len(order), size):
            batch = order[begin : begin + size]
            rows = [windows[w] for w in batch]
            features, labels = next(span_qa_batches(rows, len(rows)))
            logits = self.logits(features)[:, : features["token_ids"].shape[1]]
            loss += float(self.loss_sums(logits, tf.constant(labels))[0])
            mask = context_mask(
                tf.shape(logits)[1],
                tf.constant([w["context_offset"] for w in rows], tf.int32),
                tf.constant([w["window_length"] for w in rows], tf.int32),
            )
            spans = {
                key: v.numpy()
                for key, v in best_spans(logits, mask, self.max_answer_length, k).items()
            }
            for row, w in enumerate(batch):
                found[w] = {key: value[row] for key, value in spans.items()}

        def stacked(key: str) -> tf.Tensor:
            values = [f[key] for f in found]
            if values[0].ndim:  # a short window has fewer than k spans: pad with none (−inf)
                fill = -np.inf if key == "score" else 0
                values = [np.pad(v, (0, k - len(v)), constant_values=fill) for v in values]
            return tf.constant(np.stack(values))

        def ragged(key: str) -> tf.RaggedTensor:
            return tf.RaggedTensor.from_row_lengths(
                np.concatenate([item[key] for item in encoded]),
                [len(item[key]) for item in encoded],
            )

        spans = {key: stacked(key) for key in found[0]}
        info = {
            "window_example": [i for i, item in enumerate(encoded) for _ in item["windows"]],
            "window_start": [w["window_start"] for w in windows],
            "context_offset": [w["context_offset"] for w in windows],
        }
        answers = best_answers(
            spans,
            {key: tf.constant(values, tf.int32) for key, values in info.items()},
            ragged("word_starts"),
            ragged("word_ends"),
            k,
        )
        return answers, loss

    def _candidates(self, encoded: list[dict], answers: dict) -> list[list[Prediction]]:
        """Per item, its n-best answers (best first) from `best_answers`."""
        lists = zip(
            *(answers[key].to_list() for key in ("starts", "ends", "scores", "probabilities")),
            strict=True,
        )
        return [
            [
                Prediction(item["context"][start:end], start, end, score, probability)
                for start, end, score, probability in zip(*found, strict=True)
            ]
            for item, found in zip(encoded, lists, strict=True)
        ]

    def predict(self, data, no_answer_threshold: float | None = None) -> list[list[Prediction]]:
        """Each question's n-best answers, best first; the first is the answer, or ""
        (no answer, start −1) when the null score wins (``no_answer_threshold``, else
        the trainer's chosen one)."""
        encoded = self._encoded(data)
        threshold = (
            no_answer_threshold if no_answer_threshold is not None else self.no_answer_threshold
        )
        if not encoded:
            return []
        answers, _ = self._answers(encoded)
        answered = choose(answers, threshold)["answered"].numpy()
        nulls = zip(answers["null_score"].numpy(), answers["null_probability"].numpy(), strict=True)
        out = []
        for ranked, yes, (score, probability) in zip(
            self._candidates(encoded, answers), answered, nulls, strict=True
        ):
            null = Prediction("", -1, -1, float(score), float(probability))
            out.append(ranked if yes else [null, *ranked])
        return out

    def evaluate(self, data) -> dict:
        """SQuAD ``exact_match`` and ``f1`` (0 to 1), ``loss`` (per window), ``count``;
        with impossible questions, the per-kind scores and ``no_answer_threshold``
        (chosen here on dev during `fit`, with ``choose_threshold``); with Chinese
        questions (``lang`` "zh"), CMRC 2018's ``cmrc_exact_match`` and ``cmrc_f1`` over
        them (and ``cmrc_count`` when not every question is Chinese)."""
        encoded = self._encoded(data)
        if not encoded:
            raise ValueError("evaluate() needs at least one question")
        if not all(item["labelled"] for item in encoded):
            raise ValueError(
                "evaluate() needs answered questions: a file without answers is read as "
                "unlabelled (predict() answers it)"
            )
        answers, loss = self._answers(encoded)
        candidates = self._candidates(encoded, answers)
        golds = [item["answers"] for item in encoded]
        impossible = any(g == [""] for g in golds)
        if self._fitting and self.choose_threshold and impossible:
            margins = [float(m) for m in answers["margin"].numpy()]
            best = [c[0].text if c else "" for c in candidates]
            threshold, _ = best_no_answer_threshold(golds, best, margins)
            self.no_answer_threshold = max(threshold, NEVER_ANSWER)  # JSON has no -inf
        answered = choose(answers, self.no_answer_threshold)["answered"].numpy()
        chosen = [c[0].text if yes else "" for c, yes in zip(candidates, answered, strict=True)]
        scores = squad_scores(golds, chosen)
        chinese = [i for i, item in enumerate(encoded) if item["lang"] == "zh"]
        if chinese:
            cmrc = cmrc_scores([golds[i] for i in chinese], [chosen[i] for i in chinese])
            scores |= {"cmrc_exact_match": cmrc["exact_match"], "cmrc_f1": cmrc["f1"]}
            if len(chinese) < len(encoded):
                scores["cmrc_count"] = cmrc["count"]
        windows = sum(len(item["windows"]) for item in encoded)
        scores |= {"loss": loss / max(windows, 1)}
        if impossible:
            scores["no_answer_threshold"] = self.no_answer_threshold
        return scores

    def fit(self, train, dev) -> dict:
        """`FineTuningTrainer.fit`; afterwards the trainer's model and no-answer
        threshold are the best checkpoint's (what its export serves)."""
        dev = self._encoded(dev)
        if self.choose_threshold and not any(item["answers"] == [""] for item in dev):
            self.no_answer_threshold = None  # nothing to choose it on: always answer
        self._fitting = True
        try:
            result = super().fit(train, dev)
        finally:
            self._fitting = False
        best = load_task_model(result["best_dir"], SPEC)
        self.model.set_weights(best.get_weights())
        self.no_answer_threshold = read_finetune_settings(result["best_dir"]).get(
            "no_answer_threshold"
        )
        return result

    def task_settings(self) -> dict:
        return {
            "task": SPEC.name,
            "max_query_length": self.windowing.max_query_length,
            "doc_stride": self.windowing.doc_stride,
            "max_answer_length": self.max_answer_length,
            "n_best_size": self.n_best_size,
            "no_answer_threshold": self.no_answer_threshold,
        }
