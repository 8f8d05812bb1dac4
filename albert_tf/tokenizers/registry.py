"""Loading a saved tokenizer by the ``kind`` in its ``tokenizer.json``.

Example:
    >>> tok = load_tokenizer("runs/tokenizer")  # doctest: +SKIP
    >>> tok.kind  # doctest: +SKIP
    'sentencepiece'
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from albert_tf.tokenizers.base import Tokenizer
from albert_tf.tokenizers.sentencepiece import SentencePieceTokenizer
from albert_tf.tokenizers.wordpiece import WordPieceTokenizer

CONFIG_FILENAME = "tokenizer.json"

_OPTIONS = {
    "sentencepiece": ("lower_case", "remove_space", "keep_accents", "split_digit_comma"),
    "wordpiece": ("lower_case", "tokenize_chinese_chars", "max_input_chars_per_word"),
}


def load_tokenizer(directory: str | os.PathLike[str]) -> Tokenizer:
    """Loads the tokenizer :meth:`Tokenizer.save` wrote into ``directory``.

    Raises:
      FileNotFoundError: no ``tokenizer.json`` or no asset file it names.
      ValueError: unknown ``kind`` or unreadable config.
    """
    root = Path(directory)
    config_path = root / CONFIG_FILENAME
    if not config_path.is_file():
        raise FileNotFoundError(f"no {CONFIG_FILENAME} in {root} (not a saved tokenizer)")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ValueError(f"{config_path} is not valid JSON: {err}") from err
    kind = config.get("kind")
    if kind not in _OPTIONS:
        raise ValueError(
            f"{config_path}: unknown tokenizer kind {kind!r}; expected one of {sorted(_OPTIONS)}"
        )
    options = {k: config[k] for k in _OPTIONS[kind] if k in config}
    if kind == "sentencepiece":
        return SentencePieceTokenizer.from_file(
            root / config.get("model_file", "spiece.model"), **options
        )
    return WordPieceTokenizer(root / config.get("vocab_file", "vocab.txt"), **options)
