"""Pretraining examples: segment pairs for SOP (or NSP, or none), to TFRecords.

Follows google-research/albert ``create_pretraining_data.py``:

* Target length ``max_seq_length - 3`` (room for [CLS] A [SEP] B [SEP]); with
  probability ``short_seq_prob`` a random shorter target in
  ``[2, max_seq_length - 3]``, so the model also sees short inputs.
* Consecutive sentences of one document fill a chunk up to the target; the
  chunk is split at a random sentence boundary into A and B.
* **sop** — with probability 0.5, A and B swap places; label 1 = swapped.
* **nsp** — with probability 0.5 (always, for a one-sentence chunk), B comes
  from a random other document; label 1 = random. The chunk's unused
  sentences go back to be used again, as in the reference.
* **none** — a single segment, ``[CLS] A [SEP]``, label 0.
* The pair is truncated to fit by removing tokens from the longer side, from
  its front or back at random.

Differences from the reference, on purpose:

* In SOP mode a chunk of a single sentence (a sentence longer than the
  target, or a document's last leftover sentence) is split inside the
  sentence at a random token, instead of taking B from another document —
  which would mix NSP-style negatives into SOP.
* Documents with fewer than two sentences are skipped in sop/nsp mode and
  counted (``one_sentence_document``).
* Masking is not done here: shards hold unmasked pairs; the input pipeline
  masks dynamically (`albert_tf.data.masking`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import concurrent.futures.process
import dataclasses
import glob
import json
import multiprocessing as mp
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from albert_tf.data.chinese_wwm import get_segmenter, word_continuation
from albert_tf.data.corpus import ReadStats, expand_inputs, read_documents

SENTENCE_TASKS = ("sop", "nsp", "none")
SHARD_PATTERN = "pretrain-{index:05d}-of-{count:05d}.tfrecord"
METADATA_FILE = "metadata.json"


@dataclasses.dataclass
class PretrainingExample:
    """One unmasked example: ``[CLS] A [SEP] B [SEP]`` and its label."""

    token_ids: list[int]
    segment_ids: list[int]
    sentence_order_label: int
    #: 1 where a piece continues a segmenter word (Chinese whole-word
    #: masking, `albert_tf.data.chinese_wwm`); None when not segmented.
    word_continues: list[int] | None = None


def truncate_seq_pair(
    tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random
) -> None:
    """Truncates in place, one token at a time from the longer list, from its
    front or back at random (avoids always cutting the same end).

    >>> a, b = list(range(6)), [9, 9]
    >>> truncate_seq_pair(a, b, 5, random.Random(0)); len(a), len(b)
    (3, 2)
    """
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def pack_pair(
    tokens_a: Sequence[int], tokens_b: Sequence[int], cls_id: int, sep_id: int
) -> tuple[list[int], list[int]]:
    """``[CLS] A [SEP] B [SEP]`` (or ``[CLS] A [SEP]`` for empty B), segment
    ids 0 for [CLS] A [SEP] and 1 for B [SEP].

    >>> pack_pair([7, 8], [9], cls_id=2, sep_id=3)
    ([2, 7, 8, 3, 9, 3], [0, 0, 0, 0, 1, 1])
    """
    ids = [cls_id, *tokens_a, sep_id]
    segs = [0] * len(ids)
    if tokens_b:
        ids += [*tokens_b, sep_id]
        segs += [1] * (len(tokens_b) + 1)
    return ids, segs


def create_examples_from_document(
    documents: Sequence[Sequence[Sequence[int]]],
    doc_index: int,
    *,
    max_seq_length: int,
    cls_id: int,
    sep_id: int,
    rng: random.Random,
    sentence_task: str = "sop",
    short_seq_prob: float = 0.1,
    stats: collections.Counter | None = None,
) -> list[PretrainingExample]:
    """Examples from ``documents[doc_index]`` (a list of sentences of ids).

    ``documents`` is the whole pool, which NSP draws random B segments from.

    >>> doc = [[10, 11], [12, 13, 14], [15]]
    >>> exs = create_examples_from_document([doc], 0, max_seq_length=16,
    ...     cls_id=2, sep_id=3, rng=random.Random(1), short_seq_prob=0.0)
    >>> [(e.token_ids, e.sentence_order_label) for e in exs]
    [([2, 12, 13, 14, 15, 3, 10, 11, 3], 1)]
    """
    if sentence_task not in SENTENCE_TASKS:
        raise ValueError(f"sentence_task must be one of {SENTENCE_TASKS}")
    stats = stats if stats is not None else collections.Counter()
    document = documents[doc_index]
    pair = sentence_task != "none"
    if pair and len(document) < 2:
        stats["one_sentence_document"] += 1
        return []
    max_num_tokens = max_seq_length - (3 if pair else 2)
    target = max_num_tokens
    if rng.random() < short_seq_prob:
        target = rng.randint(2, max_num_tokens)

    examples: list[PretrainingExample] = []
    chunk: list[Sequence[int]] = []
    chunk_len = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        chunk_len += len(document[i])
        if i == len(document) - 1 or chunk_len >= target:
            label = 0
            if not pair:
                tokens_a = [t for s in chunk for t in s]
                tokens_b: list[int] = []
            else:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                tokens_a = [t for s in chunk[:a_end] for t in s]
                tokens_b = [t for s in chunk[a_end:] for t in s]
                if sentence_task == "nsp" and (len(chunk) == 1 or rng.random() < 0.5):
                    label = 1
                    tokens_b = _random_segment(
                        documents, doc_index, target - len(tokens_a), rng, stats
                    )
                    # Put back the sentences B did not use.
                    i -= len(chunk) - a_end
                elif sentence_task == "sop":
                    if len(chunk) == 1:
                        if len(tokens_a) < 2:
                            stats["one_token_chunk"] += 1
                            tokens_a = []
                        else:
                            cut = rng.randint(1, len(tokens_a) - 1)
                            tokens_a, tokens_b = tokens_a[:cut], tokens_a[cut:]
                            stats["single_sentence_chunk_split"] += 1
                    if rng.random() < 0.5:
                        tokens_a, tokens_b = tokens_b, tokens_a
                        label = 1
            if tokens_a and (tokens_b or not pair):
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                ids, segs = pack_pair(tokens_a, tokens_b, cls_id, sep_id)
                examples.append(PretrainingExample(ids, segs, label))
            chunk, chunk_len = [], 0
        i += 1
    return examples


def _random_segment(
    documents: Sequence[Sequence[Sequence[int]]],
    doc_index: int,
    target_len: int,
    rng: random.Random,
    stats: collections.Counter,
) -> list[int]:
    if len(documents) < 2:
        stats["nsp_single_document_pool"] += 1
        other = documents[doc_index]
    else:
        j = rng.randrange(len(documents) - 1)
        other = documents[j + 1 if j >= doc_index else j]
    start = rng.randrange(len(other))
    out: list[int] = []
    for sentence in other[start:]:
        out.extend(sentence)
        if len(out) >= target_len:
            break
    return out


# --------------------------------------------------------------------------
# Serialization
# --------------------------------------------------------------------------


def serialize_example(example: PretrainingExample) -> bytes:
    """A `tf.train.Example` with int64 lists ``token_ids``, ``segment_ids``
    (unpadded), int64 ``sentence_order_label`` and, for segmented Chinese,
    ``word_continues``."""
    import tensorflow as tf

    def ints(values: Iterable[int]) -> tf.train.Feature:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    feature = {
        "token_ids": ints(example.token_ids),
        "segment_ids": ints(example.segment_ids),
        "sentence_order_label": ints([example.sentence_order_label]),
    }
    if example.word_continues is not None:
        feature["word_continues"] = ints(example.word_continues)
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


# Pair building only slices and concatenates id lists, so a piece's
# "continues a segmenter word" flag rides along as a high bit of its id.
_CONTINUES_BIT = 1 << 40


def _split_flag(ex: PretrainingExample) -> PretrainingExample:
    ids = [t & (_CONTINUES_BIT - 1) for t in ex.token_ids]
    flags = [int(t >= _CONTINUES_BIT) for t in ex.token_ids]
    return PretrainingExample(ids, ex.segment_ids, ex.sentence_order_label, flags)


# --------------------------------------------------------------------------
# Writing shards, in parallel over inputs
# --------------------------------------------------------------------------


@dataclasses.dataclass
class WriteSummary:
    """What `write_pretraining_data` did."""

    documents: int = 0
    sentences: int = 0
    examples: int = 0
    label_counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    skipped: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    notes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    shards: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def merge(self, other: dict) -> None:
        self.documents += other["documents"]
        self.sentences += other["sentences"]
        self.examples += other["examples"]
        self.label_counts.update(other["label_counts"])
        self.skipped.update(other["skipped"])
        self.notes.update(other["notes"])

    def to_dict(self) -> dict:
        return {
            "documents": self.documents,
            "sentences": self.sentences,
            "examples": self.examples,
            "label_counts": {str(k): v for k, v in sorted(self.label_counts.items())},
            "skipped": dict(sorted(self.skipped.items())),
            "notes": dict(sorted(self.notes.items())),
            "num_shards": len(self.shards),
            "seconds": round(self.seconds, 2),
        }

    def report(self) -> str:
        lines = [
            f"documents read:   {self.documents}",
            f"sentences read:   {self.sentences}",
            f"examples written: {self.examples} in {len(self.shards)} shards",
            f"sentence labels:  {dict(sorted(self.label_counts.items()))}",
        ]
        if self.skipped:
            lines += [f"skipped ({k}): {v}" for k, v in sorted(self.skipped.items())]
        else:
            lines.append("skipped: none")
        lines += [f"note ({k}): {v}" for k, v in sorted(self.notes.items())]
        lines.append(f"time: {self.seconds:.1f}s")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class _Task:
    index: int
    kind: str  # "file" or "tfds"
    source: str  # path, or tfds split expression
    tfds_name: str | None = None
    tfds_data_dir: str | None = None
    tfds_text_key: str | None = None


@dataclasses.dataclass(frozen=True)
class _Options:
    tokenizer_dir: str | None
    parts_dir: str
    num_shards: int
    max_seq_length: int
    sentence_task: str
    short_seq_prob: float
    dupe_factor: int
    seed: int
    segmenter: object = None  # "jieba", a picklable callable, or None
    shuffle_buffer: int = 100_000


_WORKER: dict = {}


def _init_worker(progress_queue) -> None:
    _WORKER["queue"] = progress_queue


def _load_tokenizer(tokenizer_dir: str | None):
    if tokenizer_dir is None:  # in-process run with a tokenizer object
        return _WORKER["tokenizer"]
    if _WORKER.get("tokenizer_dir") != tokenizer_dir:
        from albert_tf.tokenizers.base import Tokenizer

        _WORKER["tokenizer"] = Tokenizer.load(tokenizer_dir)
        _WORKER["tokenizer_dir"] = tokenizer_dir
    return _WORKER["tokenizer"]


def _task_documents(task: _Task, stats: ReadStats):
    if task.kind == "file":
        return read_documents(task.source, stats=stats)
    from albert_tf.data.corpus import tfds_documents

    return tfds_documents(
        task.tfds_name,
        split=task.source,
        data_dir=task.tfds_data_dir,
        text_key=task.tfds_text_key,
        stats=stats,
    )


def _process_task(task: _Task, opts: _Options, progress=None) -> dict:
    """Reads, tokenizes and turns one input into examples in per-shard parts."""
    import tensorflow as tf

    progress = progress or _queue_progress
    tokenizer = _load_tokenizer(opts.tokenizer_dir)
    stats = ReadStats()
    notes: collections.Counter = collections.Counter()
    segment = get_segmenter(opts.segmenter) if opts.segmenter is not None else None

    # Tokenize documents in batches of sentences (one tf-text call per batch).
    documents: list[list[list[int]]] = []
    pending: list[list[str]] = []
    pending_sentences = 0

    def flush() -> None:
        nonlocal pending, pending_sentences
        if not pending:
            return
        flat = [s for d in pending for s in d]
        ragged = tokenizer.tokenize(tf.constant(flat))
        ids = ragged.to_list()
        if segment is not None:
            pieces = tokenizer.id_to_token(ragged).to_list()
            for j, sentence in enumerate(flat):
                flags = word_continuation([p.decode() for p in pieces[j]], segment(sentence))
                ids[j] = [t + _CONTINUES_BIT * f for t, f in zip(ids[j], flags, strict=True)]
        k = 0
        for d in pending:
            doc = []
            for _ in d:
                if ids[k]:
                    doc.append(ids[k])
                else:
                    stats.skip("empty_after_tokenization")
                k += 1
            if doc:
                documents.append(doc)
            else:
                stats.skip("empty_document")
        progress(len(pending))
        pending, pending_sentences = [], 0

    for doc in _task_documents(task, stats):
        pending.append(doc)
        pending_sentences += len(doc)
        if pending_sentences >= 2048:
            flush()
    flush()

    rng = random.Random(opts.seed * 1_000_003 + task.index)
    writers = [
        tf.io.TFRecordWriter(os.path.join(opts.parts_dir, f"{s:05d}.{task.index:06d}"))
        for s in range(opts.num_shards)
    ]
    labels: collections.Counter = collections.Counter()
    buffer: list[PretrainingExample] = []
    written = 0

    def drain() -> None:
        nonlocal written
        # Shuffle before writing so one shard does not hold one document's run.
        rng.shuffle(buffer)
        for ex in buffer:
            writers[rng.randrange(opts.num_shards)].write(serialize_example(ex))
        written += len(buffer)
        buffer.clear()

    try:
        for _ in range(opts.dupe_factor):
            for doc_index in range(len(documents)):
                for ex in create_examples_from_document(
                    documents,
                    doc_index,
                    max_seq_length=opts.max_seq_length,
                    cls_id=tokenizer.cls_id,
                    sep_id=tokenizer.sep_id,
                    rng=rng,
                    sentence_task=opts.sentence_task,
                    short_seq_prob=opts.short_seq_prob,
                    stats=notes,
                ):
                    labels[ex.sentence_order_label] += 1
                    buffer.append(_split_flag(ex) if segment is not None else ex)
                if len(buffer) >= opts.shuffle_buffer:
                    drain()
        drain()
    finally:
        for w in writers:
            w.close()
    skipped = collections.Counter(stats.skipped)
    # A one-sentence document is skipped input; the rest are informational.
    skipped["one_sentence_document"] += notes.pop("one_sentence_document", 0)
    skipped = collections.Counter({k: v for k, v in skipped.items() if v})
    # Each dupe pass counts the same skipped documents again; report once.
    if opts.dupe_factor > 1 and skipped["one_sentence_document"]:
        skipped["one_sentence_document"] //= opts.dupe_factor
    return {
        "documents": stats.documents,
        "sentences": stats.sentences,
        "examples": written,
        "label_counts": labels,
        "skipped": skipped,
        "notes": notes,
    }


def _queue_progress(n: int) -> None:
    queue = _WORKER.get("queue")
    if queue is not None:
        queue.put(n)


def _tfds_tasks(name, split, data_dir, text_key, num_workers) -> list[_Task]:
    import tensorflow_datasets as tfds

    splits = tfds.even_splits(split, n=num_workers) if num_workers > 1 else [split]
    return [_Task(i, "tfds", str(s), name, data_dir, text_key) for i, s in enumerate(splits)]


def write_pretraining_data(
    *,
    tokenizer,
    output_dir: str,
    inputs: str | Sequence[str] | None = None,
    tfds_name: str | None = None,
    tfds_split: str = "train",
    tfds_data_dir: str | None = None,
    tfds_text_key: str | None = None,
    max_seq_length: int = 512,
    sentence_task: str = "sop",
    short_seq_prob: float = 0.1,
    dupe_factor: int = 10,
    num_shards: int = 16,
    seed: int = 12345,
    num_workers: int = 1,
    chinese_segmenter: str | Callable[[str], list[str]] | None = None,
    show_progress: bool = True,
    log: Callable[[str], None] = print,
) -> WriteSummary:
    """Writes sharded TFRecords of unmasked pretraining pairs.

    Inputs are local files (``inputs``: paths/globs, comma-separated allowed)
    or a tensorflow-datasets dataset (``tfds_name``). Work runs in parallel
    over input files (over even sub-splits for tfds) in ``num_workers``
    processes. Each input's examples are shuffled (in windows of 100k) and
    spread over ``num_shards`` files
    ``output_dir/pretrain-00000-of-000NN.tfrecord``; ``output_dir`` also gets
    ``metadata.json`` (options and the summary) and ``masking_vocab.json``
    (what the input pipeline needs to mask, see `MaskingVocab`).

    The same inputs, options and seed give byte-identical shards.

    ``chinese_segmenter`` (``"jieba"`` or a picklable ``str -> list[str]``)
    turns on Chinese whole-word masking: each example also stores which CJK
    pieces continue a segmenter word (`albert_tf.data.chinese_wwm`).

    ``tokenizer`` is a directory `Tokenizer.load` reads (each worker loads
    it), or a `Tokenizer` object, which runs in this process only
    (``num_workers`` is then ignored).

    Returns a `WriteSummary` (documents, examples, skips by reason).

    >>> import os, string, tempfile
    >>> from albert_tf.data import sample_path
    >>> from albert_tf.tokenizers import WordPieceTokenizer
    >>> d = tempfile.mkdtemp(); vocab = os.path.join(d, "vocab.txt")
    >>> pieces = list(string.ascii_lowercase) + ["##" + c for c in string.ascii_lowercase]
    >>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...                                       *pieces, ".", ","]))
    >>> summary = write_pretraining_data(
    ...     tokenizer=WordPieceTokenizer(vocab), output_dir=os.path.join(d, "out"),
    ...     inputs=sample_path("en"), max_seq_length=64, dupe_factor=1, num_shards=2,
    ...     show_progress=False, log=None)
    >>> summary.documents, summary.examples > 1000, sorted(os.listdir(os.path.join(d, "out")))[:2]
    (42, True, ['masking_vocab.json', 'metadata.json'])
    """
    if sentence_task not in SENTENCE_TASKS:
        raise ValueError(f"sentence_task must be one of {SENTENCE_TASKS}")
    if (inputs is None) == (tfds_name is None):
        raise ValueError("give exactly one of inputs or tfds_name")
    if max_seq_length < 5:
        raise ValueError("max_seq_length must be at least 5")
    if num_shards < 1 or dupe_factor < 1 or num_workers < 1:
        raise ValueError("num_shards, dupe_factor and num_workers must be >= 1")
    from albert_tf.data.masking import MaskingVocab
    from albert_tf.tokenizers.base import Tokenizer

    start = time.time()
    if isinstance(tokenizer, str | os.PathLike):
        tokenizer_dir: str | None = os.path.abspath(tokenizer)
        tokenizer = Tokenizer.load(tokenizer_dir)  # fail fast, before any work
    else:
        tokenizer_dir = None
        num_workers = 1
        _WORKER["tokenizer"] = tokenizer
        _WORKER.pop("tokenizer_dir", None)
    if inputs is not None:
        tasks = [_Task(i, "file", p) for i, p in enumerate(expand_inputs(inputs))]
    else:
        tasks = _tfds_tasks(tfds_name, tfds_split, tfds_data_dir, tfds_text_key, num_workers)
    os.makedirs(output_dir, exist_ok=True)
    for old in glob.glob(os.path.join(output_dir, "pretrain-*-of-*.tfrecord")):
        os.remove(old)
    parts_dir = os.path.join(output_dir, ".parts")
    shutil.rmtree(parts_dir, ignore_errors=True)
    os.makedirs(parts_dir)
    opts = _Options(
        tokenizer_dir=tokenizer_dir,
        parts_dir=parts_dir,
        num_shards=num_shards,
        max_seq_length=max_seq_length,
        sentence_task=sentence_task,
        short_seq_prob=short_seq_prob,
        dupe_factor=dupe_factor,
        seed=seed,
        segmenter=chinese_segmenter,
    )
    if chinese_segmenter is not None:
        get_segmenter(chinese_segmenter)  # fail fast if jieba is missing
    summary = WriteSummary()
    _run_tasks(tasks, opts, summary, num_workers, show_progress)

    # Concatenate parts into shards: TFRecord files concatenate byte-wise.
    for s in range(num_shards):
        path = os.path.join(output_dir, SHARD_PATTERN.format(index=s, count=num_shards))
        with open(path, "wb") as out:
            for task in tasks:
                part = os.path.join(parts_dir, f"{s:05d}.{task.index:06d}")
                with open(part, "rb") as fh:
                    shutil.copyfileobj(fh, out)
        summary.shards.append(path)
    shutil.rmtree(parts_dir)

    MaskingVocab.from_tokenizer(tokenizer).save(output_dir)
    summary.seconds = time.time() - start
    meta = {
        "format": "albert_tf pretraining shards v1",
        "max_seq_length": max_seq_length,
        "sentence_task": sentence_task,
        "short_seq_prob": short_seq_prob,
        "dupe_factor": dupe_factor,
        "seed": seed,
        "chinese_whole_word_masking": chinese_segmenter is not None,
        "tokenizer_dir": tokenizer_dir,
        "tokenizer_kind": getattr(tokenizer, "kind", None),
        "vocabulary_size": int(tokenizer.vocabulary_size),
        "inputs": [t.source for t in tasks],
        "tfds_name": tfds_name,
        "summary": summary.to_dict(),
    }
    with open(os.path.join(output_dir, METADATA_FILE), "w") as fh:
        json.dump(meta, fh, indent=2)
    if log is not None:
        log(summary.report())
    return summary


def _run_tasks(
    tasks: list[_Task],
    opts: _Options,
    summary: WriteSummary,
    num_workers: int,
    show_progress: bool,
) -> None:
    from tqdm.auto import tqdm

    docs_bar = tqdm(unit=" docs", desc="tokenizing", disable=not show_progress)
    inputs_bar = tqdm(total=len(tasks), unit=" inputs", desc="inputs", disable=not show_progress)
    try:
        if num_workers == 1 or len(tasks) == 1:
            for task in tasks:
                summary.merge(_process_task(task, opts, progress=docs_bar.update))
                inputs_bar.update()
            return
        # spawn: TensorFlow's runtime does not survive fork(). An executor
        # rather than multiprocessing.Pool: when a worker dies (killed, out of
        # memory, or a spawned child that cannot re-import the parent's
        # __main__), Pool silently starts another and waits forever; the
        # executor fails every pending task with BrokenProcessPool.
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        with concurrent.futures.ProcessPoolExecutor(
            min(num_workers, len(tasks)),
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(queue,),
        ) as pool:
            pending = {pool.submit(_process_task, t, opts) for t in tasks}
            while pending:
                done, pending = concurrent.futures.wait(pending, timeout=0.1)
                _drain_queue(queue, docs_bar)
                for future in done:
                    try:
                        summary.merge(future.result())  # re-raises worker errors
                    except concurrent.futures.process.BrokenProcessPool as e:
                        raise RuntimeError(
                            "A data-writing worker process died before finishing its "
                            "input (killed, out of memory, or unable to start: spawned "
                            f"workers re-import the program's __main__ module, "
                            f"{_main_file()!r}). Run with num_workers=1 "
                            "(--num_workers=1) to write in this process."
                        ) from e
                    inputs_bar.update()
            _drain_queue(queue, docs_bar)
    finally:
        docs_bar.close()
        inputs_bar.close()


def _main_file() -> str | None:
    return getattr(sys.modules.get("__main__"), "__file__", None)


def _drain_queue(queue, bar) -> None:
    import queue as queue_lib

    while True:
        try:
            bar.update(queue.get_nowait())
        except queue_lib.Empty:
            return


def read_metadata(directory: str) -> dict | None:
    """The ``metadata.json`` `write_pretraining_data` wrote, or None."""
    path = os.path.join(directory, METADATA_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def label_balance(summary: WriteSummary) -> float:
    """Fraction of examples with sentence label 1."""
    total = sum(summary.label_counts.values())
    return float(np.divide(summary.label_counts.get(1, 0), max(total, 1)))
