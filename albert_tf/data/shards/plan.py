"""What a preparation will do, validated and planned once: `ShardPlan`.

Both runners (`albert_tf.data.shards.local`, `albert_tf.data.shards.beam`) take
a plan: the example options (`ShardOptions`, picklable for workers) and the
bounded input tasks (`albert_tf.data.input_tasks`). Building one checks every option
before any work, so a bad option fails the same way whichever runner follows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from albert_tf import storage
from albert_tf.data.chinese_wwm import get_segmenter
from albert_tf.data.examples import PACKINGS, SENTENCE_TASKS
from albert_tf.data.input_tasks import (
    POOL_BYTES,
    TASK_BYTES,
    InputTask,
    plan_file_tasks,
    plan_tfds_tasks,
)
from albert_tf.data.inputs import resolve_inputs

if TYPE_CHECKING:
    from albert_tf.data.shards.summary import WriteSummary
    from albert_tf.tokenizers.base import Tokenizer

#: ``metadata.json``'s format tag (the local and the Beam runner write the same keys).
METADATA_FORMAT = "albert_tf pretraining shards v2"


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


@dataclasses.dataclass(frozen=True)
class ShardPlan:
    """A preparation's validated options and its input tasks.

    Build it with `build` (the keywords of `write_pretraining_data`), then hand
    it to a runner. ``empty_files`` counts input files with no bytes (they make
    no task; the summary reports them as skipped).

    >>> from albert_tf.data import sample_path
    >>> plan = ShardPlan.build(inputs=sample_path("en"), num_shards=2, dupe_factor=1)
    >>> len(plan.tasks), plan.options.num_shards, plan.empty_files
    (1, 2, 0)
    >>> try:
    ...     ShardPlan.build(inputs=sample_path("en"), packing="full_sentences")
    ... except ValueError as e:
    ...     print(str(e)[:52])
    packing='full_sentences' crosses document boundaries
    """

    options: ShardOptions
    tasks: tuple[InputTask, ...]
    empty_files: int
    tfds_name: str | None
    task_bytes: int
    pool_bytes: int

    @classmethod
    def build(
        cls,
        *,
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
        chinese_segmenter: str | Callable[[str], list[str]] | None = None,
        task_bytes: int = TASK_BYTES,
        pool_bytes: int = POOL_BYTES,
    ) -> ShardPlan:
        """Checks the options (before any work; a missing segmenter package fails
        here too), then cuts the inputs into tasks.

        Inputs are local or remote files (``inputs``: files, globs, folders or
        ``sample:en`` / ``sample:zh``, comma-separated allowed; see
        `albert_tf.data.inputs.resolve_inputs`) or a tensorflow-datasets split
        (``tfds_name``, ``tfds_split``, ...). Files are cut into byte ranges of
        ``task_bytes`` and read ``pool_bytes`` at a time. ``sentence_task`` is
        ``"sop"``, ``"nsp"`` or ``"none"``; ``packing`` is ``"doc_sentences"`` or
        (with ``"none"``) ``"full_sentences"``, as RoBERTa compared.
        ``chinese_segmenter`` (``"jieba"`` or a picklable ``str -> list[str]``)
        turns on Chinese whole-word masking.
        """
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
        options = ShardOptions(
            num_shards=num_shards,
            max_seq_length=max_seq_length,
            sentence_task=sentence_task,
            short_seq_prob=short_seq_prob,
            dupe_factor=dupe_factor,
            seed=seed,
            segmenter=chinese_segmenter,
            packing=packing,
        )
        if inputs is not None:
            paths = resolve_inputs(inputs)
            empty_files = sum(storage.size(p) == 0 for p in paths)
            tasks = plan_file_tasks(paths, task_bytes=task_bytes, pool_bytes=pool_bytes)
        else:
            assert tfds_name is not None
            tasks = plan_tfds_tasks(
                tfds_name, tfds_split, data_dir=tfds_data_dir, text_key=tfds_text_key
            )
            empty_files = 0
        return cls(options, tuple(tasks), empty_files, tfds_name, task_bytes, pool_bytes)

    def fingerprint(self, tokenizer_dir: str | None) -> str | None:
        """What a resumed preparation must share with the one it resumes: the
        tasks (and the sizes and times of their files), the options and the
        tokenizer's files. None (no resumption) for a tokenizer object."""
        if tokenizer_dir is None:
            return None
        digest = hashlib.sha256()
        for task in self.tasks:
            digest.update(repr(dataclasses.astuple(task)).encode())
            if task.kind == "file":
                digest.update(storage.version(task.source).encode())
        options_dict = dataclasses.asdict(self.options)
        options_dict["segmenter"] = repr(self.options.segmenter)
        digest.update(json.dumps(options_dict, sort_keys=True).encode())
        for name in storage.listdir(tokenizer_dir):
            path = os.path.join(tokenizer_dir, name)
            if storage.isfile(path):
                digest.update(name.encode() + hashlib.sha256(storage.read_bytes(path)).digest())
        return digest.hexdigest()

    def metadata(
        self,
        *,
        tokenizer: Tokenizer,
        tokenizer_dir: str | None,
        fingerprint: str | None,
        summary: WriteSummary,
    ) -> dict:
        """The content of ``metadata.json``: options, inputs and the summary."""
        options = self.options
        return {
            "format": METADATA_FORMAT,
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
            "inputs": sorted({t.source if t.kind == "file" else t.name for t in self.tasks}),
            "tfds_name": self.tfds_name,
            "task_bytes": self.task_bytes,
            "pool_bytes": self.pool_bytes,
            "fingerprint": fingerprint,
            "summary": summary.to_dict(),
        }
