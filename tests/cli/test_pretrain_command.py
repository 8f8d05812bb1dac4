"""`python -m albert_tf.pretrain` as a user runs it: errors and refusals (kills and
resumes: tests/training/pretraining/test_faults.py)."""

import json
import subprocess
import sys

import pytest
from helpers.paths import REPO
from helpers.training_utils import pretrain_command, pretrain_env

import albert_tf


def _command(prepared, model_dir, *extra):
    return pretrain_command(prepared, model_dir, *extra)


def _env():
    return pretrain_env()


def _run(args, timeout=600):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=_env())


def test_unknown_flag_in_flagfile_is_named(prepared, tmp_path):
    flagfile = tmp_path / "bad.flags"
    flagfile.write_text("--num_train_steps=3\n--learning_rte=0.1\n")
    result = _run(_command(prepared, tmp_path / "m", f"--flagfile={flagfile}"))
    assert result.returncode != 0
    assert "learning_rte" in result.stderr


def test_batch_not_divisible_by_accumulation_is_explained(prepared, tmp_path):
    result = _run(
        _command(
            prepared,
            tmp_path / "m",
            "--num_train_steps=3",
            "--train_batch_size=10",
            "--gradient_accumulation_steps=4",
        )
    )
    assert result.returncode != 0
    assert "not divisible" in result.stderr and "multiple of 4" in result.stderr


def test_token_budget_below_one_full_example_is_explained(prepared, tmp_path):
    result = _run(
        _command(prepared, tmp_path / "m", "--num_train_steps=3", "--tokens_per_batch=16")
    )
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("pretrain: error: tokens_per_batch=16 cannot hold"), last
    assert "--tokens_per_batch to at least 32" in last


def test_missing_corpus_is_named(tmp_path):
    result = _run(
        [
            sys.executable,
            "-m",
            "albert_tf.pretrain",
            f"--model_dir={tmp_path}",
            "--corpus=/nonexistent/corpus.jsonl",
        ]
    )
    assert result.returncode != 0
    assert "corpus file not found: /nonexistent/corpus.jsonl" in result.stderr


def test_relative_corpus_is_found_in_data_dir(tmp_path):
    """--data_dir holds relative --corpus files (the recipes' shared corpora); samples,
    absolute paths and the rest stay as given."""
    command = [sys.executable, "-m", "albert_tf.pretrain", f"--model_dir={tmp_path / 'm'}"]
    result = _run([*command, f"--data_dir={tmp_path}", "--corpus=corpus/a.jsonl,sample:en"])
    assert result.returncode == 2
    assert f"corpus file not found: {tmp_path}/corpus/a.jsonl (" in result.stderr


def test_changed_model_on_resume_is_refused(prepared, tmp_path):
    first = _run(_command(prepared, tmp_path / "m", "--num_train_steps=2"))
    assert first.returncode == 0, first.stderr[-3000:]
    second = _run(_command(prepared, tmp_path / "m", "--num_train_steps=4", "--hidden_size=64"))
    assert second.returncode != 0
    assert "hidden_size: 32 -> 64" in second.stderr


@pytest.mark.slow
def test_quickstart_on_a_url_model_dir_keeps_everything_there_and_resumes(tmp_path):
    """The README's main job, shortened, with ``--model_dir`` a URL (as ``gs://`` is on
    a cloud run): corpus → tokenizer → shards → train → eval → final model all land
    under the URL, nothing in the working directory, and a second run with more
    steps resumes from the first one's checkpoint in a new process."""
    repo = REPO
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    run_dir = tmp_path / "bucket" / "run"
    url = f"file://{run_dir}"

    def pretrain(steps):
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "albert_tf.pretrain",
                f"--flagfile={repo}/configs/quickstart_en.flags",
                f"--model_dir={url}",
                f"--num_train_steps={steps}",
                "--num_warmup_steps=2",
                "--save_checkpoints_steps=10",
                "--progress_bar=false",
            ],
            capture_output=True,
            text=True,
            timeout=900,
            env=_env(),
            cwd=workdir,
        )

    first = pretrain(20)
    assert first.returncode == 0, first.stderr[-3000:]
    assert list(workdir.iterdir()) == []  # no local "file:" folder
    results = json.loads((run_dir / "eval_results.json").read_text())
    assert 0.0 < results["unigram_mlm_accuracy"] < 0.2
    assert results["mlm_accuracy"] > results["unigram_mlm_accuracy"] - 0.05
    for name in (
        "pretraining_run.json",
        "metrics.jsonl",
        "data/prepared.json",
        "data/tokenizer/spiece.model",
        "checkpoints/ckpt-20.index",
        "final/weights.h5",
        "final/tokenizer/tokenizer.json",
    ):
        assert (run_dir / name).is_file(), name
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").open()]
    assert steps[-1] == 20
    # Loaded back through the URL, as a user on another machine would.
    assert albert_tf.load(f"{url}/final").config.vocab_size > 1000

    second = pretrain(30)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"resumed from step 20 ({url}/checkpoints/ckpt-20)" in second.stdout
    assert "using data prepared earlier" in second.stdout
    assert list(workdir.iterdir()) == []
    train_steps = [
        record["step"]
        for record in map(json.loads, (run_dir / "metrics.jsonl").open())
        if record["split"] == "train"
    ]
    assert train_steps == sorted(set(train_steps)) and train_steps[-1] == 30
    # The quick start prints our lines only, none of TensorFlow's Python INFO logs.
    for run in (first, second):
        output = run.stdout + run.stderr
        for internal in ("INFO:tensorflow", "Start watcher", "PreemptionCheckpointHandler"):
            assert internal not in output, output[-3000:]
        assert "Sharding callback duration" not in output, output[-3000:]
