"""The pretraining input pipeline: shards → dynamic masking → batches.

`pretraining_dataset` yields ``(features, labels)``:

=========================  ===========  ========================================
name                       dtype/shape  meaning
=========================  ===========  ========================================
``token_ids``              int32 [B,S]  masked input ids, padded with [PAD]
``segment_ids``            int32 [B,S]  0 for [CLS] A [SEP], 1 for B [SEP]
``padding_mask``           int32 [B,S]  1 for real tokens, 0 for padding
``mask_positions``         int32 [B,P]  positions to predict, padded with 0
``mask_ids`` (label)       int32 [B,P]  original ids there, padded with 0
``mask_weights`` (label)   f32 [B,P]    1 for real predictions, 0 for padding
``sentence_order_label``   int32 [B]    1 = swapped (SOP) / random (NSP)
=========================  ===========  ========================================

Every example gets a fresh mask each time it is read: its seed is
``fold_in(seed, n)`` where ``n`` counts examples read so far by this pipeline
(across epochs), so the same seed gives the same batches, and a new epoch
gives new masks. The pipeline has no Python in its hot path and its iterator
can be saved in a `tf.train.Checkpoint` to resume at the same batch.
"""

from __future__ import annotations

import glob
import os

import tensorflow as tf

from albert_tf.data.masking import Masker, MaskingVocab
from albert_tf.data.shards import read_metadata

_FEATURES = {
    "token_ids": tf.io.RaggedFeature(tf.int64),
    "segment_ids": tf.io.RaggedFeature(tf.int64),
    "sentence_order_label": tf.io.FixedLenFeature([], tf.int64),
    # Only in shards written with a Chinese word segmenter; empty otherwise.
    "word_continues": tf.io.RaggedFeature(tf.int64),
}


def _resolve_vocab(tokenizer, files: list[str]) -> MaskingVocab:
    if isinstance(tokenizer, MaskingVocab):
        return tokenizer
    if tokenizer is not None:
        return MaskingVocab.from_tokenizer(tokenizer)
    directory = os.path.dirname(files[0])
    try:
        return MaskingVocab.load(directory)
    except FileNotFoundError as e:
        raise ValueError(
            f"no tokenizer given and no masking_vocab.json next to the shards "
            f"in {directory}; pass tokenizer= (a Tokenizer or MaskingVocab)"
        ) from e


def held_out_dataset(
    file_pattern: str | list[str],
    *,
    batch_size: int,
    max_seq_length: int,
    max_predictions_per_seq: int | None = None,
    seed: int = 12345,
) -> tf.data.Dataset:
    """Held-out batches for scoring: file order, one pass, the last short batch kept.

    Masks are drawn from ``seed`` as in training, so every scorer of the same
    files and seed (the trainer's evaluation, `evaluate_pretraining`, the
    unigram baseline) sees the same masked positions.
    """
    return pretraining_dataset(
        file_pattern,
        batch_size=batch_size,
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        seed=seed,
        shuffle=False,
        repeat=False,
        drop_remainder=False,
    )


def pretraining_dataset(
    file_pattern: str | list[str],
    *,
    batch_size: int,
    max_seq_length: int,
    max_predictions_per_seq: int | None = None,
    tokenizer=None,
    seed: int = 0,
    shuffle: bool = True,
    repeat: bool = True,
    masked_lm_prob: float = 0.15,
    shuffle_buffer_size: int = 10_000,
    drop_remainder: bool = True,
    input_context: tf.distribute.InputContext | None = None,
    cycle_length: int = 8,
    return_spans: bool = False,
) -> tf.data.Dataset:
    """Reads pretraining shards, masks dynamically, batches and prefetches.

    Args:
      file_pattern: glob(s) of the TFRecord shards `write_pretraining_data`
        wrote.
      batch_size: examples per batch; with ``input_context``, the *global*
        batch size, divided among replicas.
      max_seq_length: padded length; shards written for a longer length are
        an error.
      max_predictions_per_seq: P; default ``round(0.15 · max_seq_length)``.
      tokenizer: a `Tokenizer` or `MaskingVocab`; default: the
        ``masking_vocab.json`` next to the shards.
      seed: fixes file order, shuffling and masks.
      shuffle: shuffle files and examples.
      repeat: repeat forever (epochs get different masks).
      input_context: from `tf.distribute.Strategy.distribute_datasets_from_function`;
        each input pipeline reads its own files (or every n-th example when
        there are fewer files than pipelines) with its own seed.
      return_spans: add ``span_lengths`` to features (for tests/statistics).

    >>> import os, tempfile, numpy as np
    >>> from albert_tf.data.examples import PretrainingExample, serialize_example
    >>> d = tempfile.mkdtemp(); path = os.path.join(d, "pretrain-0.tfrecord")
    >>> with tf.io.TFRecordWriter(path) as w:
    ...     w.write(serialize_example(PretrainingExample(
    ...         [2, 5, 6, 7, 3, 8, 9, 3], [0, 0, 0, 0, 0, 1, 1, 1], 1)))
    >>> vocab = MaskingVocab(10, mask_id=4, special_ids=(0, 1, 2, 3, 4),
    ...                      word_start_mask=np.ones(10, bool))
    >>> ds = pretraining_dataset(path, batch_size=2, max_seq_length=12,
    ...                          tokenizer=vocab, shuffle=False)
    >>> features, labels = next(iter(ds))
    >>> sorted(features), sorted(labels)
    (['mask_positions', 'padding_mask', 'segment_ids', 'token_ids'], \
['mask_ids', 'mask_weights', 'sentence_order_label'])
    >>> features["token_ids"].shape, labels["mask_ids"].shape
    (TensorShape([2, 12]), TensorShape([2, 2]))
    """
    patterns = [file_pattern] if isinstance(file_pattern, str) else list(file_pattern)
    files = sorted({f for p in patterns for f in glob.glob(p)})
    if not files:
        raise FileNotFoundError(f"no pretraining shards match {file_pattern}")
    meta = read_metadata(os.path.dirname(files[0]))
    if meta is not None and meta["max_seq_length"] > max_seq_length:
        raise ValueError(
            f"shards were written for max_seq_length={meta['max_seq_length']}, "
            f"longer than max_seq_length={max_seq_length}"
        )
    vocab = _resolve_vocab(tokenizer, files)
    masker = Masker(
        vocab,
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob,
    )
    pad_id = vocab.pad_id

    per_replica_batch = batch_size
    pipeline_id = 0
    shard_records = None
    if input_context is not None:
        per_replica_batch = input_context.get_per_replica_batch_size(batch_size)
        pipeline_id = input_context.input_pipeline_id
        n = input_context.num_input_pipelines
        if len(files) >= n:
            files = files[pipeline_id::n]
        else:
            shard_records = (n, pipeline_id)
    base_seed = tf.constant([seed, pipeline_id], tf.int64)

    ds = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    ds = ds.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(cycle_length, len(files)),
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    if shard_records is not None:
        ds = ds.shard(*shard_records)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    # Counting examples gives each one (in each epoch) its own seed.
    ds = ds.enumerate()

    draw_signature = {
        "ngram": tf.int32,
        "order_key": tf.float32,
        "replace_u": tf.float32,
        "random_index": tf.int32,
    }

    def example_draws(index: tf.Tensor) -> dict[str, tf.Tensor]:
        # Each example's own random numbers, keyed by (seed, its index).
        return masker.random_draws(tf.random.experimental.stateless_fold_in(base_seed, index))

    def parse_and_mask(indices: tf.Tensor, records: tf.Tensor):
        # Everything runs on whole batches (far fewer op launches) except the
        # per-example random draws, which keep masks independent of batching.
        ex = tf.io.parse_example(records, _FEATURES)
        lengths = tf.cast(ex["token_ids"].row_lengths(), tf.int32)
        check = tf.debugging.assert_less_equal(
            tf.reduce_max(lengths), max_seq_length, message="example longer than max_seq_length"
        )
        with tf.control_dependencies([check]):
            ids = tf.cast(ex["token_ids"], tf.int32).to_tensor(pad_id, shape=[None, max_seq_length])
        segs = tf.cast(ex["segment_ids"], tf.int32).to_tensor(0, shape=[None, max_seq_length])
        draws = tf.map_fn(example_draws, indices, fn_output_signature=draw_signature)
        continues = ex["word_continues"].to_tensor(0, shape=[None, max_seq_length])
        m = masker.mask_batch(
            ids, lengths, draws, word_continues=continues, return_spans=return_spans
        )
        features = {
            "token_ids": m["token_ids"],
            "segment_ids": segs,
            "padding_mask": tf.cast(tf.range(max_seq_length)[None, :] < lengths[:, None], tf.int32),
            "mask_positions": m["mask_positions"],
        }
        if return_spans:
            features["span_lengths"] = m["span_lengths"]
        labels = {
            "mask_ids": m["mask_ids"],
            "mask_weights": m["mask_weights"],
            "sentence_order_label": tf.cast(ex["sentence_order_label"], tf.int32),
        }
        return features, labels

    ds = ds.batch(per_replica_batch, drop_remainder=drop_remainder)
    ds = ds.map(parse_and_mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.prefetch(tf.data.AUTOTUNE)
