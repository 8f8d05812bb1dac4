"""Corpora, pretraining examples and the dynamic-masking input pipeline.

In the order data flows: `inputs` names files, `corpus` reads them into
documents, `examples` builds sentence pairs (from tokenized documents packed as
`packed_document`), `shards` writes them to TFRecords,
`masking` and `pipeline` turn shards into masked training batches.

>>> from albert_tf.data import read_documents, sample_path
>>> len(list(read_documents(sample_path("zh"))))
284
"""

from __future__ import annotations

from albert_tf.data.corpus import (
    Document,
    ReadStats,
    iter_sentences,
    read_corpus,
    read_documents,
    split_lines,
    split_sentences,
)
from albert_tf.data.examples import PretrainingExample, create_examples_from_document
from albert_tf.data.inputs import resolve_inputs, sample_language, sample_path
from albert_tf.data.masking import Masker, MaskingVocab, default_max_predictions
from albert_tf.data.pipeline import held_out_dataset, pretraining_dataset
from albert_tf.data.shards import WriteSummary, write_pretraining_data

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
    "iter_sentences",
    "pretraining_dataset",
    "read_corpus",
    "read_documents",
    "resolve_inputs",
    "sample_language",
    "sample_path",
    "split_lines",
    "split_sentences",
    "tfds_documents",
    "write_pretraining_data",
]


def __getattr__(name: str):
    # tfds_documents lives with the tfds builder; tensorflow-datasets takes seconds
    # to import, so only a caller that reads tfds pays for it.
    if name == "tfds_documents":
        from albert_tf.data.tfds_corpus import tfds_documents

        return tfds_documents
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
