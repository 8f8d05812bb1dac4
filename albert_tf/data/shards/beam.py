"""Pretraining-data preparation as an Apache Beam pipeline, for many machines.

The tasks of a `ShardPlan` (byte ranges of files, slices of a tfds split:
`albert_tf.data.input_tasks`) become Beam elements:

    Create(tasks) → Reshuffle → ParDo(_WritePartsFn) → GroupByKey(shard)
                  → ParDo(_ConcatenateFn)

``Reshuffle`` spreads the tasks over workers (a runner would otherwise fuse
them onto the worker that made the list). Each worker loads the tokenizer once
(`_WritePartsFn.setup`) and writes a task's examples with the local engine's
`ShardWriter.write`: one part file per shard, in ``output_dir/.beam_parts``,
through TensorFlow's C++ TFRecord writer. Only ``(shard, task)`` pairs travel
through Beam, not the examples: serializing every record between stages and
writing it from Python cost a fifth of the throughput. Each shard is then
concatenated from its parts in task order, on the workers, so the shards are
byte for byte those of the local path with the same options. A retried task
rewrites the same parts. Counts travel as Beam counters; once the pipeline is
done the launcher writes ``masking_vocab.json`` and, last, ``metadata.json``
(the local keys plus ``"runner"``). A Beam run is not resumed: run it again to
redo it.

This module imports apache_beam (the ``beam`` extra); nothing else in the
package imports this module unless a Beam runner is asked for.

>>> import os, string, tempfile
>>> from albert_tf.data import sample_path
>>> from albert_tf.tokenizers import WordPieceTokenizer
>>> d = tempfile.mkdtemp(); vocab = os.path.join(d, "vocab.txt")
>>> pieces = list(string.ascii_lowercase) + ["##" + c for c in string.ascii_lowercase]
>>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
...                                       *pieces, ".", ","]))
>>> WordPieceTokenizer(vocab).save(os.path.join(d, "tok"))
>>> summary = run_beam_pipeline(
...     tokenizer_dir=os.path.join(d, "tok"), output_dir=os.path.join(d, "out"),
...     inputs=sample_path("en"), max_seq_length=64, dupe_factor=1, num_shards=2,
...     runner="DirectRunner", log=None)
>>> summary.documents, summary.examples > 1000, sorted(os.listdir(os.path.join(d, "out")))
(42, True, ['masking_vocab.json', 'metadata.json', 'pretrain-00000-of-00002.tfrecord', \
'pretrain-00001-of-00002.tfrecord'])
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

try:
    import apache_beam as beam
    from apache_beam.metrics import Metrics
    from apache_beam.metrics.metric import MetricsFilter
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.runner import PipelineState
except ModuleNotFoundError as e:  # the optional [beam] extra
    raise ModuleNotFoundError(
        "apache-beam is not installed: pip install -e '.[beam]'", name="apache_beam"
    ) from e

from albert_tf import storage
from albert_tf.data.input_tasks import InputTask
from albert_tf.data.shards import layout
from albert_tf.data.shards.local import naming_task
from albert_tf.data.shards.plan import ShardOptions, ShardPlan
from albert_tf.data.shards.summary import WriteSummary
from albert_tf.data.shards.writer import ShardWriter

if TYPE_CHECKING:
    from albert_tf.tokenizers.base import Tokenizer

#: Namespace of the pipeline's counters (``skipped:<reason>``, ``label:<n>``, ...).
COUNTER_NAMESPACE = "albert_tf.pretraining_data"


def read_tokenizer_files(tokenizer_dir: str) -> dict[str, bytes]:
    """The files of a saved tokenizer, read through ``tf.io.gfile`` (so a
    ``gs://`` directory works where TensorFlow's GCS filesystem does).

    They travel inside the DoFn: workers need no access to the directory."""
    import tensorflow as tf

    if not tf.io.gfile.isdir(tokenizer_dir):
        raise FileNotFoundError(f"no tokenizer directory at {tokenizer_dir}")
    files = {}
    for name in sorted(tf.io.gfile.listdir(tokenizer_dir)):
        path = os.path.join(tokenizer_dir, name)
        if not tf.io.gfile.isdir(path):
            with tf.io.gfile.GFile(path, "rb") as fh:
                files[name] = fh.read()
    return files


def _load_tokenizer(files: dict[str, bytes], directory: str) -> Tokenizer:
    """Writes ``files`` into a local ``directory`` and loads the tokenizer from it
    (the files travelled inside the DoFn: a worker need not reach the original
    directory)."""
    from albert_tf.tokenizers.base import load_tokenizer

    for name, data in files.items():
        with open(os.path.join(directory, name), "wb") as fh:
            fh.write(data)
    return load_tokenizer(directory)


class _WritePartsFn(beam.DoFn):
    """One `InputTask` → its part files; emits ``(shard, task index)`` for each
    shard and counts the task."""

    def __init__(
        self, tokenizer_files: dict[str, bytes], options: ShardOptions, parts_dir: str
    ) -> None:
        self._tokenizer_files = tokenizer_files
        self._options = options
        self._parts_dir = parts_dir
        self._writer: ShardWriter | None = None
        self._tmp: str | None = None

    def setup(self) -> None:
        # Once per DoFn instance (a worker reuses it for many tasks).
        self._tmp = tempfile.mkdtemp(prefix="albert_tf_tokenizer_")
        tokenizer = _load_tokenizer(self._tokenizer_files, self._tmp)
        self._writer = ShardWriter(tokenizer, self._options, self._parts_dir)

    def process(self, task: InputTask) -> Iterator[tuple[int, int]]:
        assert self._writer is not None, "setup() did not run"
        try:
            summary = self._writer.write(task)
        except (ValueError, OSError) as e:
            named = naming_task(e, task)
            if named is e:
                raise
            raise named from e
        _count(summary)
        for shard in range(self._options.num_shards):
            yield shard, task.index

    def teardown(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)


class _ConcatenateFn(beam.DoFn):
    """``(shard, task indices)`` → the shard file, its parts in task order."""

    def __init__(self, parts_dir: str, paths: list[str]) -> None:
        self._parts_dir = parts_dir
        self._paths = paths

    def process(self, element: tuple[int, Iterable[int]]) -> Iterator[str]:
        shard, indices = element
        # -1 is the placeholder that makes every shard appear, even with no tasks.
        tasks = sorted(i for i in indices if i >= 0)
        layout.concatenate_parts(self._parts_dir, shard, tasks, self._paths[shard])
        yield self._paths[shard]


def _count(summary: WriteSummary) -> None:
    """Adds one task's counts to the pipeline's counters."""
    counts = {
        "tasks": 1,
        "documents": summary.documents,
        "sentences": summary.sentences,
        "examples": summary.examples,
    }
    counts |= {f"label:{k}": v for k, v in summary.label_counts.items()}
    counts |= {f"skipped:{k}": v for k, v in summary.skipped.items()}
    counts |= {f"notes:{k}": v for k, v in summary.notes.items()}
    for name, value in counts.items():
        if value:
            Metrics.counter(COUNTER_NAMESPACE, name).inc(value)


def _summary_from_counters(result) -> WriteSummary:
    """A `WriteSummary` from the finished pipeline's counters."""
    query = MetricsFilter().with_namespace(COUNTER_NAMESPACE)
    totals: dict[str, int] = {}
    for counter in result.metrics().query(query)["counters"]:
        # Committed counts exclude retried bundles; not every runner has them.
        value = counter.committed if counter.committed is not None else counter.attempted
        name = counter.key.metric.name
        totals[name] = totals.get(name, 0) + int(value or 0)
    summary = WriteSummary(
        documents=totals.pop("documents", 0),
        sentences=totals.pop("sentences", 0),
        examples=totals.pop("examples", 0),
    )
    totals.pop("tasks", None)
    for name, value in totals.items():
        kind, _, key = name.partition(":")
        if kind == "label":
            summary.label_counts[int(key)] += value
        elif kind == "skipped":
            summary.skipped[key] += value
        elif kind == "notes":
            summary.notes[key] += value
    return summary


def run_beam_pipeline(
    *,
    tokenizer_dir: str,
    output_dir: str,
    runner: str = "DirectRunner",
    pipeline_args: Sequence[str] = (),
    log: Callable[[str], None] | None = print,
    **options,
) -> WriteSummary:
    """Writes the shards of `write_pretraining_data` with a Beam pipeline.

    ``options`` are `ShardPlan.build`'s and mean what they mean for the local
    runner; ``runner`` is any Beam runner name (``DirectRunner``,
    ``DataflowRunner``, ``FlinkRunner``, ``SparkRunner``, ``PortableRunner``)
    and ``pipeline_args`` are further Beam pipeline options
    (``["--direct_num_workers=2", "--direct_running_mode=multi_processing"]``,
    ``["--project=...", "--region=...", "--temp_location=gs://..."]``).
    """
    if any(a == "--runner" or a.startswith("--runner=") for a in pipeline_args):
        raise ValueError("give the runner as runner= (--runner), not in the pipeline options")
    if not storage.isdir(tokenizer_dir):  # fail fast, before planning
        raise FileNotFoundError(f"no tokenizer directory at {tokenizer_dir}")
    plan = ShardPlan.build(**options)
    return run_beam(
        plan,
        tokenizer_dir=tokenizer_dir,
        output_dir=output_dir,
        runner=runner,
        pipeline_args=pipeline_args,
        log=log,
    )


def run_beam(
    plan: ShardPlan,
    *,
    tokenizer_dir: str,
    output_dir: str,
    runner: str = "DirectRunner",
    pipeline_args: Sequence[str] = (),
    log: Callable[[str], None] | None = print,
) -> WriteSummary:
    """Runs ``plan`` as a Beam pipeline.

    Tasks were planned here, on the launcher; the workers read them. Inputs,
    tfds data and the output directory may be remote (``gs://``: files are
    read and written through `albert_tf.storage`, i.e. tf.io.gfile); local
    inputs and a local output directory must be at the same path on every
    worker (one machine, or a shared mount).
    The tokenizer's files are read here (through tf.io.gfile) and shipped to
    the workers. Returns the `WriteSummary` built from the pipeline's counters.
    """
    from albert_tf.data.masking import MaskingVocab

    start = time.time()
    if not storage.is_remote(tokenizer_dir):
        tokenizer_dir = os.path.abspath(tokenizer_dir)
    tokenizer_files = read_tokenizer_files(tokenizer_dir)
    local_copy = tempfile.mkdtemp(prefix="albert_tf_tokenizer_")
    try:
        tokenizer = _load_tokenizer(tokenizer_files, local_copy)  # fail fast, before any work
        # While its files exist (a WordPiece tokenizer reads its vocabulary file).
        masking_vocab = MaskingVocab.from_tokenizer(tokenizer)
    finally:
        shutil.rmtree(local_copy, ignore_errors=True)
    num_shards = plan.options.num_shards
    if not storage.is_remote(output_dir):
        output_dir = os.path.abspath(output_dir)  # workers may run elsewhere
    layout.prepare_output_dir(output_dir)
    layout.withdraw_completion(output_dir)

    parts_dir = os.path.join(output_dir, layout.BEAM_PARTS)
    storage.rmtree(parts_dir, ignore_errors=True)
    storage.makedirs(parts_dir)
    paths = layout.shard_paths(output_dir, num_shards)

    pipeline = beam.Pipeline(options=PipelineOptions([f"--runner={runner}", *pipeline_args]))
    parts = (
        pipeline
        | "Tasks" >> beam.Create(list(plan.tasks))
        | "SpreadTasks" >> beam.Reshuffle()
        | "WriteParts" >> beam.ParDo(_WritePartsFn(tokenizer_files, plan.options, parts_dir))
    )
    every_shard = pipeline | "EveryShard" >> beam.Create([(s, -1) for s in range(num_shards)])
    _ = (
        (parts, every_shard)
        | "Together" >> beam.Flatten()
        | "ByShard" >> beam.GroupByKey()
        | "Concatenate" >> beam.ParDo(_ConcatenateFn(parts_dir, paths))
    )
    result = pipeline.run()
    state = result.wait_until_finish()
    if state != PipelineState.DONE:
        raise RuntimeError(f"the Beam pipeline ended in state {state}, not DONE")

    summary = _summary_from_counters(result)
    summary.tasks = len(plan.tasks)
    if plan.empty_files:
        summary.skipped["empty_file"] += plan.empty_files
    summary.shards = paths
    missing = [p for p in summary.shards if not storage.exists(p)]
    if missing:
        raise RuntimeError(f"the pipeline finished without writing {', '.join(missing)}")
    storage.rmtree(parts_dir, ignore_errors=True)

    masking_vocab.save(output_dir)
    summary.seconds = time.time() - start
    meta = plan.metadata(
        tokenizer=tokenizer,
        tokenizer_dir=tokenizer_dir,
        fingerprint=None,  # no resumption: a Beam run is redone whole
        summary=summary,
    )
    meta["runner"] = runner
    layout.write_metadata(output_dir, meta)  # last: with it the shards are complete
    if log is not None:
        log(summary.report())
    return summary
