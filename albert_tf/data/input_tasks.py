"""Cutting pretraining input into many bounded input tasks, whatever its size.

An input task (`InputTask`; "task" in the shard writers' flags, progress and
metadata, and unrelated to the fine-tuning tasks of `albert_tf.tasks`) is the
unit of parallel work, of resumption and of a Beam element: a
byte range of an uncompressed file, a whole compressed file, or a slice
``split[a:b]`` of a tensorflow-datasets split. Tasks are many and small
(``task_bytes``, ``task_documents``), not one per worker, so that one huge
file or one huge split spreads over any number of processes or machines.

Documents are identified by where they are, not by which task read them: the
source's name and the document's position (byte offset where it starts, or
example index). Documents are grouped into *pools* by position
(``position // pool_size``): a pool is the bounded set of documents that NSP
draws its random "other document" from and that ``full_sentences`` packing
runs through, as the reference tool does per input file. Task boundaries fall
on pool boundaries, so a pool never spans two tasks and the examples made from
a document depend only on the seed, its identity and the pass
(`document_rng`), never on how the work was cut.

>>> import os, tempfile
>>> d = tempfile.mkdtemp(); p = os.path.join(d, "big.txt")
>>> _ = open(p, "w").write("One. Two.\\n\\n" * 1000)  # 11,000 bytes
>>> [(t.start, t.end) for t in plan_file_tasks([p], task_bytes=4096, pool_bytes=1024)]
[(0, 4096), (4096, 8192), (8192, None)]
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Iterator, Sequence

from albert_tf import storage
from albert_tf.data.corpus import LocatedDocument, ReadStats, read_located_documents

#: Default pool: documents starting in the same MiB of a file (the reference
#: tool pools per input file; Wikipedia extracts are about 1 MB a file).
POOL_BYTES = 1 << 20
#: Default task: 64 pools of a file; memory does not depend on it, only the
#: number of part files and the granularity of resumption do.
TASK_BYTES = 64 * POOL_BYTES
#: tfds sources: pools of this many examples, tasks of this many examples.
POOL_DOCUMENTS = 500
TASK_DOCUMENTS = 50 * POOL_DOCUMENTS


@dataclasses.dataclass(frozen=True)
class InputTask:
    """One bounded unit of work: the documents that start in ``[start, end)``.

    ``name`` identifies the source in document identities (a file's path
    relative to the inputs' common folder, or ``tfds:<name>/<split>``);
    ``start``/``end`` are byte offsets of a file or example indices of a tfds
    split; ``end=None`` reads to the end.
    """

    index: int
    kind: str  # "file" or "tfds"
    source: str  # the file's path, or the tfds split expression to read
    name: str
    start: int = 0
    end: int | None = None
    pool_size: int = POOL_BYTES
    tfds_name: str | None = None
    tfds_data_dir: str | None = None
    tfds_text_key: str | None = None

    def documents(self, stats: ReadStats) -> Iterator[LocatedDocument]:
        """``(position, sentences)`` of the task's documents, streamed."""
        if self.kind == "file":
            return read_located_documents(self.source, start=self.start, end=self.end, stats=stats)
        # Here, not at the top: tensorflow-datasets takes seconds to import.
        from albert_tf.data.tfds_corpus import tfds_located_documents

        return tfds_located_documents(
            self.tfds_name,
            split=self.source,
            first_index=self.start,
            data_dir=self.tfds_data_dir,
            text_key=self.tfds_text_key,
            stats=stats,
        )

    def pool_of(self, position: int) -> int:
        return position // self.pool_size

    def describe(self) -> str:
        end = "end" if self.end is None else f"{self.end:,}"
        unit = "bytes" if self.kind == "file" else "examples"
        return f"{self.name} [{self.start:,}, {end}) {unit}"


def document_rng(seed: int, source: str, position: int, dupe_pass: int) -> random.Random:
    """The random stream of one document in one pass: a function of these four
    values alone (a string seed is hashed with SHA-512, the same in every
    process and on every machine)."""
    return random.Random(f"{seed}|{source}|{position}|{dupe_pass}")


def _is_compressed(path: str) -> bool:
    with storage.open_file(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def source_names(paths: Sequence[str]) -> list[str]:
    """Each file's path relative to the folder common to all of them, so
    document identities do not depend on where the corpus is mounted."""
    absolute = [os.path.abspath(p) for p in paths]
    root = os.path.commonpath([os.path.dirname(p) for p in absolute]) if absolute else ""
    return [os.path.relpath(p, root) for p in absolute]


def plan_file_tasks(
    paths: Sequence[str], *, task_bytes: int = TASK_BYTES, pool_bytes: int = POOL_BYTES
) -> list[InputTask]:
    """Tasks of ``task_bytes`` (a multiple of ``pool_bytes``) per uncompressed
    file; a compressed file is one task, read as a stream."""
    if pool_bytes < 1 or task_bytes < pool_bytes or task_bytes % pool_bytes:
        raise ValueError(
            f"task_bytes ({task_bytes}) must be a positive multiple of pool_bytes "
            f"({pool_bytes}): a task holds whole pools"
        )
    tasks: list[InputTask] = []
    for path, name in zip(paths, source_names(paths), strict=True):
        size = storage.size(path)
        if _is_compressed(path) or size <= task_bytes:
            tasks.append(InputTask(len(tasks), "file", path, name, pool_size=pool_bytes))
            continue
        for start in range(0, size, task_bytes):
            end = start + task_bytes if start + task_bytes < size else None
            tasks.append(InputTask(len(tasks), "file", path, name, start, end, pool_bytes))
    return tasks


def plan_tfds_tasks(
    name: str,
    split: str,
    *,
    data_dir: str | None = None,
    text_key: str | None = None,
    task_documents: int = TASK_DOCUMENTS,
    pool_documents: int = POOL_DOCUMENTS,
) -> list[InputTask]:
    """Slices ``split[a:b]`` of ``task_documents`` examples of a named split; a
    split expression (``"train[:10%]"``) is one task."""
    import tensorflow_datasets as tfds

    from albert_tf.data import tfds_corpus  # noqa: F401  (registers albert_corpus)

    if task_documents < pool_documents or task_documents % pool_documents:
        raise ValueError("task_documents must be a positive multiple of pool_documents")
    builder = tfds.builder(name, data_dir=data_dir)
    source = f"tfds:{name}/{split}"
    common = dict(
        pool_size=pool_documents, tfds_name=name, tfds_data_dir=data_dir, tfds_text_key=text_key
    )
    if split not in builder.info.splits:
        return [InputTask(0, "tfds", split, source, **common)]
    total = builder.info.splits[split].num_examples
    return [
        InputTask(i, "tfds", f"{split}[{a}:{min(a + task_documents, total)}]", source, a, **common)
        for i, a in enumerate(range(0, max(total, 1), task_documents))
    ]
