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

import importlib
from typing import Any

#: public name -> the module that defines it. Loaded on first use (PEP 562): the
#: commands read option choices from these modules before TensorFlow is imported,
#: and tfds_documents' tensorflow-datasets takes seconds to import.
_EXPORTS = {
    **dict.fromkeys(
        [
            "Document",
            "ReadStats",
            "iter_sentences",
            "read_corpus",
            "read_documents",
            "split_lines",
            "split_sentences",
        ],
        "albert_tf.data.corpus",
    ),
    "PretrainingExample": "albert_tf.data.examples",
    "create_examples_from_document": "albert_tf.data.examples",
    "resolve_inputs": "albert_tf.data.inputs",
    "sample_language": "albert_tf.data.inputs",
    "sample_path": "albert_tf.data.inputs",
    "Masker": "albert_tf.data.masking",
    "MaskingVocab": "albert_tf.data.masking",
    "default_max_predictions": "albert_tf.data.masking",
    "PipelineConfig": "albert_tf.data.pipeline",
    "held_out_dataset": "albert_tf.data.pipeline",
    "pretraining_dataset": "albert_tf.data.pipeline",
    "WriteSummary": "albert_tf.data.shards",
    "write_pretraining_data": "albert_tf.data.shards",
    "tfds_documents": "albert_tf.data.tfds_corpus",
}

__all__ = [
    "Document",
    "Masker",
    "MaskingVocab",
    "PipelineConfig",
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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
