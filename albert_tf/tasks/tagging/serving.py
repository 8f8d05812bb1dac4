"""The SavedModel's `tf.Module` for a tagger: raw text in, entities as character spans out."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from albert_tf.models.backbone import BACKBONE_INPUTS
from albert_tf.serving.id_checks import at_most_chars, check_max_seq_length
from albert_tf.tasks.tagging.data import check_tokenizer, pack_tagging, tag_scheme

_TEXT = tf.TensorSpec([None], tf.string)

# A limit on one text, checked before tokenisation so that a hostile request fails
# in milliseconds; a longer document is sent as several texts (paragraphs). The
# export records it in assets.extra/albert_tf.json.
MAX_TEXT_CHARS = 20_000
LIMITS = {"max_text_chars": MAX_TEXT_CHARS}


class TaggerServingModule(tf.Module):
    """Signatures of the exported tagging SavedModel.

    * ``serving_default(text [B])`` → ``starts``, ``ends`` int32 [B, E]: each
      entity's characters in its text (Unicode code points, end exclusive),
      −1 padded; ``labels`` string [B, E] ("" padded); ``scores`` float32
      [B, E] (the mean probability of the entity's word tags; 0 padded). E is
      the most entities of any text in the batch. A text longer than one
      window (``max_seq_length - 2`` pieces) is tagged window by window.
    * ``tokenize(text [B])`` → ``pieces`` string [B, P] ("" padded),
      ``starts``/``ends`` int32 [B, P] (−1 padded) and ``word_starts`` bool:
      what the model reads, and where each piece came from.

    Each word's tag is its most probable one; with a CRF head, the best chain
    of tags over the text's words (Viterbi, windows joined). Entities are then
    decoded as conlleval and seqeval decode tags (`tag_scheme`): an
    entity opens at ``B-X`` or ``S-X``, or at ``I-X``/``E-X`` after ``O``, after
    ``E-``/``S-`` or after another type. An empty batch
    gets empty outputs. A text past `LIMITS` fails with ``InvalidArgumentError``
    naming the limit, before tokenisation.

    Args:
        model: an `AlbertTokenClassifier`.
        tokenizer: its tokenizer (with ``tokenize_with_offsets``).
        max_seq_length: longest packed window, [CLS] and [SEP] included.
        tag_names: the model's tags: ``O`` and BIO or BIOES tags, in any order.

    Example:
        >>> module = TaggerServingModule(model, tok, 128, ["O", "B-PER", "I-PER"])  # doctest: +SKIP
        >>> module.serving_default(tf.constant(["江泽民在北京"]))["labels"]        # doctest: +SKIP
        <tf.Tensor: shape=(1, 1), dtype=string, numpy=array([[b'PER']], dtype=object)>
    """

    #: The SavedModel's signatures, by method name.
    SIGNATURES = ("serving_default", "tokenize")

    def __init__(self, model, tokenizer, max_seq_length: int, tag_names: Sequence[str]):
        super().__init__(name="albert_tagger")
        check_max_seq_length(model, max_seq_length)
        check_tokenizer(tokenizer)
        if len(tag_names) != model.num_tags:
            raise ValueError(f"{len(tag_names)} tag names for {model.num_tags} tags: {tag_names}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        scheme = tag_scheme(tag_names)
        self.entity_types = tf.constant(scheme.types or [""], tf.string)
        # Per tag: its entity type's index (-1 for O), whether it opens an entity
        # (B-, S-) and whether an entity ends with it (E-, S-).
        self.tag_type = tf.constant(scheme.type_of, tf.int32)
        self.tag_begins = tf.constant(scheme.opens)
        self.tag_closes = tf.constant(scheme.closes)

    @classmethod
    def for_export(
        cls, model, tokenizer, settings: dict, max_seq_length: int, max_qa_length: int | None = None
    ) -> tuple[TaggerServingModule, dict, dict]:
        """The module an export serves (``settings``: ``finetune.json``), what
        ``assets.extra/albert_tf.json`` records of it, and ``labels.json`` (the tags)."""
        tag_names = list(settings.get("label_names", []))
        module = cls(model, tokenizer, max_seq_length, tag_names)
        metadata = {"label_names": tag_names, "limits": LIMITS}
        return module, metadata, {"labels.json": tag_names}

    def _pack(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        check = at_most_chars(
            text, MAX_TEXT_CHARS, "text", "; send a long document as several texts"
        )
        with tf.control_dependencies([check]):
            text = tf.identity(text)
        return pack_tagging(text, self.tokenizer, self.max_seq_length)

    def _piece_probabilities(self, packed: dict[str, tf.Tensor]) -> tf.Tensor:
        """float32 [pieces of all texts, tags], in the texts' piece order."""
        token_ids = packed["token_ids"]
        num_tags = self.model.num_tags

        def run_model():
            features = {key: packed[key] for key in BACKBONE_INPUTS}
            return tf.cast(self.model(features, training=False), tf.float32)

        def no_windows():  # only empty texts: the encoder cannot run on zero rows
            return tf.zeros([0, tf.shape(token_ids)[1], num_tags], tf.float32)

        logits = tf.cond(tf.shape(token_ids)[0] > 0, run_model, no_windows)
        pieces = tf.reduce_sum(packed["padding_mask"], -1) - 2
        width = tf.maximum(tf.shape(logits)[1] - 1, 0)
        # Each window's pieces sit after its [CLS]; windows are in text order.
        return tf.boolean_mask(tf.nn.softmax(logits)[:, 1:], tf.sequence_mask(pieces, width))

    def _entities(self, packed: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return self.decode(self._piece_probabilities(packed), packed)

    def decode(
        self, probabilities: tf.Tensor, packed: dict[str, tf.Tensor]
    ) -> dict[str, tf.Tensor]:
        """The entities of `serving_default` from tag probabilities [pieces of all
        texts, tags] and `pack_tagging`'s offsets."""
        is_word = packed["word_starts"].flat_values
        starts = packed["piece_starts"].flat_values
        ends = packed["piece_ends"].flat_values
        rows = tf.cast(packed["piece_ids"].value_rowids(), tf.int32)
        nrows = packed["piece_ids"].nrows()

        # Words: a word-start piece and the continuation pieces after it.
        word_of_piece = tf.cumsum(tf.cast(is_word, tf.int32)) - 1
        num_words = tf.reduce_sum(tf.cast(is_word, tf.int32))
        word_end = tf.math.unsorted_segment_max(ends, word_of_piece, num_words)
        first = tf.where(is_word)[:, 0]
        word_probabilities = tf.gather(probabilities, first)
        tag = self._word_tags(word_probabilities, tf.gather(rows, first), nrows)
        word = {
            "start": tf.gather(starts, first),
            "row": tf.gather(rows, first),
            "confidence": tf.gather(word_probabilities, tag, batch_dims=1),
            "type": tf.gather(self.tag_type, tag),
        }
        # conlleval's chunks: B-X and S-X open one; so does I-X or E-X after O, E-,
        # S-, another type or another text; any other tagged word continues the
        # open one.
        previous_type = tf.concat([[-1], word["type"][:-1]], 0)
        previous_row = tf.concat([[-1], word["row"][:-1]], 0)
        previous_closes = tf.concat([[False], tf.gather(self.tag_closes, tag)[:-1]], 0)
        inside = word["type"] >= 0
        opens = inside & (
            tf.gather(self.tag_begins, tag)
            | previous_closes
            | (previous_type != word["type"])
            | (previous_row != word["row"])
        )
        entity_of_word = tf.cumsum(tf.cast(opens, tf.int32)) - 1
        num_entities = tf.reduce_sum(tf.cast(opens, tf.int32))
        members = tf.where(inside)[:, 0]
        member_entity = tf.gather(entity_of_word, members)

        def per_entity(reduce, values):
            return reduce(tf.gather(values, members), member_entity, num_entities)

        heads = tf.where(opens)[:, 0]
        entity_rows = tf.cast(tf.gather(word["row"], heads), tf.int64)

        def padded(values, default):
            ragged = tf.RaggedTensor.from_value_rowids(values, entity_rows, nrows=nrows)
            return ragged.to_tensor(default_value=default)

        return {
            "starts": padded(per_entity(tf.math.unsorted_segment_min, word["start"]), -1),
            "ends": padded(per_entity(tf.math.unsorted_segment_max, word_end), -1),
            "labels": padded(tf.gather(self.entity_types, tf.gather(word["type"], heads)), ""),
            "scores": padded(per_entity(tf.math.unsorted_segment_mean, word["confidence"]), 0.0),
        }

    def _word_tags(self, probabilities: tf.Tensor, rows: tf.Tensor, nrows) -> tf.Tensor:
        """int32 [words of all texts]: each word's tag from its probabilities [words,
        tags]; with a CRF head, the best chain over each text's words."""
        crf = self.model.tagger_head.crf
        if crf is None:
            return tf.argmax(probabilities, -1, output_type=tf.int32)
        # The smallest normal float32: a probability that underflowed to 0 stays finite.
        scores = tf.math.log(tf.maximum(probabilities, 1.1754944e-38))
        per_text = tf.RaggedTensor.from_value_rowids(scores, tf.cast(rows, tf.int64), nrows=nrows)
        mask = tf.sequence_mask(per_text.row_lengths())
        chains = crf.decode(per_text.to_tensor(), mask)
        return tf.boolean_mask(chains, mask)

    @tf.function(input_signature=[_TEXT])
    def serving_default(self, text):
        return self._entities(self._pack(text))

    @tf.function(input_signature=[_TEXT])
    def tokenize(self, text):
        packed = self._pack(text)
        pieces = self.tokenizer.id_to_token(packed["piece_ids"])
        return {
            "pieces": pieces.to_tensor(default_value=""),
            "starts": packed["piece_starts"].to_tensor(default_value=-1),
            "ends": packed["piece_ends"].to_tensor(default_value=-1),
            "word_starts": packed["word_starts"].to_tensor(default_value=False),
        }
