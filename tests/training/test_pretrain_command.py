"""`python -m albert_tf.pretrain` as a user runs it: errors and refusals (kills and
resumes: test_faults.py)."""

import json
import os
import subprocess
import sys

import pytest
from training_utils import pretrain_command, pretrain_env

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


def test_changed_model_on_resume_is_refused(prepared, tmp_path):
    first = _run(_command(prepared, tmp_path / "m", "--num_train_steps=2"))
    assert first.returncode == 0, first.stderr[-3000:]
    second = _run(_command(prepared, tmp_path / "m", "--num_train_steps=4", "--hidden_size=64"))
    assert second.returncode != 0
    assert "hidden_size: 32 -> 64" in second.stderr


@pytest.mark.slow
def test_quickstart_flagfile_runs(tmp_path):
    """The README's main job, shortened: corpus → tokenizer → shards → train → eval."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.pretrain",
            f"--flagfile={repo}/configs/quickstart_en.flags",
            f"--model_dir={tmp_path}",
            "--num_train_steps=20",
            "--num_warmup_steps=2",
            "--progress_bar=false",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=_env(),
        cwd=repo,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((tmp_path / "eval_results.json").read_text())
    assert 0.0 < results["unigram_mlm_accuracy"] < 0.2
    assert results["mlm_accuracy"] > results["unigram_mlm_accuracy"] - 0.05
    assert albert_tf.load(tmp_path / "final").config.vocab_size > 1000
