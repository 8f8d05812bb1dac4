"""The local runner: a `ShardPlan`'s tasks in this process or a process pool.

`write_pretraining_data` is the usual entry: it builds the plan and runs it.
Each task writes its parts, then its done marker; a repeated call with the
same fingerprint redoes only unfinished tasks. The parts are then concatenated
into shards, ``masking_vocab.json`` is written and, last, ``metadata.json``
(`albert_tf.data.shards.layout`). Memory is bounded by one pool and one
shuffle window per process.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import inspect
import json
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from albert_tf import storage
from albert_tf.data.input_tasks import InputTask
from albert_tf.data.shards import layout
from albert_tf.data.shards.plan import ShardOptions, ShardPlan
from albert_tf.data.shards.summary import WriteSummary
from albert_tf.data.shards.writer import ShardWriter

if TYPE_CHECKING:
    from albert_tf.tokenizers.base import Tokenizer


def write_pretraining_data(
    *,
    tokenizer,
    output_dir: str,
    num_workers: int = 1,
    show_progress: bool = True,
    log: Callable[[str], None] | None = print,
    **options,
) -> WriteSummary:
    """Writes sharded TFRecords of unmasked pretraining pairs, in bounded memory.

    ``options`` are `ShardPlan.build`'s: the inputs (``inputs=`` files, globs,
    folders or ``sample:en``; or ``tfds_name=``), ``max_seq_length``,
    ``sentence_task``, ``packing``, ``short_seq_prob``, ``dupe_factor``,
    ``num_shards``, ``seed``, ``chinese_segmenter``, ``task_bytes``,
    ``pool_bytes``. The inputs are cut into many bounded tasks that run in
    ``num_workers`` processes; each streams its documents one pool at a time,
    so memory does not grow with the corpus. Examples are shuffled in bounded
    windows and spread over the files
    ``output_dir/pretrain-00000-of-000NN.tfrecord``; ``output_dir`` also gets
    ``masking_vocab.json`` (what the input pipeline needs to mask, see
    `MaskingVocab`) and, last, ``metadata.json`` (options and the summary),
    whose presence says the shards are complete.

    * The examples made from a document depend only on the seed, the
      document's identity and the pass: any ``num_workers``, ``task_bytes``
      or ``num_shards`` (or the Beam runner) gives the same multiset of
      examples; the same call gives byte-identical shards.
    * An interrupted call, repeated, redoes only the tasks that had not
      finished (their done markers are in ``output_dir/.parts``).

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
    if num_workers < 1:
        raise ValueError("num_workers must be >= 1")
    tokenizer, tokenizer_dir = _resolve_tokenizer(tokenizer)  # fail fast, before planning
    plan = ShardPlan.build(**options)
    return run_local(
        plan,
        tokenizer=tokenizer,
        tokenizer_dir=tokenizer_dir,
        output_dir=output_dir,
        num_workers=num_workers,
        show_progress=show_progress,
        log=log,
    )


# The keywords of write_pretraining_data are its own plus ShardPlan.build's (help()
# and editors show them all; a misspelt one is a TypeError naming it).
write_pretraining_data.__signature__ = inspect.Signature(
    [
        *(
            p
            for p in inspect.signature(write_pretraining_data).parameters.values()
            if p.kind is not p.VAR_KEYWORD
        ),
        *inspect.signature(ShardPlan.build).parameters.values(),
    ],
    return_annotation=WriteSummary,
)


def _resolve_tokenizer(tokenizer) -> tuple[Tokenizer, str | None]:
    """The tokenizer object and its directory (None for an object given: it cannot
    be sent to worker processes)."""
    from albert_tf.tokenizers.base import load_tokenizer

    if not isinstance(tokenizer, str | os.PathLike):
        return tokenizer, None
    tokenizer_dir = os.fspath(tokenizer)
    if not storage.is_remote(tokenizer_dir):
        tokenizer_dir = os.path.abspath(tokenizer_dir)
    return load_tokenizer(tokenizer_dir), tokenizer_dir


def run_local(
    plan: ShardPlan,
    *,
    tokenizer,
    output_dir: str,
    num_workers: int = 1,
    show_progress: bool = True,
    log: Callable[[str], None] | None = print,
    tokenizer_dir: str | None = None,
) -> WriteSummary:
    """Runs ``plan`` here (`write_pretraining_data` has the contract). ``tokenizer``
    is a directory or a `Tokenizer`; a loaded one with its ``tokenizer_dir`` can still
    be sent to worker processes (they load it from there)."""
    from albert_tf.data.masking import MaskingVocab

    if num_workers < 1:
        raise ValueError("num_workers must be >= 1")
    start = time.time()
    if tokenizer_dir is None:
        tokenizer, tokenizer_dir = _resolve_tokenizer(tokenizer)
    if tokenizer_dir is None:
        num_workers = 1  # an object cannot be sent to workers
    tasks = list(plan.tasks)
    num_shards = plan.options.num_shards
    fingerprint = plan.fingerprint(tokenizer_dir)
    layout.prepare_output_dir(output_dir)
    previous = layout.read_metadata(output_dir)
    if fingerprint is not None and previous and previous.get("fingerprint") == fingerprint:
        summary = WriteSummary.from_state(previous["summary"])
        summary.shards = layout.shard_paths(output_dir, num_shards)
        if all(storage.isfile(p) for p in summary.shards):
            if log is not None:
                log(f"{output_dir} already holds these shards (same inputs and options)")
            return summary
    layout.withdraw_completion(output_dir)
    parts_dir = os.path.join(output_dir, layout.LOCAL_PARTS)
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
        plan.options,
        parts_dir,
        summary,
        num_workers,
        show_progress,
    )
    if plan.empty_files:
        summary.skipped["empty_file"] += plan.empty_files

    for s, path in enumerate(layout.shard_paths(output_dir, num_shards)):
        layout.concatenate_parts(parts_dir, s, [task.index for task in tasks], path)
        summary.shards.append(path)

    MaskingVocab.from_tokenizer(tokenizer).save(output_dir)
    summary.seconds = time.time() - start
    meta = plan.metadata(
        tokenizer=tokenizer, tokenizer_dir=tokenizer_dir, fingerprint=fingerprint, summary=summary
    )
    layout.write_metadata(output_dir, meta)
    storage.rmtree(parts_dir)
    if log is not None:
        log(summary.report())
    return summary


def run_task(writer: ShardWriter, task: InputTask, parts_dir: str) -> WriteSummary:
    """Writes a task's parts, then its done marker (atomically): a task with a
    marker is complete and a resumed preparation does not redo it."""
    summary = writer.write(task)
    storage.write_json_atomic(layout.marker_path(parts_dir, task.index), summary.to_state())
    return summary


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


def _resumable_tasks(
    parts_dir: str, fingerprint: str | None, tasks: list[InputTask]
) -> dict[int, WriteSummary]:
    """The finished tasks of an interrupted run with the same fingerprint;
    anything else in ``parts_dir`` is cleared."""
    plan = layout.plan_path(parts_dir)
    done: dict[int, WriteSummary] = {}
    if fingerprint is not None and storage.isfile(plan):
        with storage.open_file(plan, "r") as fh:
            same = json.load(fh).get("fingerprint") == fingerprint
        if same:
            for task in tasks:
                marker = layout.marker_path(parts_dir, task.index)
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
                        named = naming_task(e, futures[future])
                        if named is e:
                            raise
                        raise named from e
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
        named = naming_task(e, task)
        if named is e:
            raise
        raise named from e


def naming_task(error: Exception, task: InputTask) -> Exception:
    """``error`` with the task (file and byte range) in its message, as the same
    type when its constructor takes one message; else the error itself with the
    task as a note (``UnicodeDecodeError``, TensorFlow's errors need more arguments)."""
    try:
        return type(error)(f"{task.describe()}: {error}")
    except TypeError:
        error.add_note(f"in {task.describe()}")
        return error


def _main_file() -> str | None:
    return getattr(sys.modules.get("__main__"), "__file__", None)


def _drain_queue(queue, bar) -> None:
    import queue as queue_lib

    while True:
        try:
            bar.update(queue.get_nowait())
        except queue_lib.Empty:
            return
