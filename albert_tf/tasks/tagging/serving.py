"""The SavedModel's `tf.Module` for a tagger: raw text in, entities as character spans out."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import tensorflow as tf

from albert_tf.models.backbone import BACKBONE_INPUTS
from albert_tf.serving.id_checks import at_most_chars, check_max_seq_length
from albert_tf.tasks.tagging.decoding import (
    check_word_aggregation,
    decode_entities,
    tag_scheme,
    words,
)
from albert_tf.tasks.tagging.preprocessing import check_stride, pack_tagging
from albert_tf.tokenizers.offsets import check_offsets

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
      [B, E] (the mean over the entity's words of their tags' probabilities,
      with a CRF head the chain's marginals; 0 padded). E is
      the most entities of any text in the batch. A text longer than one
      window (``max_seq_length - 2`` pieces) is read in windows ``stride``
      pieces apart, and each piece's tag probabilities are those of the window
      where it has the most context (`pack_tagging`'s ``owned``).
    * ``tokenize(text [B])`` → ``pieces`` string [B, P] ("" padded),
      ``starts``/``ends`` int32 [B, P] (−1 padded) and ``word_starts`` bool:
      what the model reads, and where each piece came from.

    A word's tag probabilities come from its pieces by ``word_aggregation``
    (`aggregate_pieces`); its tag is the most probable one, or with a CRF head, the best chain
    of tags over the text's words (Viterbi, windows joined). Entities are then
    decoded as conlleval and seqeval decode tags
    (`albert_tf.tasks.tagging.decoding`, which the trainer runs too). An empty batch
    gets empty outputs. A text past `LIMITS` fails with ``InvalidArgumentError``
    naming the limit, before tokenisation.

    Args:
        model: an `AlbertTokenClassifier`.
        tokenizer: its tokenizer (with ``tokenize_with_offsets``).
        max_seq_length: longest packed window, [CLS] and [SEP] included.
        tag_names: the model's tags: ``O`` and BIO or BIOES tags, in any order.
        stride: pieces between the starts of a long text's windows (`check_stride`;
            None: ``max_seq_length - 2``, windows that do not overlap).
        word_aggregation: how a word's pieces give its tag probabilities, one of
            `WORD_AGGREGATIONS` (fine-tuning's ``word_aggregation``).

    Example:
        >>> module = TaggerServingModule(model, tok, 128, ["O", "B-PER", "I-PER"])  # doctest: +SKIP
        >>> module.serving_default(tf.constant(["江泽民在北京"]))["labels"]        # doctest: +SKIP
        <tf.Tensor: shape=(1, 1), dtype=string, numpy=array([[b'PER']], dtype=object)>
    """

    #: The SavedModel's signatures, by method name.
    SIGNATURES = ("serving_default", "tokenize")

    def __init__(
        self,
        model,
        tokenizer,
        max_seq_length: int,
        tag_names: Sequence[str],
        stride: int | None = None,
        word_aggregation: str = "first",
    ):
        super().__init__(name="albert_tagger")
        check_word_aggregation(word_aggregation)
        check_max_seq_length(model, max_seq_length)
        check_offsets(tokenizer, "tagging")
        if len(tag_names) != model.num_tags:
            raise ValueError(f"{len(tag_names)} tag names for {model.num_tags} tags: {tag_names}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.stride = check_stride(stride, max_seq_length)
        self.word_aggregation = word_aggregation
        self.scheme = tag_scheme(tag_names)

    @classmethod
    def for_export(
        cls, model, tokenizer, settings: dict, max_seq_length: int, max_qa_length: int | None = None
    ) -> tuple[TaggerServingModule, dict, dict]:
        """The module an export serves (``settings``: ``finetune.json``), what
        ``assets.extra/albert_tf.json`` records of it, and ``labels.json`` (the tags).

        The stride is fine-tuning's ``tagging_stride``, at most a window of the
        export's ``max_seq_length``; a run that recorded none (made before
        strides) is served as it was trained, in windows that do not overlap."""
        tag_names = list(settings.get("label_names", []))
        stride = settings.get("tagging_stride")
        if stride is not None and int(stride) > max_seq_length - 2:
            warnings.warn(
                f"tagging_stride {stride} is longer than a window at max_seq_length "
                f"{max_seq_length}: exported with windows that do not overlap "
                f"(stride {max_seq_length - 2}); export at the fine-tuning's "
                "max_seq_length to keep the overlap",
                stacklevel=2,
            )
            stride = max_seq_length - 2
        aggregation = settings.get("word_aggregation", "first")
        module = cls(model, tokenizer, max_seq_length, tag_names, stride, aggregation)
        metadata = {
            "label_names": tag_names,
            "tagging_stride": module.stride,
            "word_aggregation": aggregation,
            "limits": LIMITS,
        }
        return module, metadata, {"labels.json": tag_names}

    def _pack(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        check = at_most_chars(
            text, MAX_TEXT_CHARS, "text", "; send a long document as several texts"
        )
        with tf.control_dependencies([check]):
            text = tf.identity(text)
        return pack_tagging(text, self.tokenizer, self.max_seq_length, self.stride)

    def _piece_probabilities(self, packed: dict[str, tf.Tensor]) -> tf.Tensor:
        """float32 [pieces of all texts, tags], in the texts' piece order: each
        piece's from the window that owns it."""
        token_ids = packed["token_ids"]
        num_tags = self.model.num_tags

        def run_model():
            features = {key: packed[key] for key in BACKBONE_INPUTS}
            return tf.cast(self.model(features, training=False), tf.float32)

        def no_windows():  # only empty texts: the encoder cannot run on zero rows
            return tf.zeros([0, tf.shape(token_ids)[1], num_tags], tf.float32)

        logits = tf.cond(tf.shape(token_ids)[0] > 0, run_model, no_windows)
        # Owned slots in window order are the texts' pieces in order.
        return tf.boolean_mask(tf.nn.softmax(logits), packed["owned"])

    def _entities(self, packed: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return self.decode(self._piece_probabilities(packed), packed)

    def decode(
        self, probabilities: tf.Tensor, packed: dict[str, tf.Tensor]
    ) -> dict[str, tf.Tensor]:
        """The entities of `serving_default` from tag probabilities [pieces of all
        texts, tags] and `pack_tagging`'s offsets."""
        found = words(probabilities, packed, self.word_aggregation)
        crf = self.model.tagger_head.crf
        found = decode_entities(
            found["probabilities"], found["starts"], found["ends"], self.scheme, crf
        )
        defaults = {"starts": -1, "ends": -1, "labels": "", "scores": 0.0}
        return {key: found[key].to_tensor(default_value=value) for key, value in defaults.items()}

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
