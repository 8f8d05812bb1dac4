"""`plot_metrics` and `analyze_layers` with runs, models, corpus and outputs behind
``file://`` URLs, as they would be in a ``gs://`` bucket: everything read and
written through `tf.io.gfile`, nothing in the working directory, the same numbers
as from local paths."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers.testing_utils import tiny_config

from albert_tf.analysis.layer_transitions import analyze_model
from albert_tf.analysis.learning_curves import read_metrics

RUN = [
    {"split": "train", "step": 20, "mlm_loss": 7.25, "mlm_accuracy": 0.03125,
     "sop_loss": 0.71, "sop_accuracy": 0.5},
    {"split": "eval", "step": 20, "mlm_loss": 6.75, "mlm_accuracy": 0.05,
     "sop_loss": 0.7, "sop_accuracy": 0.51},
]  # fmt: skip
PNG = b"\x89PNG\r\n\x1a\n"


def _command(name: str, *args: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("ALBERT_TF_TRACEBACK", None)
    return subprocess.run(
        [sys.executable, "-m", f"albert_tf.{name}", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


def test_plot_metrics_reads_runs_and_writes_its_figure_in_a_bucket(tmp_path):
    bucket, workdir = tmp_path / "bucket", tmp_path / "cwd"
    workdir.mkdir()
    run = bucket / "runs" / "share_all"
    run.mkdir(parents=True)
    lines = "".join(json.dumps(r) + "\n" for r in RUN)
    (run / "metrics.jsonl").write_text(lines + '{"split": "train", "st')  # killed mid-line
    (run / "eval_results.json").write_text(
        json.dumps({"unigram_mlm_accuracy": 0.0375, "unigram_mlm_loss": 7.5})
    )
    (run / "pretraining_run.json").write_text(
        json.dumps({"albert_config": {"share": "all"}, "options": {"sentence_task": "sop"}})
    )
    url = f"file://{bucket}"
    result = _command(
        "plot_metrics", f"{url}/runs/share_all", f"--output={url}/plots/curves.png", cwd=workdir
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "skipped 1 unreadable line" in result.stdout
    assert list(workdir.iterdir()) == []  # no local "file:" folder
    png = (bucket / "plots" / "curves.png").read_bytes()
    assert png.startswith(PNG) and len(png) > 10_000
    (curve,) = json.loads((bucket / "plots" / "curves.json").read_text())["runs"]
    assert (curve["label"], curve["share"], curve["sentence_task"]) == ("share_all", "all", "sop")
    assert (curve["unigram_mlm_accuracy"], curve["unigram_mlm_loss"]) == (0.0375, 7.5)
    assert curve["eval"]["sop_accuracy"] == {"step": [20], "value": [0.51]}
    assert curve["train"]["mlm_loss"] == {"step": [20], "value": [7.25]}


def test_a_missing_run_in_a_bucket_names_the_path_and_the_fix(tmp_path):
    url = f"file://{tmp_path}/absent"
    with pytest.raises(FileNotFoundError, match=f"no run directory at {url}; pass a pretraining"):
        read_metrics(url)
    (tmp_path / "empty_run").mkdir()
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl in file://.*--model_dir"):
        read_metrics(f"file://{tmp_path}/empty_run")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A random tiny pretraining model with its tokenizer, saved locally."""
    import keras

    import albert_tf
    from albert_tf.data import iter_sentences, sample_path
    from albert_tf.tokenizers import train_sentencepiece

    base = tmp_path_factory.mktemp("bucket_layers")
    lines = list(itertools.islice(iter_sentences([sample_path("en")]), 600))
    tokenizer = train_sentencepiece(lines, base / "sp", vocab_size=400, shrink_vocab=True)
    keras.utils.set_random_seed(1)
    config = tiny_config(vocab_size=tokenizer.vocabulary_size, initializer_range=0.3)
    model = albert_tf.AlbertPretrainingModel.from_albert_config(config)
    albert_tf.save_model(model, base / "run" / "final", tokenizer=tokenizer)
    return base / "run" / "final"


def test_analyze_layers_reads_and_writes_in_a_bucket(model_dir, tmp_path):
    import shutil

    bucket, workdir = tmp_path / "bucket", tmp_path / "cwd"
    workdir.mkdir()
    shutil.copytree(model_dir, bucket / "shared" / "final")
    (bucket / "held_out.txt").write_text(
        "The first held-out sentence is here.\nIt has a second sentence.\n\n"
        "Another document follows it.\n"
    )
    url = f"file://{bucket}"
    result = _command(
        "analyze_layers",
        f"--model={url}/shared/final",
        f"--corpus={url}/held_out.txt",
        f"--output={url}/layers",
        "--max_seq_length=16",
        cwd=workdir,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert list(workdir.iterdir()) == []
    record = json.loads((bucket / "layers" / "layer_transitions.json").read_text())
    assert record["corpus"] == f"{url}/held_out.txt"
    (entry,) = record["models"]
    assert (entry["label"], entry["share"], entry["model_dir"]) == (
        "shared",
        "all",
        f"{url}/shared/final",
    )
    local = analyze_model(model_dir, str(bucket / "held_out.txt"), max_seq_length=16)
    assert entry["tokens"] == local.tokens > 0
    np.testing.assert_allclose(entry["l2_distance"], local.l2_distance, rtol=1e-6)
    np.testing.assert_allclose(entry["cosine_similarity"], local.cosine_similarity, rtol=1e-6)
    png = (bucket / "layers" / "layer_transitions.png").read_bytes()
    assert png.startswith(PNG) and len(png) > 10_000


def test_missing_models_in_a_bucket_name_the_path_and_the_fix(model_dir, tmp_path):
    url = f"file://{tmp_path}"
    result = _command(
        "analyze_layers",
        f"--model={url}/none",
        "--corpus=sample:en",
        f"--output={url}/out",
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert f"no model directory at {url}/none; pass a model saved with its tokenizer" in (
        result.stderr
    )
    (tmp_path / "bare").mkdir()
    for name in ("config.json", "weights.h5", "albert_tf.json"):
        (tmp_path / "bare" / name).write_bytes((model_dir / name).read_bytes())
    with pytest.raises(FileNotFoundError, match="file://.*/bare has no tokenizer/; analyse a"):
        analyze_model(f"{url}/bare", "sample:en")
