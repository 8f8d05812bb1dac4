"""The run record: which model and recipe a pretraining directory belongs to.

``MODEL_DIR/pretraining_run.json`` is written by the first run that sets up
successfully in a directory. A later run in the same directory must match it
(see `check_compatible`): resuming a checkpoint with another model shape or
another recipe would silently train something else.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from albert_tf import storage
from albert_tf.config import AlbertConfig
from albert_tf.training.pretraining.options import PretrainingOptions

RUN_FILE = "pretraining_run.json"
# Options that may change between a run and its resumption: where things
# are, how long to train, and how to log, save and evaluate.
RESUMABLE_OPTIONS = (
    "model_dir",
    "progress_bar",
    "log_every_steps",
    "eval_every_steps",
    "num_eval_steps",
    "eval_files",
    "train_files",
    "num_train_steps",
    "save_checkpoints_steps",
    "save_checkpoints_seconds",
    "keep_checkpoint_max",
    "fused_kernels",
    "jit_compile",
    "steps_per_loop",
    # Where batches are made, not what they hold.
    "data_service",
    "data_service_mode",
    # How to react to faults, not what is trained.
    "max_consecutive_nonfinite_steps",
    "faults",
)
# Options added after run records were first written: recorded only when set,
# so that runs recorded before them still resume.
OPTIONAL_OPTIONS = ("tokens_per_batch",)


def run_record(config: AlbertConfig, options: PretrainingOptions) -> dict[str, Any]:
    """What a resumed run must share with the run it resumes."""
    recorded = dataclasses.asdict(options)
    for key in RESUMABLE_OPTIONS:
        recorded.pop(key)
    for key in OPTIONAL_OPTIONS:
        if recorded[key] is None:
            recorded.pop(key)
    return {"albert_config": config.to_hf_dict(), "options": recorded}


def read_run_record(model_dir: str) -> dict[str, Any]:
    """The run record a previous run left in ``model_dir`` ({} if none)."""
    path = os.path.join(model_dir, RUN_FILE)
    if not storage.exists(path):
        return {}
    with storage.open_file(path, "r") as f:
        return json.load(f)


def check_compatible(
    model_dir: str, record: dict[str, Any], previous: dict[str, Any] | None = None
) -> None:
    """Refuses to resume a checkpoint written for another model or recipe.
    ``previous`` is the directory's record if the caller read it already."""
    previous = read_run_record(model_dir) if previous is None else previous
    if previous:
        # Records written before an option became resumable still hold it.
        options = {
            k: v for k, v in previous.get("options", {}).items() if k not in RESUMABLE_OPTIONS
        }
        previous = {**previous, "options": options}
    if previous and previous != record:
        diffs = record_diff(previous, record)
        raise ValueError(
            f"{model_dir} holds a run with a different model or "
            f"recipe ({'; '.join(diffs)}). Resume with the same settings, or "
            "pass a new --model_dir."
        )


def write_run_record(model_dir: str, record: dict[str, Any]) -> None:
    """Claims ``model_dir`` for this run, unless a record is there already."""
    path = os.path.join(model_dir, RUN_FILE)
    if storage.exists(path):
        return
    storage.makedirs(model_dir)
    storage.write_json_atomic(path, record, sort_keys=True)  # never a half-written record


def record_diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    """``"key: old -> new"`` for every leaf that differs, nested keys dotted.

    >>> record_diff({"options": {"seed": 1, "optimizer": "lamb"}},
    ...             {"options": {"seed": 2, "optimizer": "lamb"}, "extra": True})
    ['extra: None -> True', 'options.seed: 1 -> 2']
    """
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            out += record_diff(x, y, f"{prefix}{key}.")
        elif x != y:
            out.append(f"{prefix}{key}: {x!r} -> {y!r}")
    return out
