"""The one tokenizer interface the rest of the package uses.

English ALBERT tokenises with SentencePiece, Chinese ALBERT with BERT-style
WordPiece; pretraining data, masking, fine-tuning and the exported SavedModel
only ever see this interface. Every method that takes tensors runs in-graph
with tensorflow-text ops only (no `tf.py_function`), so it can live inside a
SavedModel that TF Serving loads.
"""

from __future__ import annotations

import abc
import json
import os
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf import storage
from albert_tf.storage import write_json_atomic

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
#: What every saved tokenizer directory holds beside its assets: its ``kind``, its
#: options and its asset file's name.
CONFIG_FILENAME = "tokenizer.json"

# kind → class: each subclass registers itself by defining ``kind``.
_KINDS: dict[str, type[Tokenizer]] = {}

# Traced `tokenize` per tokenizer, for `tokenize_on_host`. Kept outside the
# module so that exporting a tokenizer does not save this function with it.
_TRACED_TOKENIZE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Tokenizer(tf.Module, abc.ABC):
    """Text → ids, in-graph.

    Subclasses set the special-token ids (``_pad_id`` ...), implement `tokenize`,
    `detokenize`, `id_to_token`, `save` and `from_config`, and name their ``kind``:
    `load_tokenizer` finds the class by it.
    """

    #: short name stored in saved assets: "sentencepiece" or "wordpiece"
    kind: str
    #: the constructor options `options` reports and ``tokenizer.json`` records
    option_names: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if kind is not None:
            _KINDS[kind] = cls

    @property
    @abc.abstractmethod
    def vocabulary_size(self) -> int: ...

    # Subclasses set _pad_id, _unk_id, _cls_id, _sep_id and _mask_id.
    _pad_id: int
    _unk_id: int
    _cls_id: int
    _sep_id: int
    _mask_id: int

    @property
    def pad_id(self) -> int:
        return self._pad_id

    @property
    def unk_id(self) -> int:
        return self._unk_id

    @property
    def cls_id(self) -> int:
        return self._cls_id

    @property
    def sep_id(self) -> int:
        return self._sep_id

    @property
    def mask_id(self) -> int:
        return self._mask_id

    @property
    def special_ids(self) -> tuple[int, ...]:
        """Ids that masking must never select and packing adds itself."""
        return (self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id)

    @property
    def has_offsets(self) -> bool:
        """Whether ``tokenize_with_offsets`` gives each piece's characters (span
        QA and tagging need them)."""
        return False

    @abc.abstractmethod
    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """tf.string [batch] → int32 ragged [batch, (pieces)]; in-graph.

        Applies the model's normalisation (lower-casing, accent stripping...)
        first, exactly as the reference tokenizer does.
        """

    def tokenize_on_host(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Python strings → (flat piece ids, row splits) as numpy arrays.

        For host-side data preparation, which tokenizes millions of sentences
        in batches: `tokenize` runs as one traced graph, because dispatching
        its few hundred ops one by one in eager mode nearly doubles the time
        (English SentencePiece, batches of 2,048). The ids are those of
        `tokenize`.
        """
        fn = _TRACED_TOKENIZE.get(self)
        if fn is None:
            tokenizer = weakref.ref(self)  # the cache must not keep self alive

            @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
            def fn(batch: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
                ragged = tokenizer().tokenize(batch)
                return ragged.flat_values, ragged.row_splits

            _TRACED_TOKENIZE[self] = fn
        flat, splits = fn(tf.constant(list(texts), dtype=tf.string))
        return flat.numpy(), splits.numpy()

    @abc.abstractmethod
    def detokenize(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
        """int ids [batch, (pieces)] → tf.string [batch]."""

    @abc.abstractmethod
    def id_to_token(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        """int ids → their piece strings (same shape); for display."""

    @abc.abstractmethod
    def word_start_mask(self) -> np.ndarray:
        """bool [vocabulary_size]: True where a piece begins a new word.

        SentencePiece pieces starting with "▁" begin words; WordPiece pieces
        starting with "##" continue them. Whole-word masking groups a word
        start with the continuation pieces that follow it. Special tokens
        count as word starts.
        """

    def word_starts(self, ids: tf.RaggedTensor) -> tf.RaggedTensor:
        """bool ragged like ``ids`` [batch, (pieces)]: whether each piece begins a word
        (`word_start_mask`); a text's first piece always does, whatever its id, so no
        word spans two texts. In-graph."""
        first = tf.ragged.range(ids.row_lengths()).flat_values == 0
        mask = tf.constant(self.word_start_mask())
        return ids.with_flat_values(tf.gather(mask, ids.flat_values) | first)

    @abc.abstractmethod
    def save(self, directory: str | os.PathLike[str]) -> None:
        """Writes the tokenizer's assets (model file / vocab and a small
        tokenizer.json naming `kind` and options) into ``directory``."""

    @property
    def options(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.option_names}

    @classmethod
    def options_in(cls, config: dict[str, Any]) -> dict[str, Any]:
        """The options of ``config`` this class takes (others are ignored)."""
        return {name: config[name] for name in cls.option_names if name in config}

    @classmethod
    @abc.abstractmethod
    def from_config(cls, directory: str, config: dict[str, Any]) -> Tokenizer:
        """The tokenizer `save` wrote into ``directory``, whose ``tokenizer.json``
        is ``config`` (options it does not know are ignored)."""


def load_tokenizer(directory: str | os.PathLike[str]) -> Tokenizer:
    """Loads the tokenizer `Tokenizer.save` wrote into ``directory``, by its ``kind``.

    Raises:
      FileNotFoundError: no ``tokenizer.json`` or no asset file it names.
      ValueError: unknown ``kind`` or unreadable config.

    Example:
        >>> tok = load_tokenizer("runs/tokenizer")  # doctest: +SKIP
        >>> tok.kind  # doctest: +SKIP
        'sentencepiece'
    """
    # Strings, not pathlib: Path("gs://b/t") is "gs:/b/t", a local folder.
    root = os.fspath(directory)
    config_path = os.path.join(root, CONFIG_FILENAME)
    if not storage.isfile(config_path):
        raise FileNotFoundError(f"no {CONFIG_FILENAME} in {root} (not a saved tokenizer)")
    try:
        config = json.loads(storage.read_text(config_path))
    except ValueError as err:
        raise ValueError(f"{config_path} is not valid JSON: {err}") from err
    kind = config.get("kind") if isinstance(config, dict) else None
    if kind not in _KINDS:
        raise ValueError(
            f"{config_path}: unknown tokenizer kind {kind!r}; expected one of {sorted(_KINDS)}"
        )
    return _KINDS[kind].from_config(root, config)


def write_config(directory: str, tokenizer: Tokenizer, **assets: str) -> None:
    """Writes ``tokenizer.json``: the tokenizer's kind, its asset files and options."""
    config = {"kind": tokenizer.kind, **assets, **tokenizer.options}
    write_json_atomic(os.path.join(directory, CONFIG_FILENAME), config)
