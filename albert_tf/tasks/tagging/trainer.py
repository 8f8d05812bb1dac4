"""Fine-tuning `AlbertTokenClassifier` for named entities, as Model Garden's tagging task.

Cross-entropy over the BIO tags of each word's first piece (Chinese: of each
character), a mean over those pieces; with a CRF head, the chain's negative
log-likelihood instead, over the same pieces. A long text is read in overlapping
windows, and each piece is scored in the one window where it has the most
context (`pack_tagging`), in training, evaluation and the SavedModel alike.
The best checkpoint by dev entity F1 (exact spans and types, as conlleval and
seqeval count them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from albert_tf.tasks.tagging import SPEC
from albert_tf.tasks.tagging.data import Entity, TaggingExample, pack_sentences
from albert_tf.tasks.tagging.decoding import (
    aggregate_pieces,
    check_word_aggregation,
    decode_entities,
    tag_scheme,
)
from albert_tf.tasks.tagging.preprocessing import (
    IGNORED,
    check_stride,
    encode_tagging,
    half_window,
    tagging_batches,
)
from albert_tf.tokenizers.offsets import check_offsets
from albert_tf.training.finetuning.metrics import entity_scores
from albert_tf.training.finetuning.trainer import FineTuningTrainer


def _ragged(rows: list[np.ndarray]) -> tf.RaggedTensor:
    """Rows of equal trailing shape (words, or words × tags) as one ragged tensor."""
    return tf.RaggedTensor.from_row_lengths(np.concatenate(rows), [len(row) for row in rows])


class TaggingTrainer(FineTuningTrainer):
    """Fine-tunes a tagger and keeps its best dev checkpoint by entity F1.

    Args (besides `FineTuningTrainer`'s):
        model: an `AlbertTokenClassifier`.
        tag_names: the tag of each of the model's outputs (`tag_names` makes ``O``
            then ``B-X``, ``I-X`` per type; a converted tagger's come in any order,
            `tag_scheme`); saved with the model as its ``label_names``.
        stride: pieces between the starts of a long text's windows, 1 to
            ``max_seq_length - 2`` (default: `half_window`); saved as
            ``tagging_stride``, which the export serves.
        pack_chars: above 0, the training sentences (never dev or test ones) are
            joined in their order into texts of up to this many characters
            (`pack_sentences`), so that the model reads sentences beside their
            neighbours, as it will read pasted paragraphs; saved as
            ``tagging_pack_chars``.
        word_aggregation: how a word's pieces give its tag probabilities when
            evaluating (`aggregate_pieces`; training labels a word's first piece);
            saved as ``word_aggregation``, which the export serves.

    Example:
        >>> trainer = TaggingTrainer(model, tokenizer, tag_names=["O", "B-PER", "I-PER"],
        ...                          output_dir="runs/ner")               # doctest: +SKIP
        >>> trainer.fit(train_items, dev_items)["best_f1"]              # doctest: +SKIP
        0.91
    """

    item_type = TaggingExample
    metric = "f1"
    label_spec = tf.TensorSpec([None, None], tf.int32)
    label_padding = IGNORED

    def __init__(
        self,
        model,
        tokenizer,
        *,
        tag_names: Sequence[str],
        stride: int | None = None,
        pack_chars: int = 0,
        word_aggregation: str = "first",
        **kwargs,
    ):
        check_offsets(tokenizer, "tagging")  # before anything is built: a must
        super().__init__(model, tokenizer, **kwargs)
        self.stride = check_stride(
            half_window(self.max_seq_length) if stride is None else stride, self.max_seq_length
        )
        if pack_chars < 0:
            raise ValueError(f"tagging_pack_chars must be 0 (off) or more, got {pack_chars}")
        self.pack_chars = pack_chars
        check_word_aggregation(word_aggregation)
        self.word_aggregation = word_aggregation
        self.scheme = tag_scheme(tag_names)  # refuses tags it cannot decode
        if len(tag_names) != model.num_tags:
            raise ValueError(
                f"{len(tag_names)} tag names for a model with {model.num_tags} tags: "
                f"{list(tag_names)}"
            )
        self.tag_names = list(tag_names)
        self._decode_graph = None

    def encode(self, items: Sequence[TaggingExample]) -> list[dict]:
        return encode_tagging(
            items, self.tokenizer, self.max_seq_length, self.tag_names, self.stride
        )

    def fit(self, train, dev) -> dict:
        if self.pack_chars and train and isinstance(train[0], TaggingExample):
            packed = pack_sentences(train, self.pack_chars)
            print(
                f"train: {len(train)} texts joined in order into {len(packed)} of up to "
                f"{self.pack_chars} characters (--tagging_pack_chars)",
                flush=True,
            )
            train = packed
        return super().fit(train, dev)

    def batches(self, encoded, batch_size, shuffle=False, seed=0):
        windows = [window for item in encoded for window in item["windows"]]
        return tagging_batches(windows, batch_size, shuffle=shuffle, seed=seed)

    def training_units(self, encoded) -> int:
        return sum(len(item["windows"]) for item in encoded)

    def trained_variables(self) -> list:
        # The pooler ([CLS] → tanh) feeds no tag; Hugging Face's tagger has none.
        pooler = {id(v) for v in self.model.backbone.pooler.trainable_variables}
        return [v for v in self.model.trainable_variables if id(v) not in pooler]

    def example_count(self, labels):
        return tf.reshape(tf.reduce_sum(tf.cast(labels != IGNORED, tf.float32)), [1])

    def loss_sums(self, logits, labels):
        scored = tf.cast(labels != IGNORED, tf.float32)
        right = tf.cast(tf.argmax(logits, -1, output_type=tf.int32) == labels, tf.float32)
        crf = self.model.tagger_head.crf
        if crf is not None:  # each window's chain of scored pieces, one loss per window
            loss = -tf.reduce_sum(crf.log_likelihood(logits, labels, labels != IGNORED))
            return loss, tf.reduce_sum(right * scored)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.maximum(labels, 0), logits)
        return tf.reduce_sum(losses * scored), tf.reduce_sum(right * scored)

    def _piece_probabilities(self, encoded: list[dict]) -> tuple[list[np.ndarray], float]:
        """Per item, tag probabilities [pieces, tags] of its pieces; the summed loss."""
        windows = [(i, w) for i, item in enumerate(encoded) for w in item["windows"]]
        # Windows sorted by length into batches (little padding); put back in order below.
        order = sorted(range(len(windows)), key=lambda k: len(windows[k][1]["token_ids"]))
        pieces: list[np.ndarray | None] = [None] * len(windows)
        loss = 0.0
        size = self.eval_batch_size
        for begin in range(0, len(order), size):
            batch = order[begin : begin + size]
            features, tags = next(tagging_batches([windows[k][1] for k in batch], len(batch)))
            logits = self.logits(features)  # longer than the tags under XLA
            loss += float(self.loss_sums(logits[:, : tags.shape[1]], tags)[0])
            probabilities = tf.nn.softmax(logits, -1).numpy()
            for row, k in enumerate(batch):
                owned = windows[k][1]["owned"]  # the pieces this window speaks for
                pieces[k] = probabilities[row, : len(owned)][owned]
        per_item: list[list[np.ndarray]] = [[] for _ in encoded]
        for (i, _), p in zip(windows, pieces, strict=True):
            per_item[i].append(p)
        num_tags = len(self.tag_names)
        return [
            np.concatenate(p) if p else np.zeros((0, num_tags), np.float32) for p in per_item
        ], loss

    def _decode(self, encoded: list[dict], probabilities: list[np.ndarray]) -> list[dict]:
        """Per item, its words' ``tags`` and its entities' ``starts``, ``ends``,
        ``labels`` and ``scores``, by the SavedModel's decoding (`decode_entities`;
        with a CRF head, Viterbi over the whole text, windows joined); one graph
        run per `eval_batch_size` items."""
        if self._decode_graph is None:  # one graph for every batch, not eager step by step
            words = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)
            scores = tf.RaggedTensorSpec([None, None, len(self.tag_names)], tf.float32, 1)
            crf = self.model.tagger_head.crf
            self._decode_graph = tf.function(
                lambda p, starts, ends: decode_entities(p, starts, ends, self.scheme, crf),
                input_signature=[scores, words, words],
            )
        decoded = []
        for begin in range(0, len(encoded), self.eval_batch_size):
            items = encoded[begin : begin + self.eval_batch_size]
            chunk = probabilities[begin : begin + self.eval_batch_size]
            found = self._decode_graph(
                _ragged([self._word_rows(item, p) for item, p in zip(items, chunk, strict=True)]),
                _ragged([item["word_start_chars"] for item in items]),
                _ragged([item["word_end_chars"] for item in items]),
            )
            found = {key: value.to_list() for key, value in found.items()}
            decoded += [
                {key: value[row] for key, value in found.items()} for row in range(len(items))
            ]
        return decoded

    def _word_rows(self, item: dict, probabilities: np.ndarray) -> np.ndarray:
        """An item's words' tag probabilities from its pieces' (`aggregate_pieces`)."""
        if self.word_aggregation == "first":
            return probabilities[item["word_pieces"]]
        is_word = np.zeros(len(probabilities), bool)
        is_word[item["word_pieces"]] = True
        return aggregate_pieces(probabilities, is_word, self.word_aggregation).numpy()

    def _entities(self, decoded: dict) -> list[tuple[Entity, float]]:
        """An item's entities (`_decode`), each with its score: the mean over its words of
        their tags' probabilities (with a CRF, the chain's marginals)."""
        return [
            (Entity(start, end, label.decode()), score)
            for start, end, label, score in zip(
                decoded["starts"],
                decoded["ends"],
                decoded["labels"],
                decoded["scores"],
                strict=True,
            )
        ]

    def predict(self, data) -> list[list[tuple[Entity, float]]]:
        """Each item's entities and their scores (`_entities`)."""
        encoded = self._encoded(data)
        probabilities, _ = self._piece_probabilities(encoded)
        return [self._entities(found) for found in self._decode(encoded, probabilities)]

    def evaluate(self, data) -> dict:
        """Entity ``precision``, ``recall`` and ``f1`` (exact span and type), per
        label too; the tag ``loss`` per scored piece; ``count`` (items) and
        ``lost_entities`` (gold entities that start inside a word, untaggable)."""
        encoded = self._encoded(data)
        if not encoded:
            raise ValueError("evaluate() needs at least one item")
        if not all(item["labelled"] for item in encoded):
            raise ValueError(
                "evaluate() needs annotated texts: a file without entity annotations is "
                "read as unlabelled text (predict() tags it)"
            )
        probabilities, loss = self._piece_probabilities(encoded)
        predicted = [
            {(e.start, e.end, e.label) for e, _ in self._entities(found)}
            for found in self._decode(encoded, probabilities)
        ]
        scores = entity_scores([item["entities"] for item in encoded], predicted)
        scored = sum(int((w["tags"] != IGNORED).sum()) for e in encoded for w in e["windows"])
        return scores | {
            "loss": loss / max(scored, 1),
            "count": len(encoded),
            "lost_entities": sum(item["lost"] for item in encoded),
        }

    def task_settings(self) -> dict:
        return {
            "task": SPEC.name,
            "label_names": self.tag_names,
            "tagging_stride": self.stride,
            "tagging_pack_chars": self.pack_chars,
            "word_aggregation": self.word_aggregation,
        }
