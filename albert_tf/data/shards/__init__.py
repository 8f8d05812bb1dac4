"""Sharded TFRecords of unmasked pretraining pairs, at any corpus size.

The data flows through one module each:

* `plan` — `ShardPlan`: the options, validated once, and the bounded input
  tasks (`albert_tf.data.input_tasks`: byte ranges of files, slices of tfds splits);
* `writer` — `ShardWriter`: one task → its examples (`albert_tf.data.examples`)
  → one part file per shard, streaming one pool of documents at a time;
* `layout` — the output directory's files and the order that makes them
  complete (parts → shards → ``masking_vocab.json`` → ``metadata.json``);
* `local` — `write_pretraining_data`: the tasks in this process or a pool of
  spawned processes, resumable;
* `beam` — `run_beam_pipeline`: the same tasks as an Apache Beam pipeline
  (the ``beam`` extra; imported only when asked for).

Both runners take a `ShardPlan` and write byte-identical shards.
"""

from albert_tf.data.shards.layout import METADATA_FILE, SHARD_PATTERN, read_metadata, shard_paths
from albert_tf.data.shards.local import run_local, write_pretraining_data
from albert_tf.data.shards.plan import ShardOptions, ShardPlan
from albert_tf.data.shards.summary import WriteSummary
from albert_tf.data.shards.writer import ShardWriter

__all__ = [
    "METADATA_FILE",
    "SHARD_PATTERN",
    "ShardOptions",
    "ShardPlan",
    "ShardWriter",
    "WriteSummary",
    "read_metadata",
    "run_local",
    "shard_paths",
    "write_pretraining_data",
]
