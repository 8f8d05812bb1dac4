"""`python -m albert_tf.evaluate_pretraining` with the model, the shards and the
results behind ``file://`` URLs, as they would be in a ``gs://`` bucket: read and
written through `tf.io.gfile`, the same scores as from local paths."""

import json
import os
import shutil

import keras
import pytest
from helpers.commands import QUIET_CPU_ENV, run_command
from helpers.training_utils import tiny_albert

import albert_tf
from albert_tf.checkpoints.saved_format import save_model
from albert_tf.training.evaluation import evaluate_pretraining


def _cli(*args, cwd):
    return run_command("evaluate_pretraining", *args, cwd=cwd, env=QUIET_CPU_ENV)


def test_model_shards_and_results_in_a_bucket(prepared, vocab, tmp_path):
    bucket, workdir = tmp_path / "bucket", tmp_path / "cwd"
    workdir.mkdir()
    shutil.copytree(os.path.dirname(prepared.eval_files), bucket / "eval_shards")
    keras.utils.set_random_seed(3)
    model = albert_tf.AlbertPretrainingModel.from_albert_config(tiny_albert(vocab))
    url = f"file://{bucket}"
    save_model(model, f"{url}/final")
    run = _cli(
        f"--model={url}/final",
        f"--eval_files={url}/eval_shards/*.tfrecord",
        "--batch_size=8",
        f"--output={url}/scores/sop.json",
        cwd=workdir,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert list(workdir.iterdir()) == []  # no local "file:" folder
    results = json.loads((bucket / "scores" / "sop.json").read_text())
    assert results["model"] == f"{url}/final"
    assert results["sentence_task"] == "sop"  # the shards' metadata.json, read from the URL
    local = evaluate_pretraining(
        albert_tf.load(bucket / "final"), prepared.eval_files, max_seq_length=32, batch_size=8
    )
    assert results["mlm_predictions"] == local["mlm_predictions"] > 0
    assert results["sop_examples"] == local["sop_examples"] > 0
    for key in ("mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy"):
        assert results[key] == pytest.approx(local[key], abs=1e-6), key


def test_missing_urls_name_the_path_and_the_fix(tmp_path):
    url = f"file://{tmp_path}"
    (tmp_path / "final").mkdir()
    no_model = _cli(f"--model={url}/none", f"--eval_files={url}/*.tfrecord", cwd=tmp_path)
    assert no_model.returncode == 2
    assert f"no model directory at {url}/none; pass --model=MODEL_DIR/final" in no_model.stderr
    no_shards = _cli(f"--model={url}/final", f"--eval_files={url}/x/*.tfrecord", cwd=tmp_path)
    assert no_shards.returncode == 2
    assert f"--eval_files={url}/x/*.tfrecord matches no file; pass a glob" in no_shards.stderr
