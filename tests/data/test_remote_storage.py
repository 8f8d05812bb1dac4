"""Pretraining data in object storage: inputs and shards behind a URL.

``ram://`` is TensorFlow's in-memory file system, reached through
``tf.io.gfile`` exactly as ``gs://`` is: the preparation reads its input from
it, writes its shards, done markers and metadata to it, resumes there, and the
training input pipeline reads the shards back, all without a local path.
"""

from __future__ import annotations

import collections
import os

import tensorflow as tf

from albert_tf import storage
from albert_tf.data import sample_path
from albert_tf.data.inputs import resolve_inputs
from albert_tf.data.pipeline import pretraining_dataset
from albert_tf.data.shards import read_metadata, write_pretraining_data


def _records(pattern: str) -> collections.Counter:
    files = tf.io.gfile.glob(pattern)
    return collections.Counter(
        bytes(r) for r in tf.data.TFRecordDataset(sorted(files)).as_numpy_iterator()
    )


def _split_sample(folder: str) -> None:
    """The English sample as two files under ``folder`` (local or remote)."""
    with open(sample_path("en"), "rb") as fh:
        lines = fh.read().splitlines(keepends=True)
    storage.makedirs(folder)
    for index, part in enumerate((lines[: len(lines) // 2], lines[len(lines) // 2 :])):
        with storage.open_file(os.path.join(folder, f"part-{index}.jsonl"), "wb") as out:
            out.write(b"".join(part))


def test_inputs_and_shards_in_object_storage_equal_local_ones(tmp_path, spm_dir):
    local_in, remote_in = str(tmp_path / "corpus"), "ram://albert_tf_test/corpus"
    _split_sample(local_in)
    _split_sample(remote_in)
    common = dict(
        tokenizer=spm_dir,
        max_seq_length=48,
        dupe_factor=2,
        num_shards=2,
        seed=5,
        pool_bytes=16_384,
        task_bytes=32_768,
        show_progress=False,
        log=None,
    )
    local = write_pretraining_data(
        inputs=os.path.join(local_in, "*.jsonl"), output_dir=str(tmp_path / "out"), **common
    )
    out = "ram://albert_tf_test/shards"
    lines: list[str] = []
    remote = write_pretraining_data(
        inputs=os.path.join(remote_in, "*.jsonl"),
        output_dir=out,
        **(common | {"log": lines.append}),
    )
    # A folder in a bucket is searched as a local one is.
    assert resolve_inputs(remote_in) == [f"{remote_in}/part-0.jsonl", f"{remote_in}/part-1.jsonl"]
    # Documents are named relative to their folder: the same examples either way.
    assert remote.tasks == local.tasks > 2
    reference = _records(str(tmp_path / "out" / "*.tfrecord"))
    assert sum(reference.values()) == local.examples > 500
    assert _records(f"{out}/pretrain-*.tfrecord") == reference
    assert read_metadata(out)["summary"]["examples"] == remote.examples
    assert not tf.io.gfile.exists(f"{out}/.parts")  # cleaned up after the last shard

    # Run again: the directory is complete, nothing is redone.
    write_pretraining_data(
        inputs=os.path.join(remote_in, "*.jsonl"),
        output_dir=out,
        **(common | {"log": lines.append}),
    )
    assert any("already holds these shards" in line for line in lines), lines

    # Training reads the shards (and their masking vocabulary) from there too.
    batch, _ = next(
        iter(pretraining_dataset(f"{out}/*.tfrecord", batch_size=4, max_seq_length=48, seed=1))
    )
    assert batch["token_ids"].shape == (4, 48)
