"""`python -m albert_tf.pretrain` as a user runs it: errors, kill and resume."""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import albert_tf
from albert_tf.checkpoints.saved_format import named_weights

TINY = [
    "--preset=albert_base_v2",
    "--embedding_size=16",
    "--hidden_size=32",
    "--num_hidden_layers=2",
    "--num_attention_heads=2",
    "--intermediate_size=64",
    "--max_seq_length=32",
    "--train_batch_size=8",
    "--eval_batch_size=8",
    "--num_warmup_steps=2",
    "--learning_rate=0.01",
    "--log_every_steps=5",
    "--num_eval_steps=0",
]


def _command(prepared, model_dir, *extra):
    return [
        sys.executable,
        "-m",
        "albert_tf.pretrain",
        f"--model_dir={model_dir}",
        f"--train_files={prepared.train_files}",
        f"--eval_files={prepared.eval_files}",
        f"--tokenizer_dir={prepared.tokenizer_dir}",
        *TINY,
        *extra,
    ]


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")


def _run(args, timeout=600):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=_env())


def test_sigkill_then_restart_resumes_and_matches_uninterrupted_run(prepared, tmp_path):
    # Logging every step puts learning-curve lines after the last checkpoint,
    # which the resumed run must replace rather than repeat.
    steps = [
        "--num_train_steps=40",
        "--save_checkpoints_steps=5",
        "--log_every_steps=1",
        "--progress_bar=false",
    ]
    reference = _run(_command(prepared, tmp_path / "reference", *steps))
    assert reference.returncode == 0, reference.stderr[-3000:]

    model_dir = tmp_path / "killed"
    process = subprocess.Popen(
        _command(prepared, model_dir, *steps),
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    # Kill once a mid-run checkpoint (step 10 or later) is on disk.
    while time.time() < deadline and process.poll() is None:
        saved = [
            int(p.rsplit("-", 1)[1].split(".")[0])
            for p in glob.glob(str(model_dir / "checkpoints" / "ckpt-*.index"))
        ]
        if saved and 10 <= max(saved) < 40:
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, "run finished before it could be killed"
    assert not (model_dir / "final").exists()

    resumed = _run(_command(prepared, model_dir, *steps))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from step" in resumed.stdout + resumed.stderr
    final = albert_tf.load(model_dir / "final")
    expected = albert_tf.load(tmp_path / "reference" / "final")
    ours, theirs = named_weights(final), named_weights(expected)
    # Same data position, same optimizer state: the same model as if never killed.
    diff = max(float(np.abs(np.asarray(ours[k]) - np.asarray(theirs[k])).max()) for k in ours)
    assert diff < 1e-5, diff

    # The learning curve holds every step once, and as the uninterrupted run's.
    def curve(directory):
        lines = (directory / "metrics.jsonl").read_text().splitlines()
        return [(r["step"], r["mlm_loss"]) for r in map(json.loads, lines) if r["split"] == "train"]

    resumed_curve, reference_curve = curve(model_dir), curve(tmp_path / "reference")
    assert [s for s, _ in resumed_curve] == list(range(1, 41))
    np.testing.assert_allclose(
        [loss for _, loss in resumed_curve], [loss for _, loss in reference_curve], atol=1e-4
    )

    results = json.loads((model_dir / "eval_results.json").read_text())
    assert results["step"] == 40
    assert 0.0 <= results["sop_accuracy"] <= 1.0 and results["mlm_loss"] > 0


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
