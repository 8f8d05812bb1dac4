"""`export_litert`: a fine-tuned multiple-choice model → one on-device ``.tflite`` file.

The file takes raw text, one item per call, and runs everything inside
LiteRT (TensorFlow Lite): builtin ops for the encoder (which XNNPACK takes) and
tensorflow-text's TFLite custom ops for the text work, so an app needs the
LiteRT runtime plus tensorflow-text's kernels and nothing else (no Flex / select
TF ops). Signatures:

* ``serving_default(context [1], question [1], options [K])`` → ``probabilities``
  float32 [1, K] (0 for an absent option, i.e. an empty string) and
  ``prediction`` int32 [1]. K is fixed at export (``max_options``; pad with
  empty strings) so that every encoder shape is static for XNNPACK;
* ``tokenize(context, question, options)`` → ``token_ids``, ``segment_ids``,
  ``padding_mask`` int32 [1, K, max_seq_length], packed exactly as
  `albert_tf.tasks.multiple_choice.data.pack_multiple_choice` packs them (padded to
  ``max_seq_length`` rather than to the longest option).

How the SavedModel's text steps are expressed with LiteRT-capable ops:

* **build_qa** (every ``_`` filled with the option, else question + " " +
  option): ``ByteSplit`` finds the ``_`` bytes and ``ByteSplitByOffsets`` cuts
  the question there. LiteRT cannot join two strings, so the parts and the
  options become one id per (normalised) character under a character-level
  SentencePiece model, are interleaved with numeric ops and turned back into
  text by ``FastSentencepieceDetokenize`` (`CharacterText`).
* **English (SentencePiece)**: ALBERT's normalisation (lower-casing, whitespace
  collapsing, ``\\`\\``` / ``''`` → ``"``, NFKD + accent stripping) is folded,
  character by character, into the SentencePiece model's own normalisation
  table (its ``precompiled_charsmap``, composed with the model's nmt_nfkc
  rules), so ``FastSentencepieceTokenize`` does it all. The "9," rule is a
  table lookup on piece ids, precomputed with the reference tokenizer.
* **Chinese (WordPiece)**: BERT's basic normalisation (lower-casing, control
  characters, NFC, accent stripping) runs as the normalisation table of a
  character-level SentencePiece model (``FastSentencepieceTokenize`` then
  ``FastSentencepieceDetokenize``), then ``FastWordpieceTokenize`` in
  end-to-end mode splits words as BERT does and finds the pieces.

Differences from the SavedModel are listed in docs/serving.md, "On-device
(LiteRT)"; the tests check token-id equality on real items.

Example:
    >>> PRECISIONS
    ('float32', 'int8')
    >>> path = export_litert("runs/mc/best", "albert_mc.tflite")  # doctest: +SKIP
    >>> LiteRTMultipleChoice(path).predict("It rains.", "Take _.", ["an umbrella", "ice"])
    ... # doctest: +SKIP
    array([0.83, 0.17], dtype=float32)
"""

from albert_tf.serving.litert.export import PRECISIONS, export_litert
from albert_tf.serving.litert.module import LiteRTModule
from albert_tf.serving.litert.runner import LiteRTMultipleChoice, custom_op_names

__all__ = ["PRECISIONS", "LiteRTModule", "LiteRTMultipleChoice", "custom_op_names", "export_litert"]
