"""A pretraining run's learning curve: ``metrics.jsonl`` read back and plotted.

The trainer (`albert_tf.training.metrics_log`) appends one JSON line per logging
window (``"split": "train"``) and per held-out evaluation (``"split": "eval"``), each
with ``step`` and the scalars ``mlm_loss``, ``mlm_accuracy``, ``sop_loss`` and
``sop_accuracy`` (the sentence task's, SOP or NSP). ``eval_results.json`` adds the
unigram baseline at the same masked positions; ``pretraining_run.json`` names the
sentence task and the sharing mode.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from albert_tf import storage
from albert_tf.analysis.plotting import new_figure, save_figure
from albert_tf.training.metrics_log import METRICS_FILE
from albert_tf.training.pretraining.run_record import read_run_record

EVAL_RESULTS_FILE = "eval_results.json"
SPLITS = ("train", "eval")
#: The plotted scalars, in panel order.
SERIES = ("mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy")


def read_metrics(run_dir: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], int]:
    """The records of ``RUN_DIR/metrics.jsonl`` and the number of unreadable lines.

    A line cut short when a run was killed is skipped and counted, not fatal.

    Raises:
        FileNotFoundError: no run directory, or no metrics.jsonl in it.
        ValueError: the file holds no record.
    """
    run_dir = os.fspath(run_dir)
    if not storage.isdir(run_dir):
        raise FileNotFoundError(
            f"no run directory at {run_dir}; pass a pretraining run's --model_dir"
        )
    path = os.path.join(run_dir, METRICS_FILE)
    if not storage.isfile(path):
        raise FileNotFoundError(
            f"no {METRICS_FILE} in {run_dir}; pass a pretraining run's --model_dir"
        )
    records, skipped = [], 0
    with storage.open_file(path, "r") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                skipped += 1
                continue
            if isinstance(record, dict) and record.get("split") in SPLITS and "step" in record:
                records.append(record)
            else:
                skipped += 1
    if not records:
        raise ValueError(f"{path} holds no metrics records (has the run logged a step yet?)")
    return records, skipped


def learning_curve(run_dir: str | os.PathLike[str], label: str | None = None) -> dict[str, Any]:
    """One run's series, baseline and labels, as `plot_learning_curves` draws them.

    Returns:
        ``{"run_dir", "label", "share", "sentence_task", "skipped_lines",
        "unigram_mlm_accuracy", "unigram_mlm_loss", "train": {...}, "eval": {...}}``
        where each split maps a scalar of `SERIES` to ``{"step": [...], "value": [...]}``
        in file order (scalars a run never logged are left out, and the sentence
        task's of a ``sentence_task="none"`` run, whose head never trains), and the
        unigram figures are None without ``eval_results.json``.
    """
    run_dir = os.fspath(run_dir)
    records, skipped = read_metrics(run_dir)
    curve: dict[str, Any] = {split: {} for split in SPLITS}
    for record in records:
        for name in SERIES:
            if name in record:
                series = curve[record["split"]].setdefault(name, {"step": [], "value": []})
                series["step"].append(int(record["step"]))
                series["value"].append(float(record[name]))
    baseline: dict[str, Any] = {}
    path = os.path.join(run_dir, EVAL_RESULTS_FILE)
    if storage.isfile(path):
        baseline = json.loads(storage.read_text(path))
    record = read_run_record(run_dir)
    sentence_task = record.get("options", {}).get("sentence_task")
    if sentence_task == "none":
        # The sentence head is never trained (steps.variables_to_train): what it
        # logs is an untrained head's guessing, which would read as a curve.
        for split in SPLITS:
            curve[split] = {k: v for k, v in curve[split].items() if not k.startswith("sop_")}
    return {
        "run_dir": run_dir,
        "label": label or os.path.basename(os.path.normpath(run_dir)),
        "share": record.get("albert_config", {}).get("share"),
        "sentence_task": sentence_task,
        "skipped_lines": skipped,
        "unigram_mlm_accuracy": baseline.get("unigram_mlm_accuracy"),
        "unigram_mlm_loss": baseline.get("unigram_mlm_loss"),
        **curve,
    }


def _legend_name(curve: dict[str, Any]) -> str:
    details = [f"share={curve['share']}"] if curve.get("share") else []
    if curve.get("sentence_task"):
        details.append(curve["sentence_task"])
    return f"{curve['label']} ({', '.join(details)})" if details else curve["label"]


def _sentence_name(curves: Sequence[dict[str, Any]]) -> str:
    tasks = {c.get("sentence_task") for c in curves} - {None, "none"}
    return tasks.pop().upper() if len(tasks) == 1 else "SOP/NSP"


def plot_learning_curves(curves: Sequence[dict[str, Any]], path: str | os.PathLike[str]) -> None:
    """MLM loss and accuracy, sentence-task loss and accuracy: one colour per run,
    training windows thin, held-out evaluations with markers, the unigram baseline
    dotted; one legend for the figure."""
    from matplotlib.lines import Line2D

    sentence = _sentence_name(curves)
    titles = {
        "mlm_loss": "MLM loss",
        "mlm_accuracy": "MLM accuracy",
        "sop_loss": f"{sentence} loss",
        "sop_accuracy": f"{sentence} accuracy",
    }
    baselines = {"mlm_loss": "unigram_mlm_loss", "mlm_accuracy": "unigram_mlm_accuracy"}
    figure, panels = new_figure(2, 2, width=10, height=7)
    handles = []
    for index, curve in enumerate(curves):
        colour = f"C{index % 10}"
        handles.append(Line2D([], [], color=colour, lw=2.5, label=_legend_name(curve)))
        for axes, series in zip(panels, SERIES, strict=True):
            train, held_out = curve["train"].get(series), curve["eval"].get(series)
            if train:
                axes.plot(train["step"], train["value"], color=colour, lw=0.8, alpha=0.6)
            if held_out:
                axes.plot(held_out["step"], held_out["value"], color=colour, marker="o", lw=1.8)
            baseline = curve.get(baselines.get(series, ""))
            if baseline is not None:
                axes.axhline(baseline, color=colour, ls=":", lw=1.2)
    if panels[3].has_data():
        panels[3].axhline(0.5, color="grey", ls="--", lw=0.8)
    # Line styles, once for every run.
    handles += [
        Line2D([], [], color="black", lw=0.8, alpha=0.6, label="training (logging windows)"),
        Line2D([], [], color="black", lw=1.8, marker="o", label="held-out"),
        Line2D([], [], color="black", ls=":", lw=1.2, label="unigram baseline"),
        Line2D([], [], color="grey", ls="--", lw=0.8, label="chance"),
    ]
    for axes, series in zip(panels, SERIES, strict=True):
        axes.set(title=titles[series], xlabel="step")
        axes.grid(alpha=0.3)
        if not axes.has_data():
            axes.text(0.5, 0.5, "not logged", ha="center", transform=axes.transAxes)
    figure.legend(handles=handles, loc="outside lower center", ncols=3, fontsize="small")
    save_figure(figure, path, dpi=90)
