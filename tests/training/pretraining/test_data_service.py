"""Training fed by a real tf.data service: a dispatcher and two workers on loopback."""

import collections
import glob
import json

import numpy as np
import pytest
import tensorflow as tf
from helpers.training_utils import tiny_albert, tiny_options

from albert_tf.data.pipeline import check_serializable, pretraining_dataset
from albert_tf.training.pretraining import checkpoint_layout
from albert_tf.training.pretraining.trainer import PretrainingTrainer


@pytest.fixture(scope="module")
def dispatcher():
    service = tf.data.experimental.service
    server = service.DispatchServer(service.DispatcherConfig(port=0))
    address = server.target.split("://")[1]
    workers = [
        service.WorkerServer(service.WorkerConfig(dispatcher_address=address, port=0))
        for _ in range(2)
    ]
    yield server.target
    for worker in workers:
        worker.stop()
    server.stop()


def _originals(features, labels) -> list[tuple[int, ...]]:
    """Each row's unmasked real tokens: the masked ids put back."""
    ids = features["token_ids"].numpy().copy()
    real = labels["mask_weights"].numpy() > 0
    rows = np.nonzero(real)[0]
    ids[rows, features["mask_positions"].numpy()[real]] = labels["mask_ids"].numpy()[real]
    return [tuple(r[m > 0]) for r, m in zip(ids, features["padding_mask"].numpy(), strict=True)]


def _shard_contents(pattern: str) -> collections.Counter:
    """The examples in the shard files, read without the pipeline."""
    out = collections.Counter()
    for path in glob.glob(pattern):
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            feature = tf.train.Example.FromString(record).features.feature
            out[tuple(feature["token_ids"].int64_list.value)] += 1
    return out


def _one_epoch(prepared, dispatcher, mode: str):
    return pretraining_dataset(
        prepared.train_files,
        batch_size=16,
        max_seq_length=32,
        repeat=False,
        drop_remainder=False,
        data_service=dispatcher,
        data_service_mode=mode,
    )


def test_trains_through_the_data_service_and_resumes(tmp_path, prepared, vocab, dispatcher):
    options = tiny_options(
        tmp_path / "run", prepared, num_train_steps=3, log_every_steps=1, data_service=dispatcher
    )
    trainer = PretrainingTrainer(tiny_albert(vocab), options)
    last = trainer.train(log=lambda *_: None)
    assert trainer.step == 3
    assert np.isfinite(last["mlm_loss"]) and np.isfinite(last["sop_loss"])
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2, 3]
    assert all(np.isfinite(x["mlm_loss"]) for x in lines)
    # A service iterator cannot be saved; the checkpoint holds the rest.
    assert not checkpoint_layout.holds_input_position(trainer.manager.latest_checkpoint)
    del trainer
    longer = tiny_options(
        tmp_path / "run", prepared, num_train_steps=5, log_every_steps=1, data_service=dispatcher
    )
    resumed = PretrainingTrainer(tiny_albert(vocab), longer)
    resumed.train(log=lambda *_: None)
    assert resumed.step == 5


def test_distributed_epoch_reads_every_example_once(prepared, dispatcher):
    seen = collections.Counter()
    for features, labels in _one_epoch(prepared, dispatcher, "distributed_epoch"):
        seen.update(_originals(features, labels))
    expected = _shard_contents(prepared.train_files)
    assert sum(expected.values()) > 1000
    assert seen == expected


def test_parallel_epochs_workers_shuffle_and_mask_differently(prepared, dispatcher):
    # Each worker reads everything; with seeds of their own the two copies
    # of an example come with different masks (identical seeds: same masks).
    masked = collections.defaultdict(list)
    for features, labels in _one_epoch(prepared, dispatcher, "parallel_epochs"):
        ids = features["token_ids"].numpy()
        for row, original in enumerate(_originals(features, labels)):
            masked[original].append(ids[row][: len(original)].tobytes())
    expected = _shard_contents(prepared.train_files)
    assert {k: len(v) for k, v in masked.items()} == {k: 2 * n for k, n in expected.items()}
    same = sum(len(set(v)) < len(v) for v in masked.values())
    assert same < 0.2 * len(masked), same


def test_python_in_the_pipeline_is_refused():
    ds = tf.data.Dataset.range(3).map(lambda x: tf.py_function(lambda v: v + 1, [x], tf.int64))
    with pytest.raises(ValueError, match="tf.data service workers cannot run"):
        check_serializable(ds)
    check_serializable(tf.data.Dataset.range(3).map(lambda x: x + 1))
