"""Corpora, pretraining examples and the dynamic-masking input pipeline.

>>> from albert_tf.data import read_documents, sample_path
>>> len(list(read_documents(sample_path("zh"))))
284
"""

from __future__ import annotations

import pathlib

from albert_tf.data.corpus import (
    Document,
    ReadStats,
    read_corpus,
    read_documents,
    split_lines,
    split_sentences,
    tfds_documents,
)
from albert_tf.data.masking import Masker, MaskingVocab, default_max_predictions
from albert_tf.data.pipeline import held_out_dataset, pretraining_dataset
from albert_tf.data.pretraining import (
    PretrainingExample,
    WriteSummary,
    create_examples_from_document,
    write_pretraining_data,
)

_SAMPLE_DIR = pathlib.Path(__file__).resolve().parent / "sample"


def sample_path(language: str = "en") -> str:
    """Path of the embedded sample corpus (JSON Lines) for ``"en"`` or ``"zh"``.

    >>> sample_path("en").endswith("en_sample.jsonl")
    True
    """
    if language not in ("en", "zh"):
        raise ValueError(f"no embedded sample for {language!r}; use 'en' or 'zh'")
    return str(_SAMPLE_DIR / f"{language}_sample.jsonl")


__all__ = [
    "Document",
    "Masker",
    "MaskingVocab",
    "PretrainingExample",
    "ReadStats",
    "WriteSummary",
    "create_examples_from_document",
    "default_max_predictions",
    "held_out_dataset",
    "pretraining_dataset",
    "read_corpus",
    "read_documents",
    "sample_path",
    "split_lines",
    "split_sentences",
    "tfds_documents",
    "write_pretraining_data",
]
