"""Writing sharded TFRecords of unmasked pretraining pairs, at any corpus size.

`write_pretraining_data` plans many bounded `InputTask`s
(`albert_tf.data.tasks`: byte ranges of files, slices of tfds splits). A
`ShardWriter`, given the tokenizer explicitly, streams one task a pool of
documents at a time into examples (`albert_tf.data.examples`) spread over one
part file per shard, then marks the task done; the parts are concatenated into
``pretrain-00000-of-000NN.tfrecord`` shards, then ``masking_vocab.json`` and,
last, ``metadata.json`` are written. Tasks run in this process, in a pool of
spawned processes, or as a Beam pipeline (`albert_tf.data.beam_pipeline`).
Memory is bounded by one pool and one shuffle window per process.
"""

from __future__ import annotations

import collections
import concurrent.futures
import concurrent.futures.process
import contextlib
import dataclasses
import gc
import hashlib
import itertools
import json
import multiprocessing as mp
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from albert_tf import storage
from albert_tf.data.chinese_wwm import get_segmenter, word_continuation
from albert_tf.data.corpus import LocatedDocument, ReadStats
from albert_tf.data.examples import (
    PACKINGS,
    SENTENCE_TASKS,
    PretrainingExample,
    create_examples_from_document,
    create_full_sentence_examples,
    serialize_example,
)
from albert_tf.data.inputs import resolve_inputs
from albert_tf.data.packed_document import PackedDocument
from albert_tf.data.tasks import (
    POOL_BYTES,
    TASK_BYTES,
    InputTask,
    document_rng,
    plan_file_tasks,
    plan_tfds_tasks,
)

if TYPE_CHECKING:
    from albert_tf.tokenizers.base import Tokenizer

SHARD_PATTERN = "pretrain-{index:05d}-of-{count:05d}.tfrecord"
METADATA_FILE = "metadata.json"

# Sentences tokenized per tf-text call: large enough to amortize the call,
# small enough to bound the memory of one batch.
_TOKENIZE_BATCH_SENTENCES = 2048

# Pair building only slices and concatenates id lists, so a piece's
# "continues a segmenter word" flag rides along as a high bit of its id.
_CONTINUES_BIT = 1 << 40


def _split_flag(ex: PretrainingExample) -> PretrainingExample:
    ids = [t & (_CONTINUES_BIT - 1) for t in ex.token_ids]
    flags = [int(t >= _CONTINUES_BIT) for t in ex.token_ids]
    return PretrainingExample(ids, ex.segment_ids, ex.sentence_order_label, flags)


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
    tasks: int = 0
    resumed_tasks: int = 0

    def merge(self, other: WriteSummary) -> None:
        """Adds the counts of one task."""
        self.documents += other.documents
        self.sentences += other.sentences
        self.examples += other.examples
        self.label_counts.update(other.label_counts)
        self.skipped.update(other.skipped)
        self.notes.update(other.notes)

    def to_state(self) -> dict:
        """The counts of one task, for its done marker (`from_state` reads it)."""
        return {
            "documents": self.documents,
            "sentences": self.sentences,
            "examples": self.examples,
            "label_counts": {str(k): v for k, v in self.label_counts.items()},
            "skipped": dict(self.skipped),
            "notes": dict(self.notes),
        }

    @classmethod
    def from_state(cls, state: dict) -> WriteSummary:
        return cls(
            documents=state["documents"],
            sentences=state["sentences"],
            examples=state["examples"],
            label_counts=collections.Counter({int(k): v for k, v in state["label_counts"].items()}),
            skipped=collections.Counter(state["skipped"]),
            notes=collections.Counter(state["notes"]),
        )

    def to_dict(self) -> dict:
        return {
            "documents": self.documents,
            "sentences": self.sentences,
            "examples": self.examples,
            "label_counts": {str(k): v for k, v in sorted(self.label_counts.items())},
            "skipped": dict(sorted(self.skipped.items())),
            "notes": dict(sorted(self.notes.items())),
            "num_shards": len(self.shards),
            "tasks": self.tasks,
            "resumed_tasks": self.resumed_tasks,
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
        if self.resumed_tasks:
            lines.append(f"resumed: {self.resumed_tasks} of {self.tasks} tasks were done before")
        lines.append(f"time: {self.seconds:.1f}s")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class ShardOptions:
    """How examples are made and spread over shards (picklable, for workers)."""

    num_shards: int
    max_seq_length: int
    sentence_task: str
    short_seq_prob: float
    dupe_factor: int
    seed: int
    segmenter: object = None  # "jieba", a picklable callable, or None
    packing: str = "doc_sentences"
    #: Examples are shuffled in windows of this many serialized bytes before
    #: being spread over shards (bounded, unlike a window counted in examples).
    shuffle_buffer_bytes: int = 32 << 20


class ShardWriter:
    """Turns one `InputTask` into examples, streaming one pool at a time.

    `examples` yields a task's serialized examples: memory holds one pool of
    tokenized documents (all ``dupe_factor`` passes are made from it before
    the next pool is read), so it does not grow with the input. `write` puts
    them, shuffled in a bounded window, into one part file per shard,
    ``{shard:05d}.{task:06d}`` in ``parts_dir``. ``progress`` is called with
    the number of documents tokenized so far.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        options: ShardOptions,
        parts_dir: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.options = options
        self.parts_dir = parts_dir
        self.progress = progress
        self.segment = get_segmenter(options.segmenter) if options.segmenter is not None else None

    def examples(self, task: InputTask, summary: WriteSummary) -> Iterator[bytes]:
        """The task's serialized examples, in a deterministic order; fills
        ``summary`` with its counts once exhausted."""
        opts = self.options
        stats = ReadStats()
        notes: collections.Counter = collections.Counter()
        for _, pool in itertools.groupby(task.documents(stats), key=lambda d: task.pool_of(d[0])):
            positions, documents = self._tokenize_pool(list(pool), stats)
            for dupe_pass in range(opts.dupe_factor):
                for ex in self._pool_examples(task, positions, documents, dupe_pass, notes):
                    summary.label_counts[ex.sentence_order_label] += 1
                    summary.examples += 1
                    yield serialize_example(_split_flag(ex) if self.segment is not None else ex)
        skipped = collections.Counter(stats.skipped)
        # A one-sentence document is skipped input; the rest are informational.
        # Each dupe pass meets the same one-sentence documents again: count once.
        skipped["one_sentence_document"] += (
            notes.pop("one_sentence_document", 0) // opts.dupe_factor
        )
        summary.documents += stats.documents
        summary.sentences += stats.sentences
        summary.skipped.update({k: v for k, v in skipped.items() if v})
        summary.notes.update(notes)

    def _pool_examples(
        self,
        task: InputTask,
        positions: list[int],
        documents: list[PackedDocument],
        dupe_pass: int,
        notes: collections.Counter,
    ) -> Iterator[PretrainingExample]:
        opts = self.options
        common = dict(
            max_seq_length=opts.max_seq_length,
            cls_id=self.tokenizer.cls_id,
            sep_id=self.tokenizer.sep_id,
        )
        if opts.packing == "full_sentences":
            # The same inputs in every pass: what differs is the dynamic masking.
            yield from create_full_sentence_examples(documents, **common)
            return
        for i, position in enumerate(positions):
            yield from create_examples_from_document(
                documents,
                i,
                rng=document_rng(opts.seed, task.name, position, dupe_pass),
                sentence_task=opts.sentence_task,
                short_seq_prob=opts.short_seq_prob,
                stats=notes,
                **common,
            )

    def write(self, task: InputTask) -> WriteSummary:
        """Writes one task's part files; returns its counts."""
        import tensorflow as tf

        assert self.parts_dir is not None, "write() needs a parts_dir"
        opts = self.options
        summary = WriteSummary()
        # Seeded by the task's identity: the same command writes the same parts.
        rng = random.Random(f"{opts.seed}|shards|{task.name}|{task.start}")
        writers = [
            tf.io.TFRecordWriter(part_path(self.parts_dir, s, task.index))
            for s in range(opts.num_shards)
        ]
        buffer: list[bytes] = []
        size = 0
        with _rare_collections():
            try:
                for record in self.examples(task, summary):
                    buffer.append(record)
                    size += len(record)
                    if size >= opts.shuffle_buffer_bytes:
                        _shuffle_out(buffer, writers, rng)
                        size = 0
                _shuffle_out(buffer, writers, rng)
            finally:
                for w in writers:
                    w.close()
        return summary

    def _tokenize_pool(
        self, pool: list[LocatedDocument], stats: ReadStats
    ) -> tuple[list[int], list[PackedDocument]]:
        """Positions and tokenized sentences of a pool's documents (those left
        non-empty by tokenization), tokenized in bounded batches."""
        positions: list[int] = []
        documents: list[PackedDocument] = []
        batch: list[LocatedDocument] = []
        count = 0
        for item in pool:
            batch.append(item)
            count += len(item[1])
            if count >= _TOKENIZE_BATCH_SENTENCES:
                self._tokenize_batch(batch, stats, positions, documents)
                batch, count = [], 0
        if batch:
            self._tokenize_batch(batch, stats, positions, documents)
        return positions, documents

    def _tokenize_batch(
        self,
        batch: list[LocatedDocument],
        stats: ReadStats,
        positions: list[int],
        documents: list[PackedDocument],
    ) -> None:
        flat, splits = self._sentence_ids([s for _, d in batch for s in d])
        k = 0
        for position, d in batch:
            base, stop = splits[k], splits[k + len(d)]
            # A sentence tokenized to nothing is dropped: it ends where the last one did.
            ends = [
                b - base
                for a, b in zip(splits[k : k + len(d)], splits[k + 1 : k + len(d) + 1], strict=True)
                if b > a
            ]
            k += len(d)
            if len(ends) < len(d):
                stats.skip("empty_after_tokenization", len(d) - len(ends))
            if ends:
                positions.append(position)
                documents.append(PackedDocument(flat[base:stop], ends))
            else:
                stats.skip("empty_document")
        if self.progress is not None:
            self.progress(len(batch))

    def _sentence_ids(self, sentences: list[str]) -> tuple[list[int], list[int]]:
        """Piece ids of all ``sentences`` end to end, and the row splits that
        cut them into sentences; with a segmenter, word continuation rides
        along in `_CONTINUES_BIT`."""
        flat_ids, row_splits = self.tokenizer.tokenize_on_host(sentences)
        flat = flat_ids.tolist()
        splits = row_splits.tolist()
        if self.segment is not None:
            import tensorflow as tf

            ragged = tf.RaggedTensor.from_row_splits(flat_ids, row_splits)
            pieces = self.tokenizer.id_to_token(ragged).to_list()
            for j, sentence in enumerate(sentences):
                flags = word_continuation([p.decode() for p in pieces[j]], self.segment(sentence))
                a, b = splits[j], splits[j + 1]
                flat[a:b] = [t + _CONTINUES_BIT * f for t, f in zip(flat[a:b], flags, strict=True)]
        return flat, splits


@contextlib.contextmanager
def _rare_collections() -> Iterator[None]:
    """Runs the cycle collector rarely for the duration.

    A pool holds hundreds of thousands of small id lists, which form no
    cycles; at Python's default threshold the collector traverses them again
    and again, about 7% of a preparation's time.
    """
    threshold = gc.get_threshold()
    gc.set_threshold(max(threshold[0], 100_000), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)


def _shuffle_out(buffer: list[bytes], writers: list, rng: random.Random) -> None:
    """Writes and empties ``buffer``, shuffled, each record to a random shard."""
    # Shuffle before writing so one shard does not hold one document's run.
    rng.shuffle(buffer)
    for record in buffer:
        writers[rng.randrange(len(writers))].write(record)
    buffer.clear()


def part_path(parts_dir: str, shard: int, task_index: int) -> str:
    """Where task ``task_index`` writes its examples for shard ``shard``."""
    return os.path.join(parts_dir, f"{shard:05d}.{task_index:06d}")


def concatenate_parts(parts_dir: str, shard: int, task_indices: Sequence[int], path: str) -> None:
    """Writes shard ``path`` from its parts, in the order of ``task_indices``
    (TFRecord files concatenate byte-wise). The shard gets its final name only
    once it is whole, so a shard file that exists is complete."""
    with storage.open_file(path + ".partial", "wb") as out:
        for index in task_indices:
            with storage.open_file(part_path(parts_dir, shard, index), "rb") as fh:
                shutil.copyfileobj(fh, out, 1 << 22)
    storage.replace(path + ".partial", path)


def run_task(writer: ShardWriter, task: InputTask, parts_dir: str) -> WriteSummary:
    """Writes a task's parts, then its done marker (atomically): a task with a
    marker is complete and a resumed preparation does not redo it."""
    summary = writer.write(task)
    storage.write_json_atomic(_marker(parts_dir, task.index), summary.to_state())
    return summary


def _marker(parts_dir: str, index: int) -> str:
    return os.path.join(parts_dir, f"done-{index:06d}.json")


# One ShardWriter per worker process, built by the pool's initializer: the
# tokenizer is loaded once per process, not once per task.
_process_writer: ShardWriter | None = None


def _start_worker(tokenizer_dir: str, options: ShardOptions, parts_dir: str, queue) -> None:
    from albert_tf.tokenizers.base import load_tokenizer

    global _process_writer
    _process_writer = ShardWriter(load_tokenizer(tokenizer_dir), options, parts_dir, queue.put)


def _write_in_worker(task: InputTask) -> WriteSummary:
    assert _process_writer is not None, "worker initializer did not run"
    assert _process_writer.parts_dir is not None
    return run_task(_process_writer, task, _process_writer.parts_dir)


def _fingerprint(
    tasks: list[InputTask], options: ShardOptions, tokenizer_dir: str | None
) -> str | None:
    """What a resumed preparation must share with the one it resumes: the
    tasks (and the sizes and times of their files), the options and the
    tokenizer's files. None (no resumption) for a tokenizer object."""
    if tokenizer_dir is None:
        return None
    digest = hashlib.sha256()
    for task in tasks:
        digest.update(repr(dataclasses.astuple(task)).encode())
        if task.kind == "file":
            digest.update(storage.version(task.source).encode())
    options_dict = dataclasses.asdict(options)
    options_dict["segmenter"] = repr(options.segmenter)
    digest.update(json.dumps(options_dict, sort_keys=True).encode())
    for name in storage.listdir(tokenizer_dir):
        path = os.path.join(tokenizer_dir, name)
        if storage.isfile(path):
            digest.update(name.encode() + hashlib.sha256(storage.read_bytes(path)).digest())
    return digest.hexdigest()


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
    packing: str = "doc_sentences",
    short_seq_prob: float = 0.1,
    dupe_factor: int = 10,
    num_shards: int = 16,
    seed: int = 12345,
    num_workers: int = 1,
    chinese_segmenter: str | Callable[[str], list[str]] | None = None,
    task_bytes: int = TASK_BYTES,
    pool_bytes: int = POOL_BYTES,
    show_progress: bool = True,
    log: Callable[[str], None] | None = print,
) -> WriteSummary:
    """Writes sharded TFRecords of unmasked pretraining pairs, in bounded memory.

    Inputs are local files (``inputs``: files, globs, folders or
    ``sample:en`` / ``sample:zh``, comma-separated allowed; see
    `albert_tf.data.inputs.resolve_inputs`) or a tensorflow-datasets dataset
    (``tfds_name``). They are cut into many bounded tasks
    (`albert_tf.data.tasks`: byte ranges of ``task_bytes``, slices of a tfds
    split) that run in ``num_workers`` processes; each streams its documents one
    pool (``pool_bytes``) at a time, so memory does not grow with the corpus.
    Examples are shuffled in bounded windows and spread over ``num_shards``
    files ``output_dir/pretrain-00000-of-000NN.tfrecord``; ``output_dir`` also
    gets ``masking_vocab.json`` (what the input pipeline needs to mask, see
    `MaskingVocab`) and, last, ``metadata.json`` (options and the summary),
    whose presence says the shards are complete.

    * The examples made from a document depend only on the seed, the
      document's identity and the pass: any ``num_workers``, ``task_bytes``
      or ``num_shards`` (or the Beam pipeline) gives the same multiset of
      examples; the same call gives byte-identical shards.
    * An interrupted call, repeated, redoes only the tasks that had not
      finished (their done markers are in ``output_dir/.parts``).

    ``sentence_task="none"`` makes single segments, filled within a document
    (``packing="doc_sentences"``) or across documents
    (``"full_sentences"``), as RoBERTa compared.

    ``chinese_segmenter`` (``"jieba"`` or a picklable ``str -> list[str]``)
    turns on Chinese whole-word masking: each example also stores which CJK
    pieces continue a segmenter word (`albert_tf.data.chinese_wwm`).

    ``tokenizer`` is a directory `load_tokenizer` reads (each worker loads
    it), or a `Tokenizer` object, which runs in this process only
    (``num_workers`` is then ignored, and an interrupted call starts over).

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
    check_arguments(
        inputs=inputs,
        tfds_name=tfds_name,
        max_seq_length=max_seq_length,
        sentence_task=sentence_task,
        packing=packing,
        dupe_factor=dupe_factor,
        num_shards=num_shards,
        chinese_segmenter=chinese_segmenter,
    )
    if num_workers < 1:
        raise ValueError("num_workers must be >= 1")
    from albert_tf.data.masking import MaskingVocab
    from albert_tf.tokenizers.base import load_tokenizer

    start = time.time()
    if isinstance(tokenizer, str | os.PathLike):
        tokenizer_dir: str | None = os.fspath(tokenizer)
        if not storage.is_remote(tokenizer_dir):
            tokenizer_dir = os.path.abspath(tokenizer_dir)
        tokenizer = load_tokenizer(tokenizer_dir)  # fail fast, before any work
    else:
        tokenizer_dir = None  # an object cannot be sent to workers
        num_workers = 1
    tasks, empty_files = plan_tasks(
        inputs=inputs,
        tfds_name=tfds_name,
        tfds_split=tfds_split,
        tfds_data_dir=tfds_data_dir,
        tfds_text_key=tfds_text_key,
        task_bytes=task_bytes,
        pool_bytes=pool_bytes,
    )
    opts = ShardOptions(
        num_shards=num_shards,
        max_seq_length=max_seq_length,
        sentence_task=sentence_task,
        short_seq_prob=short_seq_prob,
        dupe_factor=dupe_factor,
        seed=seed,
        segmenter=chinese_segmenter,
        packing=packing,
    )
    fingerprint = _fingerprint(tasks, opts, tokenizer_dir)
    _prepare_output_dir(output_dir)
    meta_path = os.path.join(output_dir, METADATA_FILE)
    previous = read_metadata(output_dir)
    if fingerprint is not None and previous and previous.get("fingerprint") == fingerprint:
        summary = WriteSummary.from_state(previous["summary"])
        summary.shards = shard_paths(output_dir, num_shards)
        if all(storage.isfile(p) for p in summary.shards):
            if log is not None:
                log(f"{output_dir} already holds these shards (same inputs and options)")
            return summary
    # From here on the directory does not claim to be complete.
    if storage.exists(meta_path):
        storage.remove(meta_path)
    for old in storage.glob(os.path.join(output_dir, "pretrain-*-of-*.tfrecord")):
        storage.remove(old)
    parts_dir = os.path.join(output_dir, ".parts")
    done = _resumable_tasks(parts_dir, fingerprint, tasks)

    summary = WriteSummary(tasks=len(tasks), resumed_tasks=len(done))
    for index in sorted(done):
        summary.merge(done[index])
    pending = [t for t in tasks if t.index not in done]
    if done and log is not None:
        log(f"resuming: {len(done)} of {len(tasks)} tasks were already done")
    _run_tasks(
        pending,
        len(tasks),
        tokenizer,
        tokenizer_dir,
        opts,
        parts_dir,
        summary,
        num_workers,
        show_progress,
    )
    if empty_files:
        summary.skipped["empty_file"] += empty_files

    for s, path in enumerate(shard_paths(output_dir, num_shards)):
        concatenate_parts(parts_dir, s, [task.index for task in tasks], path)
        summary.shards.append(path)

    MaskingVocab.from_tokenizer(tokenizer).save(output_dir)
    summary.seconds = time.time() - start
    meta = pretraining_metadata(
        opts,
        tokenizer=tokenizer,
        tokenizer_dir=tokenizer_dir,
        tasks=tasks,
        tfds_name=tfds_name,
        task_bytes=task_bytes,
        pool_bytes=pool_bytes,
        fingerprint=fingerprint,
        summary=summary,
    )
    storage.write_json_atomic(meta_path, meta)  # last: the shards are now complete
    storage.rmtree(parts_dir)
    if log is not None:
        log(summary.report())
    return summary


def check_arguments(
    *,
    inputs: str | Sequence[str] | None,
    tfds_name: str | None,
    max_seq_length: int,
    sentence_task: str,
    packing: str,
    dupe_factor: int,
    num_shards: int,
    chinese_segmenter: str | Callable[[str], list[str]] | None = None,
) -> None:
    """Raises for options no preparation accepts (before any work); a missing
    segmenter package fails here too."""
    if sentence_task not in SENTENCE_TASKS:
        raise ValueError(f"sentence_task must be one of {SENTENCE_TASKS}")
    if packing not in PACKINGS:
        raise ValueError(f"packing must be one of {PACKINGS}, got {packing!r}")
    if packing == "full_sentences" and sentence_task != "none":
        raise ValueError(
            "packing='full_sentences' crosses document boundaries, so it makes single "
            "segments: use it with sentence_task='none' (--sentence_task=none)"
        )
    if (inputs is None) == (tfds_name is None):
        raise ValueError("give exactly one of inputs or tfds_name")
    if max_seq_length < 5:
        raise ValueError("max_seq_length must be at least 5")
    if num_shards < 1 or dupe_factor < 1:
        raise ValueError("num_shards and dupe_factor must be >= 1")
    if chinese_segmenter is not None:
        get_segmenter(chinese_segmenter)  # fail fast if jieba is missing


def plan_tasks(
    *,
    inputs: str | Sequence[str] | None,
    tfds_name: str | None,
    tfds_split: str,
    tfds_data_dir: str | None,
    tfds_text_key: str | None,
    task_bytes: int,
    pool_bytes: int,
) -> tuple[list[InputTask], int]:
    """The tasks of local files or of a tfds split, and how many files are empty."""
    if inputs is not None:
        paths = resolve_inputs(inputs)
        empty_files = sum(storage.size(p) == 0 for p in paths)
        return plan_file_tasks(paths, task_bytes=task_bytes, pool_bytes=pool_bytes), empty_files
    assert tfds_name is not None
    tasks = plan_tfds_tasks(tfds_name, tfds_split, data_dir=tfds_data_dir, text_key=tfds_text_key)
    return tasks, 0


def pretraining_metadata(
    options: ShardOptions,
    *,
    tokenizer: Tokenizer,
    tokenizer_dir: str | None,
    tasks: list[InputTask],
    tfds_name: str | None,
    task_bytes: int,
    pool_bytes: int,
    fingerprint: str | None,
    summary: WriteSummary,
) -> dict:
    """The content of ``metadata.json``: options, inputs and the summary (the
    local and the Beam preparation write the same keys)."""
    return {
        "format": "albert_tf pretraining shards v2",
        "max_seq_length": options.max_seq_length,
        "sentence_task": options.sentence_task,
        "packing": options.packing,
        "short_seq_prob": options.short_seq_prob,
        "dupe_factor": options.dupe_factor,
        "seed": options.seed,
        "chinese_whole_word_masking": options.segmenter is not None,
        "tokenizer_dir": tokenizer_dir,
        "tokenizer_kind": getattr(tokenizer, "kind", None),
        "vocabulary_size": int(tokenizer.vocabulary_size),
        "inputs": sorted({t.source if t.kind == "file" else t.name for t in tasks}),
        "tfds_name": tfds_name,
        "task_bytes": task_bytes,
        "pool_bytes": pool_bytes,
        "fingerprint": fingerprint,
        "summary": summary.to_dict(),
    }


def shard_paths(output_dir: str, num_shards: int) -> list[str]:
    """The shard files of a preparation into ``num_shards``, in order."""
    return [
        os.path.join(output_dir, SHARD_PATTERN.format(index=s, count=num_shards))
        for s in range(num_shards)
    ]


def _prepare_output_dir(output_dir: str) -> None:
    """Creates ``output_dir``; an unwritable one is an error before any work."""
    if storage.is_remote(output_dir):
        storage.makedirs(output_dir)  # object storage: permissions show on the first write
        return
    try:
        os.makedirs(output_dir, exist_ok=True)
    except OSError as e:
        raise OSError(
            f"cannot create the output directory {output_dir} ({e.strerror}); "
            "choose another --output_dir or fix its permissions"
        ) from None
    if not os.access(output_dir, os.W_OK | os.X_OK):
        raise PermissionError(
            f"the output directory {output_dir} is not writable; choose another "
            "--output_dir or fix its permissions"
        )


def _resumable_tasks(
    parts_dir: str, fingerprint: str | None, tasks: list[InputTask]
) -> dict[int, WriteSummary]:
    """The finished tasks of an interrupted run with the same fingerprint;
    anything else in ``parts_dir`` is cleared."""
    plan = os.path.join(parts_dir, "plan.json")
    done: dict[int, WriteSummary] = {}
    if fingerprint is not None and storage.isfile(plan):
        with storage.open_file(plan, "r") as fh:
            same = json.load(fh).get("fingerprint") == fingerprint
        if same:
            for task in tasks:
                marker = _marker(parts_dir, task.index)
                if storage.isfile(marker):
                    with storage.open_file(marker, "r") as fh:
                        done[task.index] = WriteSummary.from_state(json.load(fh))
            return done
    storage.rmtree(parts_dir, ignore_errors=True)
    storage.makedirs(parts_dir)
    storage.write_json_atomic(plan, {"fingerprint": fingerprint, "tasks": len(tasks)})
    return done


def _run_tasks(
    tasks: list[InputTask],
    total_tasks: int,
    tokenizer: Tokenizer,
    tokenizer_dir: str | None,
    opts: ShardOptions,
    parts_dir: str,
    summary: WriteSummary,
    num_workers: int,
    show_progress: bool,
) -> None:
    from tqdm.auto import tqdm

    docs_bar = tqdm(unit=" docs", desc="tokenizing", disable=not show_progress)
    tasks_bar = tqdm(
        total=total_tasks,
        initial=total_tasks - len(tasks),
        unit=" tasks",
        desc="tasks",
        disable=not show_progress,
    )
    try:
        if num_workers == 1 or len(tasks) <= 1 or tokenizer_dir is None:
            writer = ShardWriter(tokenizer, opts, parts_dir, progress=docs_bar.update)
            for task in tasks:
                summary.merge(_with_context(run_task, writer, task, parts_dir))
                tasks_bar.update()
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
            initializer=_start_worker,
            initargs=(tokenizer_dir, opts, parts_dir, queue),
        ) as pool:
            futures = {pool.submit(_write_in_worker, t): t for t in tasks}
            pending = set(futures)
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
                            f"{_main_file()!r}). Finished tasks are kept: run the same "
                            "command again to resume, or with num_workers=1 "
                            "(--num_workers=1) to write in this process."
                        ) from e
                    except Exception as e:
                        raise type(e)(f"{futures[future].describe()}: {e}") from e
                    tasks_bar.update()
            _drain_queue(queue, docs_bar)
    finally:
        docs_bar.close()
        tasks_bar.close()


def _with_context(fn: Callable[..., WriteSummary], writer, task: InputTask, parts_dir: str):
    """Runs a task; an error says which task (file and byte range) it was."""
    try:
        return fn(writer, task, parts_dir)
    except (ValueError, OSError) as e:
        raise type(e)(f"{task.describe()}: {e}") from e


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
    if not storage.isfile(path):
        return None
    with storage.open_file(path, "r") as fh:
        return json.load(fh)
