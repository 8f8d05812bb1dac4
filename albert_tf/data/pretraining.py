"""Compatibility names: pair building and shard writing, from their own modules.

Pair building (`PretrainingExample`, `create_examples_from_document`...) lives
in `albert_tf.data.examples`; writing shards (`write_pretraining_data`,
`WriteSummary`, `read_metadata`...) in `albert_tf.data.shards`. Both were once
this one module; its names keep working for code that imports them from here.

>>> from albert_tf.data import examples, shards
>>> pack_pair is examples.pack_pair and write_pretraining_data is shards.write_pretraining_data
True
"""

from __future__ import annotations

from albert_tf.data.examples import (
    SENTENCE_TASKS,
    PretrainingExample,
    create_examples_from_document,
    pack_pair,
    serialize_example,
    truncate_seq_pair,
)
from albert_tf.data.shards import (
    METADATA_FILE,
    SHARD_PATTERN,
    WriteSummary,
    read_metadata,
    write_pretraining_data,
)

__all__ = [
    "METADATA_FILE",
    "SENTENCE_TASKS",
    "SHARD_PATTERN",
    "PretrainingExample",
    "WriteSummary",
    "create_examples_from_document",
    "pack_pair",
    "read_metadata",
    "serialize_example",
    "truncate_seq_pair",
    "write_pretraining_data",
]
