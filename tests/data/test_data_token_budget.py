"""Token-budget batching: batch sizes from the budget, masks as with fixed batches.

Expected batch sizes are computed here from the lengths of the examples
written, not taken from the pipeline's own helpers.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.examples import PretrainingExample, serialize_example
from albert_tf.data.masking import MaskingVocab
from albert_tf.data.pipeline import PipelineConfig, pretraining_dataset

VOCAB = MaskingVocab(
    100, mask_id=4, special_ids=(0, 1, 2, 3, 4), word_start_mask=np.ones(100, bool)
)
BUCKETS = [16, 32, 64]
TOKENS = 256


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    rng = np.random.default_rng(3)
    lengths = rng.integers(5, 65, size=300)
    path = str(tmp_path_factory.mktemp("budget") / "pretrain-0.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for n in lengths:
            ids = [2, *rng.integers(5, 100, n - 2).tolist(), 3]
            w.write(serialize_example(PretrainingExample(ids, [0] * n, int(n % 2))))
    return path, lengths


# The settings every dataset here shares (one pass, file order, seed 5).
SETTINGS = dict(
    max_seq_length=64, shuffle=False, repeat=False, drop_remainder=False, seed=5, batch_size=8
)


def _dataset(path, **kw):
    return pretraining_dataset(path, **{"tokenizer": VOCAB, **SETTINGS, **kw})


def _rows(ds) -> collections.Counter:
    """(masked ids, positions, original ids) of every real example."""
    rows = collections.Counter()
    for f, y in ds:
        for ids, mask, pos, orig, w in zip(
            f["token_ids"].numpy(),
            f["padding_mask"].numpy(),
            f["mask_positions"].numpy(),
            y["mask_ids"].numpy(),
            y["mask_weights"].numpy(),
            strict=True,
        ):
            real = w > 0
            rows[(tuple(ids[mask > 0]), tuple(pos[real]), tuple(orig[real]))] += 1
    return rows


def test_batch_sizes_follow_the_token_budget(shard):
    path, lengths = shard
    ds = _dataset(path, tokens_per_batch=TOKENS, bucket_lengths=BUCKETS)
    got = collections.Counter()
    for f, y in ds:
        batch, seq = f["token_ids"].shape
        real = f["padding_mask"].numpy().sum(axis=1)
        assert seq in BUCKETS
        below = BUCKETS[BUCKETS.index(seq) - 1] if seq != BUCKETS[0] else 0
        assert ((real > below) & (real <= seq)).all()  # each example in its own bucket
        assert y["mask_weights"].shape[0] == batch == y["sentence_order_label"].shape[0]
        got[(batch, seq)] += 1
    expected = collections.Counter()
    lower = 0
    for bucket in BUCKETS:
        count = int(((lengths > lower) & (lengths <= bucket)).sum())
        size = TOKENS // bucket
        expected[(size, bucket)] += count // size
        if count % size:
            expected[(count % size, bucket)] += 1  # the end of input flushes the rest
        lower = bucket
    assert got == expected


def test_masks_are_those_of_fixed_batches(shard):
    # Bucketing regroups masked examples: trimming to a bucket's length loses
    # no token and no prediction.
    path, lengths = shard
    budget = _rows(_dataset(path, tokens_per_batch=TOKENS, bucket_lengths=BUCKETS))
    fixed = _rows(_dataset(path))
    assert sum(fixed.values()) == len(lengths)
    assert budget == fixed


def test_batches_split_evenly_over_replicas(shard):
    path, _ = shard
    ds = _dataset(
        path,
        tokens_per_batch=100,
        bucket_lengths=BUCKETS,
        batch_size_multiple=3,
        drop_remainder=True,
    )
    sizes = collections.Counter(
        (int(f["token_ids"].shape[0]), int(f["token_ids"].shape[1])) for f, _ in ds
    )
    # 100 // 16 = 6 and 100 // 32 = 3 are multiples of 3; 100 // 64 = 1 is
    # raised to one example per replica.
    assert set(sizes) == {(6, 16), (3, 32), (3, 64)}
    with pytest.raises(ValueError, match="end at max_seq_length"):
        _dataset(path, tokens_per_batch=TOKENS, bucket_lengths=[16, 32])


@pytest.mark.parametrize("budget", [None, 96], ids=["fixed", "token_budget"])
@pytest.mark.parametrize("workers", [2, 3])
def test_workers_rows_make_up_the_global_batches(shard, workers, budget):
    # Each worker of a multi-worker run parses (and, with fixed batches, masks) only
    # its contiguous rows; laid end to end they are the global batch, masks included.
    path, _ = shard
    kw = dict(batch_size=6, tokens_per_batch=budget, bucket_lengths=BUCKETS)
    kw |= dict(batch_size_multiple=6, drop_remainder=True)
    whole = list(_dataset(path, **kw))
    parts = [list(_dataset(path, worker_rows=(workers, i), **kw)) for i in range(workers)]
    assert len(whole) > 5 and all(len(p) == len(whole) for p in parts)
    for step, (features, labels) in enumerate(whole):
        for name, tensor in {**features, **labels}.items():
            pieces = [(p[step][0] | p[step][1])[name].numpy() for p in parts]
            assert [len(x) for x in pieces] == [len(tensor) // workers] * workers
            np.testing.assert_array_equal(np.concatenate(pieces), tensor.numpy(), err_msg=name)
    with pytest.raises(ValueError, match="worker index 2 is not in"):
        _dataset(path, worker_rows=(2, 2))


def test_a_config_with_default_buckets_follows_a_changed_length():
    # The default buckets belong to max_seq_length: overriding the length of a
    # token-budget config gives that length's buckets, not the old ones.
    config = PipelineConfig(batch_size=8, max_seq_length=512, tokens_per_batch=TOKENS)
    assert config.buckets[-1] == 512 and config.bucket_lengths is None
    shorter = dataclasses.replace(config, max_seq_length=64)
    assert shorter.buckets[-1] == 64
    with pytest.raises(ValueError, match="must ascend and end at max_seq_length=64"):
        dataclasses.replace(config, max_seq_length=64, bucket_lengths=(16, 32))
    with pytest.raises(ValueError, match="data_service_mode='sideways' must be one of"):
        PipelineConfig(
            batch_size=8, max_seq_length=64, data_service="grpc://x:1", data_service_mode="sideways"
        )


def test_keywords_override_a_given_config(shard):
    path, _ = shard
    config = PipelineConfig(**SETTINGS, tokens_per_batch=TOKENS)
    by_keywords = list(_dataset(path, tokens_per_batch=TOKENS))
    by_config = list(pretraining_dataset(path, config, tokenizer=VOCAB))
    overridden = list(
        pretraining_dataset(path, dataclasses.replace(config, seed=9), tokenizer=VOCAB, seed=5)
    )
    for other in (by_config, overridden):
        assert len(other) == len(by_keywords)
        for (f1, y1), (f2, y2) in zip(by_keywords, other, strict=True):
            for name, tensor in {**f1, **y1}.items():
                np.testing.assert_array_equal(tensor.numpy(), (f2 | y2)[name].numpy())
