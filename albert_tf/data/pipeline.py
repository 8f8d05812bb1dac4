"""The pretraining input pipeline: shards → dynamic masking → batches.

`pretraining_dataset` reads shards, masks and batches as a `PipelineConfig` says
(read → mask → batch → (serve), one function each) and yields ``(features, labels)``:

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

With ``tokens_per_batch`` (token-budget batching, as RoBERTa's), examples are
masked exactly as above, then grouped by length into buckets
(`token_budget_buckets`): a batch holds ``tokens_per_batch // L`` examples of
one bucket, padded to the bucket's length ``L`` rather than ``max_seq_length``,
and P shrinks to what masking can fill at ``L``. Every bucket keeps one batch
shape, so a training step traces at most once per bucket.

With ``data_service`` the batches are made by tf.data service workers
(`tf.data.experimental.service`); masks then come from seeds each worker draws
itself, so they are fresh but not reproducible.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import tensorflow as tf

from albert_tf import storage
from albert_tf.data.choices import DATA_SERVICE_MODES
from albert_tf.data.masking import Masker, MaskingVocab
from albert_tf.data.shards import read_metadata

# Ops that call back into the Python process that built the dataset: a tf.data
# service worker runs the graph without that process.
_PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})

# With token-budget batching, examples are parsed and masked this many at a
# time (vectorised) before being regrouped by length.
_MASKING_CHUNK = 256

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


def token_budget_buckets(max_seq_length: int, smallest: int = 16) -> list[int]:
    """Bucket lengths of token-budget batching: powers of two from ``smallest``
    up to ``max_seq_length``, which is always the last.

    Doubling keeps the buckets few (one step trace each) and pads an example
    to less than twice its length.

    >>> token_budget_buckets(512)
    [16, 32, 64, 128, 256, 512]
    >>> token_budget_buckets(100), token_budget_buckets(12)
    ([16, 32, 64, 100], [12])
    """
    lengths = []
    length = smallest
    while length < max_seq_length:
        lengths.append(length)
        length *= 2
    return [*lengths, max_seq_length]


def token_budget_batch_sizes(
    tokens_per_batch: int, bucket_lengths: Sequence[int], multiple: int = 1
) -> list[int]:
    """Examples per batch of each bucket: ``tokens_per_batch // length``, rounded
    down to a multiple of ``multiple`` (the replicas sharing a batch), at least one
    multiple.

    >>> token_budget_batch_sizes(4096, [16, 32, 64, 128], multiple=8)
    [256, 128, 64, 32]
    >>> token_budget_batch_sizes(100, [16, 32, 64], multiple=2)
    [6, 2, 2]
    """
    return [max(multiple, tokens_per_batch // n // multiple * multiple) for n in bucket_lengths]


def check_serializable(dataset: tf.data.Dataset) -> None:
    """Raises ValueError if ``dataset`` calls back into Python
    (`tf.py_function`, `tf.numpy_function`): tf.data service workers run the
    serialized graph without the process that holds those callbacks, and would
    fail only when the first batch is requested."""
    # No public API lists a dataset's ops; the serialized graph is what the
    # service sends to its workers, so it is the thing to check.
    serialized = dataset._as_serialized_graph(
        external_state_policy=tf.data.experimental.ExternalStatePolicy.IGNORE
    )
    graph = tf.compat.v1.GraphDef.FromString(serialized.numpy())
    ops = {n.op for n in graph.node}
    ops.update(n.op for f in graph.library.function for n in f.node_def)
    python = sorted(ops & _PYTHON_OPS)
    if python:
        raise ValueError(
            f"the input pipeline runs Python ({', '.join(python)}: tf.py_function or "
            "tf.numpy_function), which tf.data service workers cannot run; express it "
            "with TensorFlow ops or train without --data_service"
        )


def _fresh_seed() -> tf.Tensor:
    """A random int64, new at each call and on each tf.data service worker.

    Seeds given as numbers (or derived from the global seed) are baked into
    the graph the client sends, so every worker would draw the same values;
    seed=seed2=0 makes the op seed itself where its kernel is created.
    """
    return tf.raw_ops.RandomUniformInt(
        shape=tf.constant([], tf.int32),
        minval=tf.constant(0, tf.int64),
        maxval=tf.constant(2**62, tf.int64),
        seed=0,
        seed2=0,
    )


def _rows_of_worker(num_workers: int, index: int):
    """A map function: worker ``index``'s contiguous part of every batch tensor,
    as `albert_tf.training.steps.replica_slices` cuts a global batch."""
    if not 0 <= index < num_workers:
        raise ValueError(f"worker index {index} is not in [0, {num_workers})")

    def rows(*batch):
        def take(t):
            n = tf.shape(t)[0]
            return t[index * n // num_workers : (index + 1) * n // num_workers]

        return tf.nest.map_structure(take, batch)

    return rows


def _token_budget_batches(
    ds: tf.data.Dataset,
    *,
    bucket_lengths: Sequence[int],
    batch_sizes: Sequence[int],
    max_predictions: int,
    masked_lm_prob: float,
    drop_remainder: bool,
) -> tf.data.Dataset:
    """Masked examples (padded to max_seq_length) → batches of one bucket each,
    padded to the bucket's length."""
    lengths = tf.constant(bucket_lengths, tf.int32)
    sizes = tf.constant(batch_sizes, tf.int64)
    # Masking predicts at most round(masked_lm_prob · length) tokens; floor + 1
    # bounds that whatever the rounding, so trimming drops no real prediction.
    predictions = tf.constant(
        [min(max_predictions, int(masked_lm_prob * n) + 1) for n in bucket_lengths], tf.int32
    )

    def bucket(length: tf.Tensor) -> tf.Tensor:
        # The first bucket at least as long as the example.
        return tf.searchsorted(lengths, tf.reshape(length, [1]), side="left")[0]

    def trim(features: dict, labels: dict):
        b = bucket(tf.reduce_sum(features["padding_mask"]))
        seq, pred = lengths[b], predictions[b]
        features = {k: v[:pred] if k == "mask_positions" else v[:seq] for k, v in features.items()}
        labels = {
            "mask_ids": labels["mask_ids"][:pred],
            "mask_weights": labels["mask_weights"][:pred],
            "sentence_order_label": labels["sentence_order_label"],
        }
        return features, labels

    def key(features: dict, labels: dict) -> tf.Tensor:
        # Trimmed to its bucket's length: the length names the bucket.
        return tf.cast(bucket(tf.size(features["padding_mask"])), tf.int64)

    ds = ds.map(trim, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.group_by_window(
        key,
        lambda k, window: window.batch(tf.gather(sizes, k), drop_remainder=drop_remainder),
        window_size_func=lambda k: tf.gather(sizes, k),
    )


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
    config = PipelineConfig(
        batch_size=batch_size,
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        seed=seed,
        shuffle=False,
        repeat=False,
        drop_remainder=False,
    )
    return pretraining_dataset(file_pattern, config)


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """How `pretraining_dataset` reads, masks and batches (as Model Garden's
    ``DataConfig``): every setting of the pipeline, validated in one place.

    Attributes:
      batch_size: examples per batch; with an ``input_context``, the *global*
        batch size, divided among replicas.
      max_seq_length: padded length; shards written for a longer length are
        an error.
      max_predictions_per_seq: P; default ``round(0.15 · max_seq_length)``.
      masked_lm_prob: the share of tokens masked.
      seed: fixes file order, shuffling and masks.
      shuffle: shuffle files and examples.
      repeat: repeat forever (epochs get different masks).
      shuffle_buffer_size: examples in the shuffle buffer.
      cycle_length: files read at once.
      drop_remainder: drop a last short batch.
      tokens_per_batch: token budget of a batch (instead of ``batch_size``,
        which is then unused): each batch holds examples of one bucket, as
        many as ``tokens_per_batch // bucket length``, padded to that length.
        With an ``input_context``, the global budget, divided among replicas.
      bucket_lengths: ascending bucket lengths for ``tokens_per_batch``;
        default `token_budget_buckets(max_seq_length)`. The last must be
        ``max_seq_length``.
      batch_size_multiple: token-budget batch sizes are multiples of this
        (the replicas that split each batch).
      worker_rows: ``(num_workers, worker_index)``: each batch is this worker's
        rows of the global batch (its index-th of num_workers contiguous
        parts). Every worker reads the same records in the same order; only
        its rows are parsed and masked (with token budgets, all rows are
        masked: the budget groups by length after masking). So N workers
        train on exactly the global batches of one and each masks 1/N of the
        examples. The iterator's buffers then hold this worker's rows: each
        worker saves its own input position (the pretraining trainer does).
      return_spans: add ``span_lengths`` to features (for tests/statistics).
      data_service: a tf.data service dispatcher (``grpc://host:port``); the
        batches are then made by its workers and sent here.
      data_service_mode: one of `DATA_SERVICE_MODES`. ``parallel_epochs``:
        every worker reads all files, shuffled with its own seed (each
        example comes once per worker and epoch). ``distributed_epoch``: the
        dispatcher deals out the files, so an epoch holds each example once.
      job_name: the service job; datasets with the same name share it (a
        restarted client rejoins it). Default: a job of this dataset's own.
    """

    batch_size: int
    max_seq_length: int
    max_predictions_per_seq: int | None = None
    masked_lm_prob: float = 0.15
    seed: int = 0
    shuffle: bool = True
    repeat: bool = True
    shuffle_buffer_size: int = 10_000
    cycle_length: int = 8
    drop_remainder: bool = True
    tokens_per_batch: int | None = None
    bucket_lengths: tuple[int, ...] | None = None
    batch_size_multiple: int = 1
    worker_rows: tuple[int, int] | None = None
    return_spans: bool = False
    data_service: str | None = None
    data_service_mode: str = "parallel_epochs"
    job_name: str | None = None

    def __post_init__(self):
        if self.data_service and self.data_service_mode not in DATA_SERVICE_MODES:
            raise ValueError(
                f"data_service_mode={self.data_service_mode!r} must be one of {DATA_SERVICE_MODES}"
            )
        if self.tokens_per_batch is not None:
            buckets = self.buckets
            if buckets != sorted(set(buckets)) or buckets[-1] != self.max_seq_length:
                raise ValueError(
                    f"bucket_lengths={buckets} must ascend and end at "
                    f"max_seq_length={self.max_seq_length}"
                )
        if self.worker_rows is not None:
            workers, index = self.worker_rows
            if not 0 <= index < workers:
                raise ValueError(f"worker index {index} is not in [0, {workers})")

    @property
    def buckets(self) -> list[int]:
        """The token-budget buckets: ``bucket_lengths``, or the default for
        ``max_seq_length`` (computed, not stored, so a changed length gets its own)."""
        return list(self.bucket_lengths or token_budget_buckets(self.max_seq_length))


@dataclasses.dataclass(frozen=True)
class _Split:
    """Where this input pipeline sits among several (`tf.distribute.InputContext`)."""

    pipeline_id: int = 0
    per_replica_batch: int = 0
    tokens_per_batch: int | None = None
    files: tuple[str, ...] = ()
    shard_records: tuple[int, int] | None = None  # every n-th record, when files are few


def pretraining_dataset(
    file_pattern: str | list[str],
    config: PipelineConfig | None = None,
    *,
    tokenizer=None,
    input_context: tf.distribute.InputContext | None = None,
    **settings,
) -> tf.data.Dataset:
    """Reads pretraining shards, masks dynamically, batches and prefetches:
    read → mask → batch → (serve).

    Args:
      file_pattern: glob(s) of the TFRecord shards `write_pretraining_data`
        wrote.
      config: a `PipelineConfig`; or give its fields as keywords (``settings``),
        which also override a given ``config``'s.
      tokenizer: a `Tokenizer` or `MaskingVocab`; default: the
        ``masking_vocab.json`` next to the shards.
      input_context: from `tf.distribute.Strategy.distribute_datasets_from_function`;
        each input pipeline reads its own files (or every n-th example when
        there are fewer files than pipelines) with its own seed. With
        ``data_service`` the pipelines share one job instead, which deals
        batches out among them.

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
    config = _config(config, settings)
    if config.worker_rows is not None and input_context is not None:
        raise ValueError("worker_rows and input_context are two ways to split input: pick one")
    files = _shard_files(file_pattern, config.max_seq_length)
    vocab = _resolve_vocab(tokenizer, files)
    masker = Masker(
        vocab,
        max_seq_length=config.max_seq_length,
        max_predictions_per_seq=config.max_predictions_per_seq,
        masked_lm_prob=config.masked_lm_prob,
    )
    split = _split(files, config, input_context)
    ds = _read(split, config)
    ds = _mask_and_batch(ds, masker, split, config)
    if config.data_service:
        ds = _serve(ds, config)
    return ds.prefetch(tf.data.AUTOTUNE)


def _config(config: PipelineConfig | None, settings: dict) -> PipelineConfig:
    if config is None:
        return PipelineConfig(**settings)
    return dataclasses.replace(config, **settings) if settings else config


def _shard_files(file_pattern: str | list[str], max_seq_length: int) -> list[str]:
    """The shard files, sorted; refused if none match or they were written longer."""
    patterns = [file_pattern] if isinstance(file_pattern, str) else list(file_pattern)
    files = sorted({f for p in patterns for f in storage.glob(p)})
    if not files:
        raise FileNotFoundError(f"no pretraining shards match {file_pattern}")
    meta = read_metadata(os.path.dirname(files[0]))
    if meta is not None and meta["max_seq_length"] > max_seq_length:
        raise ValueError(
            f"shards were written for max_seq_length={meta['max_seq_length']}, "
            f"longer than max_seq_length={max_seq_length}"
        )
    return files


def _split(
    files: list[str], config: PipelineConfig, context: tf.distribute.InputContext | None
) -> _Split:
    """This pipeline's files (or records), batch and budget among ``context``'s."""
    if context is None:
        return _Split(0, config.batch_size, config.tokens_per_batch, tuple(files))
    tokens = config.tokens_per_batch
    if tokens is not None:
        tokens //= context.num_replicas_in_sync
    pipeline_id, n = context.input_pipeline_id, context.num_input_pipelines
    shard_records = None
    # A shared service job deals batches out among the pipelines itself.
    if not config.data_service:
        if len(files) >= n:
            files = files[pipeline_id::n]
        else:
            shard_records = (n, pipeline_id)
    per_replica = context.get_per_replica_batch_size(config.batch_size)
    return _Split(pipeline_id, per_replica, tokens, tuple(files), shard_records)


def _read(split: _Split, config: PipelineConfig) -> tf.data.Dataset:
    """(index, serialized example) pairs: files then a buffer shuffled, numbered."""
    files = list(split.files)

    def examples(shuffle_seed: int | tf.Tensor) -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices(files)
        if config.shuffle:
            ds = ds.shuffle(len(files), seed=shuffle_seed, reshuffle_each_iteration=True)
        if config.repeat:
            ds = ds.repeat()
        ds = ds.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(config.cycle_length, len(files)),
            block_length=1,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        if split.shard_records is not None:
            ds = ds.shard(*split.shard_records)
        if config.shuffle:
            ds = ds.shuffle(
                config.shuffle_buffer_size, seed=shuffle_seed, reshuffle_each_iteration=True
            )
        # Counting examples gives each one (in each epoch) its own seed.
        return ds.enumerate()

    if config.data_service and config.data_service_mode == "parallel_epochs" and config.shuffle:
        # Every worker reads all files: each must shuffle with a seed of its
        # own, drawn when it starts, or all would send the same batches.
        return tf.data.Dataset.from_tensors(0).map(lambda _: _fresh_seed()).flat_map(examples)
    # Locally, and with distributed_epoch, whose dispatcher shuffles and
    # deals out the files (so the file list must stay the first source).
    return examples(config.seed)


_DRAW_SIGNATURE = {
    "ngram": tf.int32,
    "order_key": tf.float32,
    "replace_u": tf.float32,
    "random_index": tf.int32,
}


def _parse_and_mask(masker: Masker, split: _Split, config: PipelineConfig):
    """A map function: a batch of (index, record) pairs → masked (features, labels)."""
    max_seq_length = config.max_seq_length
    pad_id = masker.vocab.pad_id
    base_seed = tf.constant([config.seed, split.pipeline_id], tf.int64)

    def parse_and_mask(indices: tf.Tensor, records: tf.Tensor):
        # Everything runs on whole batches (far fewer op launches) except the
        # per-example random draws, which keep masks independent of batching.
        batch_seed = base_seed
        if config.data_service:
            # Service workers count examples from 0 each: a fresh draw per
            # batch keeps two workers' examples from sharing masks.
            batch_seed = tf.random.experimental.stateless_fold_in(base_seed, _fresh_seed())

        def example_draws(index: tf.Tensor) -> dict[str, tf.Tensor]:
            # Each example's own random numbers, keyed by (seed, its index).
            return masker.random_draws(tf.random.experimental.stateless_fold_in(batch_seed, index))

        ex = tf.io.parse_example(records, _FEATURES)
        lengths = tf.cast(ex["token_ids"].row_lengths(), tf.int32)
        check = tf.debugging.assert_less_equal(
            tf.reduce_max(lengths), max_seq_length, message="example longer than max_seq_length"
        )
        with tf.control_dependencies([check]):
            ids = tf.cast(ex["token_ids"], tf.int32).to_tensor(pad_id, shape=[None, max_seq_length])
        segs = tf.cast(ex["segment_ids"], tf.int32).to_tensor(0, shape=[None, max_seq_length])
        draws = tf.map_fn(example_draws, indices, fn_output_signature=_DRAW_SIGNATURE)
        continues = ex["word_continues"].to_tensor(0, shape=[None, max_seq_length])
        m = masker.mask_batch(
            ids, lengths, draws, word_continues=continues, return_spans=config.return_spans
        )
        features = {
            "token_ids": m["token_ids"],
            "segment_ids": segs,
            "padding_mask": tf.cast(tf.range(max_seq_length)[None, :] < lengths[:, None], tf.int32),
            "mask_positions": m["mask_positions"],
        }
        if config.return_spans:
            features["span_lengths"] = m["span_lengths"]
        labels = {
            "mask_ids": m["mask_ids"],
            "mask_weights": m["mask_weights"],
            "sentence_order_label": tf.cast(ex["sentence_order_label"], tf.int32),
        }
        return features, labels

    return parse_and_mask


def _mask_and_batch(
    ds: tf.data.Dataset, masker: Masker, split: _Split, config: PipelineConfig
) -> tf.data.Dataset:
    """Numbered records → masked batches: fixed-size, or by token budget."""
    parse_and_mask = _parse_and_mask(masker, split, config)
    if split.tokens_per_batch is None:
        ds = ds.batch(split.per_replica_batch, drop_remainder=config.drop_remainder)
        if config.worker_rows is not None:
            ds = ds.map(_rows_of_worker(*config.worker_rows))
        return ds.map(parse_and_mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    # Masked as fixed batches are (same seeds, same masks), then regrouped.
    ds = ds.batch(_MASKING_CHUNK)
    ds = ds.map(parse_and_mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    ds = _token_budget_batches(
        ds.unbatch(),
        bucket_lengths=config.buckets,
        batch_sizes=token_budget_batch_sizes(
            split.tokens_per_batch, config.buckets, config.batch_size_multiple
        ),
        max_predictions=masker.max_predictions_per_seq,
        masked_lm_prob=config.masked_lm_prob,
        drop_remainder=config.drop_remainder,
    )
    if config.worker_rows is not None:
        ds = ds.map(_rows_of_worker(*config.worker_rows))
    return ds


def _serve(ds: tf.data.Dataset, config: PipelineConfig) -> tf.data.Dataset:
    """The batches made by tf.data service workers instead of this process."""
    check_serializable(ds)
    # Workers keep batches ready; the client prefetches what arrives.
    return ds.prefetch(tf.data.AUTOTUNE).apply(
        tf.data.experimental.service.distribute(
            processing_mode=config.data_service_mode,
            service=config.data_service,
            job_name=config.job_name,
        )
    )
