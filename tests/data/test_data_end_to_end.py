"""End to end with the real tokenizers: sample → shards → masked batches."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import read_documents, sample_path
from albert_tf.data.pipeline import pretraining_dataset
from albert_tf.data.shards import write_pretraining_data
from albert_tf.tokenizers import WordPieceTokenizer, load_tokenizer


def check_batches(ds, tokenizer, num_batches=20):
    """Whole words masked together, specials never; returns #predictions."""
    word_start = tokenizer.word_start_mask()
    special = np.array(tokenizer.special_ids)
    total = 0
    for features, labels in ds.take(num_batches):
        w = labels["mask_weights"].numpy() > 0
        rows = np.nonzero(w)[0]
        pos = features["mask_positions"].numpy()[w]
        orig = features["token_ids"].numpy().copy()
        orig[rows, pos] = labels["mask_ids"].numpy()[w]
        selected = np.zeros(orig.shape, bool)
        selected[rows, pos] = True
        assert not np.isin(orig[selected], special).any()
        cont = ~word_start[orig] & ~np.isin(orig, special)
        inner = cont[:, 1:] & ~np.isin(orig[:, :-1], special)
        assert np.array_equal(selected[:, 1:][inner], selected[:, :-1][inner])
        total += int(w.sum())
    return total


def test_sentencepiece_parallel_writer_and_pipeline(spm_dir, tmp_path):
    out = str(tmp_path / "shards")
    copy = tmp_path / "copy.jsonl.gz"
    copy.write_bytes(gzip.compress(open(sample_path("en"), "rb").read()))  # noqa: SIM115
    summary = write_pretraining_data(
        tokenizer=spm_dir,
        output_dir=out,
        inputs=[sample_path("en"), str(copy)],  # two inputs, two workers
        max_seq_length=128,
        dupe_factor=2,
        num_shards=2,
        num_workers=2,
        show_progress=False,
        log=None,
    )
    assert summary.documents == 84 and summary.examples > 500
    assert not summary.skipped
    # Each input is seeded by its index, so worker processes (each built its
    # own ShardWriter and tokenizer) write exactly what this process writes.
    in_process = str(tmp_path / "in_process")
    write_pretraining_data(
        tokenizer=spm_dir,
        output_dir=in_process,
        inputs=[sample_path("en"), str(copy)],
        max_seq_length=128,
        dupe_factor=2,
        num_shards=2,
        num_workers=1,
        show_progress=False,
        log=None,
    )
    shard_names = sorted(n for n in os.listdir(out) if n.endswith(".tfrecord"))
    assert shard_names == sorted(n for n in os.listdir(in_process) if n.endswith(".tfrecord"))
    for name in shard_names:
        with (
            open(os.path.join(out, name), "rb") as a,
            open(os.path.join(in_process, name), "rb") as b,
        ):
            assert a.read() == b.read(), name
    tok = load_tokenizer(spm_dir)
    # No tokenizer passed: masking_vocab.json next to the shards is used.
    ds = pretraining_dataset(os.path.join(out, "*.tfrecord"), batch_size=32, max_seq_length=128)
    assert check_batches(ds, tok) > 0
    # Words really have several pieces here, so whole-word masking is tested.
    assert (~tok.word_start_mask()).sum() > 50


@pytest.mark.timeout(300)
def test_dead_worker_is_an_error_not_a_hang(spm_dir, tmp_path, monkeypatch):
    """A spawned worker re-imports the parent's __main__; when that fails (as
    after Streamlit's AppTest, which leaves its script there) the worker dies.
    multiprocessing.Pool would start another forever; we must fail instead."""
    import types

    script = tmp_path / "unimportable_main.py"
    script.write_text("raise SystemExit(3)\n")
    fake_main = types.ModuleType("__main__")
    fake_main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(open(sample_path("en"), "rb").read())  # noqa: SIM115
    with pytest.raises(RuntimeError, match="worker process died.*num_workers=1"):
        write_pretraining_data(
            tokenizer=spm_dir,
            output_dir=str(tmp_path / "shards"),
            inputs=[sample_path("en"), str(copy)],  # two inputs, two workers
            max_seq_length=64,
            num_shards=1,
            num_workers=2,
            show_progress=False,
            log=None,
        )


def test_wordpiece_chinese(tmp_path):
    docs = list(read_documents(sample_path("zh")))[:40]
    chars = sorted({c for d in docs for s in d for c in s.lower() if not c.isspace()})
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars]
    vocab += [f"##{c}" for c in letters + [str(i) for i in range(10)]]
    vocab = list(dict.fromkeys(vocab))
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = WordPieceTokenizer(vocab_file)
    jsonl = tmp_path / "zh.jsonl"
    jsonl.write_text(
        "\n".join(json.dumps({"sentences": d}, ensure_ascii=False) for d in docs),
        encoding="utf-8",
    )
    out = str(tmp_path / "shards")
    summary = write_pretraining_data(
        tokenizer=tok,
        output_dir=out,
        inputs=[str(jsonl)],
        max_seq_length=64,
        dupe_factor=3,
        num_shards=1,
        show_progress=False,
        log=None,
    )
    assert summary.examples > 50
    ds = pretraining_dataset(
        os.path.join(out, "*.tfrecord"),
        batch_size=16,
        max_seq_length=64,
        tokenizer=tok,
    )
    assert check_batches(ds, tok, 10) > 0
    features, _ = next(iter(ds))
    assert features["token_ids"].dtype == tf.int32


def test_cli(spm_dir, tmp_path):
    out = tmp_path / "cli"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.create_pretraining_data",
            f"--input={sample_path('en')}",
            f"--tokenizer_dir={spm_dir}",
            f"--output_dir={out}",
            "--max_seq_length=64",
            "--dupe_factor=1",
            "--num_shards=2",
            "--sentence_task=nsp",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "examples written" in result.stdout
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["sentence_task"] == "nsp" and meta["summary"]["examples"] > 0
    assert len(list(out.glob("pretrain-*-of-00002.tfrecord"))) == 2

    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.create_pretraining_data",
            f"--input={tmp_path / 'missing.txt'}",
            f"--tokenizer_dir={spm_dir}",
            f"--output_dir={tmp_path / 'x'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode != 0 and "missing.txt" in bad.stderr
