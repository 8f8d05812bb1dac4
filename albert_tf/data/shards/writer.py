"""One task in, its examples out: the per-task writer both runners use.

`ShardWriter` holds the tokenizer and the options and nothing of a run: it
turns one `InputTask` into serialized examples (`examples`) or into one part
file per shard (`write`). Which tasks run where, resumption and the final
shards are the runners' business (`albert_tf.data.shards.local`, `.beam`).
"""

from __future__ import annotations

import collections
import contextlib
import gc
import itertools
import random
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from albert_tf.data.chinese_wwm import get_segmenter, word_continuation
from albert_tf.data.corpus import LocatedDocument, ReadStats
from albert_tf.data.examples import (
    PretrainingExample,
    create_examples_from_document,
    create_full_sentence_examples,
    serialize_example,
)
from albert_tf.data.input_tasks import InputTask, document_rng
from albert_tf.data.packed_document import PackedDocument
from albert_tf.data.shards import layout
from albert_tf.data.shards.plan import ShardOptions
from albert_tf.data.shards.summary import WriteSummary

if TYPE_CHECKING:
    from albert_tf.tokenizers.base import Tokenizer

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
            tf.io.TFRecordWriter(layout.part_path(self.parts_dir, s, task.index))
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
