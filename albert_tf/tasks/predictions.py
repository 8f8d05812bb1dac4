"""Predictions over a file: a task's items through its SavedModel, one JSON line each.

`predict_file` reads whatever the task's reader reads (labelled or not), sends the
items in batches to the export's signature (by default the SavedModel that TF Serving
loads, so the answers are the ones a server gives), writes one JSON line per item
with a progress bar, and scores the predictions when the items carry labels. What
is the task's own (its request, its rows, its scores, extra files such as SQuAD's
``predictions.json``) is its ``predict`` part: a `Predictor`
(``albert_tf/tasks/<task>/predict.py``).

A model is any of: a SavedModel version folder (``saved_model.pb``), an export base
folder (its highest version), a fine-tuning run folder (its ``best/``) or a fine-tuned
model folder; the last two are exported to a temporary SavedModel first.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from albert_tf import storage
from albert_tf.tasks import get_task

METADATA = os.path.join("assets.extra", "albert_tf.json")


class Predictor:
    """A task's part of `predict_file`; ``metadata`` is the export's ``albert_tf.json``."""

    #: The export's signature that answers a request.
    signature = "serving_default"

    def __init__(self, metadata: dict[str, Any], n_best: int = 0) -> None:
        self.metadata = metadata
        self.n_best = n_best

    def read(self, files: Sequence[str]) -> tuple[list, collections.Counter]:
        """The items of ``files`` and the bad input skipped, by reason."""
        raise NotImplementedError

    def request(self, items: Sequence) -> dict[str, Any]:
        """The signature's inputs for a batch of items."""
        raise NotImplementedError

    def rows(self, items: Sequence, outputs: dict[str, np.ndarray]) -> list[dict]:
        """One JSON-serialisable row per item, from the signature's outputs."""
        raise NotImplementedError

    def labelled(self, item) -> bool:
        return bool(getattr(item, "labelled", True))

    def scores(self, items: Sequence, rows: Sequence[dict]) -> dict[str, Any]:
        """Scores of ``rows`` against the items' labels (all items are labelled)."""
        raise NotImplementedError

    def files(self, items: Sequence, rows: Sequence[dict]) -> dict[str, Any]:
        """More files to write beside the output, by name → JSON content."""
        return {}


def saved_model_dir(model: str) -> str:
    """The SavedModel version folder that ``model`` names, or ``model`` itself
    when it is a fine-tuned model or run folder (see `load_for_predictions`)."""
    if storage.exists(os.path.join(model, "saved_model.pb")):
        return model
    versions = [
        name
        for name in (storage.listdir(model) if storage.isdir(model) else [])
        if name.strip("/").isdigit() and storage.exists(os.path.join(model, name, "saved_model.pb"))
    ]
    if versions:
        return os.path.join(model, max(versions, key=lambda v: int(v.strip("/"))))
    return model


def _exported(model: str, work: str, log: Callable[[str], None]) -> str:
    """A SavedModel of a fine-tuned model folder (or a run folder's ``best/``)."""
    from albert_tf.serving.export import export_saved_model

    checkpoint = (
        os.path.join(model, "best") if storage.isdir(os.path.join(model, "best")) else model
    )
    if not storage.exists(os.path.join(checkpoint, "config.json")):
        raise FileNotFoundError(
            f"{model} is neither a SavedModel (saved_model.pb, or versions 1, 2, ... holding "
            "one) nor a fine-tuned model or run folder (config.json, or best/config.json): "
            "give --model an export or the output_dir of a finetune run"
        )
    log(f"exporting {checkpoint} to a temporary SavedModel, as TF Serving would load it")
    return export_saved_model(checkpoint, os.path.join(work, "export"))


def predict_file(
    model: str,
    inputs: Sequence[str],
    output: str,
    *,
    batch_size: int = 32,
    n_best: int = 0,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Writes predictions for ``inputs`` to ``output`` (JSON Lines); returns a summary.

    Args:
        model: a SavedModel (version or base folder), or a fine-tuned model/run folder.
        inputs: files, globs or folders the task's reader reads.
        output: the JSON Lines file written; extra files (``predictions.json``...) and
            ``scores.json`` (when the items are labelled) go beside it.
        batch_size: items per request.
        n_best: for span QA, the answers kept per question, asked of the export's
            ``answers`` signature (``nbest_predictions.json``, and ``null_odds.json``
            for a model with a no-answer threshold); 0: ``serving_default``'s one answer.

    Returns:
        ``{"task", "items", "skipped", "seconds", "items_per_second", "files", "scores"?}``.
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the text ops the export's graph holds

    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    work = tempfile.mkdtemp(prefix="albert_tf_predict_")
    try:
        path = saved_model_dir(model)
        exported_here = not storage.exists(os.path.join(path, "saved_model.pb"))
        if exported_here:  # a model folder: its temporary export goes with `work`
            path = _exported(path, work, log)
        metadata = json.loads(storage.read_text(os.path.join(path, METADATA)))
        task = get_task(metadata.get("task"))
        predictor: Predictor = task.load("predict")(metadata, n_best=n_best)
        items, skipped = predictor.read(inputs)
        if skipped:
            log(f"skipped {sum(skipped.values())} bad input(s): {dict(skipped)}")
        if not items:
            raise ValueError(f"no {task.name} items to predict in {', '.join(inputs)}")
        signatures = tf.saved_model.load(path).signatures
        if predictor.signature not in signatures:
            raise ValueError(
                f"{path} has no {predictor.signature!r} signature (it has "
                f"{', '.join(sorted(signatures))}): export the model again with this version "
                "of albert_tf (python -m albert_tf.export), or predict without the option "
                "that needs it"
            )
        signature = signatures[predictor.signature]
        rows: list[dict] = []
        started = time.perf_counter()
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(items), unit="item", desc="predict")
        for start in range(0, len(items), batch_size):
            end = min(start + batch_size, len(items))
            outputs = signature(**predictor.request(items[start:end]))
            rows += predictor.rows(items[start:end], {k: v.numpy() for k, v in outputs.items()})
            if bar is not None:
                bar.update(end - start)
        if bar is not None:
            bar.close()
        seconds = time.perf_counter() - started
        storage.make_parent(output)
        with storage.open_file(output, "w") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        written = [output]
        folder = os.path.dirname(output)
        for name, content in predictor.files(items, rows).items():
            written.append(os.path.join(folder, name))
            storage.write_json_atomic(written[-1], content)
        summary: dict[str, Any] = {
            "task": task.name,
            "model": model if exported_here else path,
            "items": len(items),
            "skipped": dict(skipped),
            "seconds": round(seconds, 3),
            "items_per_second": round(len(items) / seconds, 2) if seconds else None,
        }
        labelled = sum(predictor.labelled(item) for item in items)
        if labelled == len(items):
            summary["scores"] = predictor.scores(items, rows)
            written.append(os.path.join(folder, "scores.json"))
            storage.write_json_atomic(written[-1], summary["scores"])
        elif labelled:
            log(f"{labelled} of {len(items)} items are labelled: not scored (label all or none)")
        summary["files"] = written
        log(
            f"{len(items)} items in {seconds:.1f} s ({summary['items_per_second']} items/s) "
            f"→ {output}"
        )
        return summary
    finally:
        shutil.rmtree(work, ignore_errors=True)
