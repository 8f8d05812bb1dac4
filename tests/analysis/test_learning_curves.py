"""Learning curves from metrics.jsonl: the numbers plotted, and the errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO

from albert_tf.analysis.learning_curves import learning_curve, read_metrics


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("ALBERT_TF_TRACEBACK", None)
    return subprocess.run(
        [sys.executable, "-m", "albert_tf.plot_metrics", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )


def _write_run(directory: Path, records: list[dict], tail: str = "") -> None:
    directory.mkdir(parents=True)
    lines = [json.dumps(r) for r in records]
    (directory / "metrics.jsonl").write_text("\n".join(lines) + "\n" + tail)


RUN_A = [
    {"split": "train", "step": 20, "mlm_loss": 7.25, "mlm_accuracy": 0.03125,
     "sop_loss": 0.71, "sop_accuracy": 0.5, "grad_norm": 2.0},
    {"split": "train", "step": 40, "mlm_loss": 6.5, "mlm_accuracy": 0.0625,
     "sop_loss": 0.69, "sop_accuracy": 0.53},
    {"split": "eval", "step": 40, "mlm_loss": 6.75, "mlm_accuracy": 0.05,
     "sop_loss": 0.7, "sop_accuracy": 0.51, "mlm_accuracy_stderr": 0.01},
]  # fmt: skip
# A sentence_task=none run: no SOP scalars.
RUN_B = [
    {"split": "train", "step": 10, "mlm_loss": 8.0, "mlm_accuracy": 0.01},
    {"split": "eval", "step": 10, "mlm_loss": 7.9, "mlm_accuracy": 0.02},
    {"split": "eval", "step": 20, "mlm_loss": 7.1, "mlm_accuracy": 0.04},
]


def test_plot_holds_exactly_the_logged_values(tmp_path):
    _write_run(tmp_path / "run_a", RUN_A, tail='{"split": "train", "st')  # killed mid-line
    (tmp_path / "run_a" / "eval_results.json").write_text(
        json.dumps({"mlm_accuracy": 0.05, "unigram_mlm_accuracy": 0.0375, "unigram_mlm_loss": 7.5})
    )
    (tmp_path / "run_a" / "pretraining_run.json").write_text(
        json.dumps({"albert_config": {"share": "none"}, "options": {"sentence_task": "sop"}})
    )
    _write_run(tmp_path / "run_b", RUN_B)
    output = tmp_path / "plots" / "curves.png"
    result = _run(str(tmp_path / "run_a"), str(tmp_path / "run_b"), f"--output={output}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "skipped 1 unreadable line" in result.stdout
    assert output.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    runs = json.loads(output.with_suffix(".json").read_text())["runs"]
    a, b = runs
    assert (a["label"], a["share"], a["sentence_task"]) == ("run_a", "none", "sop")
    assert (a["unigram_mlm_accuracy"], a["unigram_mlm_loss"]) == (0.0375, 7.5)
    assert (b["label"], b["share"], b["unigram_mlm_accuracy"]) == ("run_b", None, None)
    for run, records in ((a, RUN_A), (b, RUN_B)):
        for split in ("train", "eval"):
            logged = [r for r in records if r["split"] == split]
            names = {"mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy"} & {
                k for r in logged for k in r
            }
            assert set(run[split]) == names
            for name in names:
                assert run[split][name] == {
                    "step": [r["step"] for r in logged],
                    "value": [r[name] for r in logged],
                }
    assert "sop_accuracy" not in b["train"]


def test_a_run_without_sentence_task_draws_no_sentence_curve(tmp_path):
    # The trainer logs the untrained sentence head's numbers of a "none" run too.
    _write_run(tmp_path / "none_run", RUN_A)
    (tmp_path / "none_run" / "pretraining_run.json").write_text(
        json.dumps({"albert_config": {"share": "all"}, "options": {"sentence_task": "none"}})
    )
    curve = learning_curve(tmp_path / "none_run")
    for split in ("train", "eval"):
        assert set(curve[split]) == {"mlm_loss", "mlm_accuracy"}
    assert curve["eval"]["mlm_accuracy"]["value"] == [0.05]


def test_missing_and_empty_metrics_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run directory"):
        read_metrics(tmp_path / "absent")
    (tmp_path / "no_metrics").mkdir()
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl in"):
        learning_curve(tmp_path / "no_metrics")
    _write_run(tmp_path / "empty", [])
    with pytest.raises(ValueError, match="holds no metrics records"):
        read_metrics(tmp_path / "empty")


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        ("no_metrics", "no metrics.jsonl in"),
        (None, "give at least one RUN_DIR"),
    ],
)
def test_command_errors_are_one_line(tmp_path, setup, needle):
    run_dir = tmp_path / "run"
    if setup == "no_metrics":
        run_dir.mkdir()
    args = [f"--output={tmp_path / 'x.png'}"] + ([str(run_dir)] if setup else [])
    result = _run(*args)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("plot_metrics: error: ") and needle in last, last
