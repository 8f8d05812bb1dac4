"""Writing sharded TFRecords of unmasked pretraining pairs, in parallel over inputs.

`write_pretraining_data` splits the work into one `InputTask` per input file
(or per even tfds sub-split). A `ShardWriter`, given the tokenizer explicitly,
turns one task into examples (`albert_tf.data.examples`) spread over one part
file per shard; the parts are then concatenated into
``pretrain-00000-of-000NN.tfrecord`` shards next to ``metadata.json`` and
``masking_vocab.json``. Tasks run in this process or, one `ShardWriter` per
worker, in a pool of spawned processes.
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from albert_tf.data.chinese_wwm import get_segmenter, word_continuation
from albert_tf.data.corpus import Document, ReadStats, read_documents
from albert_tf.data.examples import (
    SENTENCE_TASKS,
    PretrainingExample,
    create_examples_from_document,
    serialize_example,
)
from albert_tf.data.inputs import resolve_inputs

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

    def merge(self, other: WriteSummary) -> None:
        """Adds the counts of one task."""
        self.documents += other.documents
        self.sentences += other.sentences
        self.examples += other.examples
        self.label_counts.update(other.label_counts)
        self.skipped.update(other.skipped)
        self.notes.update(other.notes)

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
class InputTask:
    """One unit of parallel work: an input file or a tfds split expression."""

    index: int
    kind: str  # "file" or "tfds"
    source: str  # path, or tfds split expression
    tfds_name: str | None = None
    tfds_data_dir: str | None = None
    tfds_text_key: str | None = None

    def documents(self, stats: ReadStats) -> Iterator[Document]:
        if self.kind == "file":
            return read_documents(self.source, stats=stats)
        from albert_tf.data.corpus import tfds_documents

        return tfds_documents(
            self.tfds_name,
            split=self.source,
            data_dir=self.tfds_data_dir,
            text_key=self.tfds_text_key,
            stats=stats,
        )


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
    shuffle_buffer: int = 100_000


class ShardWriter:
    """Turns one `InputTask` into examples in per-shard part files.

    Part ``{shard:05d}.{task:06d}`` in ``parts_dir`` holds task's examples for
    that shard; `write_pretraining_data` concatenates them in task order.
    ``progress`` is called with the number of documents tokenized so far.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        options: ShardOptions,
        parts_dir: str,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.options = options
        self.parts_dir = parts_dir
        self.progress = progress
        self.segment = get_segmenter(options.segmenter) if options.segmenter is not None else None

    def write(self, task: InputTask) -> WriteSummary:
        """Reads, tokenizes and writes one task; returns its counts."""
        stats = ReadStats()
        documents = self.tokenize_documents(task.documents(stats), stats)
        notes: collections.Counter = collections.Counter()
        written, labels = self.write_examples(documents, task.index, notes)
        skipped = collections.Counter(stats.skipped)
        # A one-sentence document is skipped input; the rest are informational.
        skipped["one_sentence_document"] += notes.pop("one_sentence_document", 0)
        skipped = collections.Counter({k: v for k, v in skipped.items() if v})
        # Each dupe pass counts the same skipped documents again; report once.
        if self.options.dupe_factor > 1 and skipped["one_sentence_document"]:
            skipped["one_sentence_document"] //= self.options.dupe_factor
        return WriteSummary(
            documents=stats.documents,
            sentences=stats.sentences,
            examples=written,
            label_counts=labels,
            skipped=skipped,
            notes=notes,
        )

    def tokenize_documents(
        self, documents: Iterable[Document], stats: ReadStats
    ) -> list[list[list[int]]]:
        """Documents as lists of sentence ids, tokenized in batches of sentences."""
        out: list[list[list[int]]] = []
        batch: list[Document] = []
        batch_sentences = 0
        for doc in documents:
            batch.append(doc)
            batch_sentences += len(doc)
            if batch_sentences >= _TOKENIZE_BATCH_SENTENCES:
                out += self._tokenize_batch(batch, stats)
                batch, batch_sentences = [], 0
        if batch:
            out += self._tokenize_batch(batch, stats)
        return out

    def _tokenize_batch(self, batch: list[Document], stats: ReadStats) -> list[list[list[int]]]:
        ids = self._sentence_ids([s for d in batch for s in d])
        out: list[list[list[int]]] = []
        k = 0
        for d in batch:
            doc = []
            for _ in d:
                if ids[k]:
                    doc.append(ids[k])
                else:
                    stats.skip("empty_after_tokenization")
                k += 1
            if doc:
                out.append(doc)
            else:
                stats.skip("empty_document")
        if self.progress is not None:
            self.progress(len(batch))
        return out

    def _sentence_ids(self, sentences: list[str]) -> list[list[int]]:
        """Piece ids per sentence; with a segmenter, word continuation rides
        along in `_CONTINUES_BIT`."""
        import tensorflow as tf

        ragged = self.tokenizer.tokenize(tf.constant(sentences))
        ids = ragged.to_list()
        if self.segment is not None:
            pieces = self.tokenizer.id_to_token(ragged).to_list()
            for j, sentence in enumerate(sentences):
                flags = word_continuation([p.decode() for p in pieces[j]], self.segment(sentence))
                ids[j] = [t + _CONTINUES_BIT * f for t, f in zip(ids[j], flags, strict=True)]
        return ids

    def write_examples(
        self,
        documents: Sequence[Sequence[Sequence[int]]],
        task_index: int,
        notes: collections.Counter,
    ) -> tuple[int, collections.Counter]:
        """Builds ``dupe_factor`` passes of examples and writes them to the
        task's part files. Returns (examples written, counts by label)."""
        import tensorflow as tf

        opts = self.options
        # Seeded per task, so the output does not depend on which worker ran it.
        rng = random.Random(opts.seed * 1_000_003 + task_index)
        writers = [
            tf.io.TFRecordWriter(os.path.join(self.parts_dir, f"{s:05d}.{task_index:06d}"))
            for s in range(opts.num_shards)
        ]
        labels: collections.Counter = collections.Counter()
        buffer: list[PretrainingExample] = []
        written = 0
        try:
            for _ in range(opts.dupe_factor):
                for doc_index in range(len(documents)):
                    for ex in create_examples_from_document(
                        documents,
                        doc_index,
                        max_seq_length=opts.max_seq_length,
                        cls_id=self.tokenizer.cls_id,
                        sep_id=self.tokenizer.sep_id,
                        rng=rng,
                        sentence_task=opts.sentence_task,
                        short_seq_prob=opts.short_seq_prob,
                        stats=notes,
                    ):
                        labels[ex.sentence_order_label] += 1
                        buffer.append(_split_flag(ex) if self.segment is not None else ex)
                    if len(buffer) >= opts.shuffle_buffer:
                        written += _shuffle_out(buffer, writers, rng)
            written += _shuffle_out(buffer, writers, rng)
        finally:
            for w in writers:
                w.close()
        return written, labels


def _shuffle_out(buffer: list[PretrainingExample], writers: list, rng: random.Random) -> int:
    """Writes and empties ``buffer``; returns how many examples it held."""
    # Shuffle before writing so one shard does not hold one document's run.
    rng.shuffle(buffer)
    for ex in buffer:
        writers[rng.randrange(len(writers))].write(serialize_example(ex))
    count = len(buffer)
    buffer.clear()
    return count


# One ShardWriter per worker process, built by the pool's initializer: the
# tokenizer is loaded once per process, not once per task.
_process_writer: ShardWriter | None = None


def _start_worker(tokenizer_dir: str, options: ShardOptions, parts_dir: str, queue) -> None:
    from albert_tf.tokenizers.base import Tokenizer

    global _process_writer
    _process_writer = ShardWriter(Tokenizer.load(tokenizer_dir), options, parts_dir, queue.put)


def _write_in_worker(task: InputTask) -> WriteSummary:
    assert _process_writer is not None, "worker initializer did not run"
    return _process_writer.write(task)


def _tfds_tasks(name, split, data_dir, text_key, num_workers) -> list[InputTask]:
    import tensorflow_datasets as tfds

    splits = tfds.even_splits(split, n=num_workers) if num_workers > 1 else [split]
    return [InputTask(i, "tfds", str(s), name, data_dir, text_key) for i, s in enumerate(splits)]


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
    log: Callable[[str], None] | None = print,
) -> WriteSummary:
    """Writes sharded TFRecords of unmasked pretraining pairs.

    Inputs are local files (``inputs``: files, globs, folders or
    ``sample:en`` / ``sample:zh``, comma-separated allowed; see
    `albert_tf.data.inputs.resolve_inputs`) or a tensorflow-datasets dataset
    (``tfds_name``). Work runs in parallel over input files (over even
    sub-splits for tfds) in ``num_workers`` processes. Each input's examples
    are shuffled (in windows of 100k) and spread over ``num_shards`` files
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
        tokenizer_dir = None  # an object cannot be sent to workers
        num_workers = 1
    if inputs is not None:
        tasks = [InputTask(i, "file", p) for i, p in enumerate(resolve_inputs(inputs))]
    else:
        tasks = _tfds_tasks(tfds_name, tfds_split, tfds_data_dir, tfds_text_key, num_workers)
    os.makedirs(output_dir, exist_ok=True)
    for old in glob.glob(os.path.join(output_dir, "pretrain-*-of-*.tfrecord")):
        os.remove(old)
    parts_dir = os.path.join(output_dir, ".parts")
    shutil.rmtree(parts_dir, ignore_errors=True)
    os.makedirs(parts_dir)
    opts = ShardOptions(
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
    _run_tasks(
        tasks, tokenizer, tokenizer_dir, opts, parts_dir, summary, num_workers, show_progress
    )

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
    tasks: list[InputTask],
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
    inputs_bar = tqdm(total=len(tasks), unit=" inputs", desc="inputs", disable=not show_progress)
    try:
        if num_workers == 1 or len(tasks) == 1 or tokenizer_dir is None:
            writer = ShardWriter(tokenizer, opts, parts_dir, progress=docs_bar.update)
            for task in tasks:
                summary.merge(writer.write(task))
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
            initializer=_start_worker,
            initargs=(tokenizer_dir, opts, parts_dir, queue),
        ) as pool:
            pending = {pool.submit(_write_in_worker, t) for t in tasks}
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
