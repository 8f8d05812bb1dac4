"""Pretraining-data preparation as a Beam pipeline (real DirectRunner, spawned
workers) writes the shards of the local path, byte for byte."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from albert_tf.data import sample_path
from albert_tf.data.shards import write_pretraining_data

pytest.importorskip("apache_beam", reason="the beam extra is not installed")

from albert_tf.data.shards.beam import run_beam_pipeline  # noqa: E402

# 16 KiB tasks of the English sample: 19 tasks, so both workers get several.
OPTIONS = dict(
    inputs=[sample_path("en")],
    max_seq_length=48,
    sentence_task="sop",
    dupe_factor=2,
    seed=5,
    num_shards=3,
    task_bytes=16_384,
    pool_bytes=16_384,
)


def _records(output_dir) -> collections.Counter:
    files = sorted(str(p) for p in output_dir.glob("pretrain-*.tfrecord"))
    return collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(files))


def _shard_bytes(output_dir) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(output_dir.glob("pretrain-*.tfrecord"))}


def _metadata(output_dir) -> dict:
    return json.loads((output_dir / "metadata.json").read_text())


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, spm_dir):
    out = tmp_path_factory.mktemp("local")
    summary = write_pretraining_data(
        tokenizer=spm_dir, output_dir=str(out), show_progress=False, log=None, **OPTIONS
    )
    return out, summary


def test_beam_multi_processing_writes_the_local_examples(tmp_path, spm_dir, local_run):
    local_dir, local = local_run
    out = tmp_path / "beam"
    summary = run_beam_pipeline(
        tokenizer_dir=spm_dir,
        output_dir=str(out),
        runner="DirectRunner",
        pipeline_args=["--direct_num_workers=2", "--direct_running_mode=multi_processing"],
        log=None,
        **OPTIONS,
    )
    assert summary.tasks == local.tasks == 19
    reference = _records(local_dir)
    assert sum(reference.values()) == local.examples > 1000
    assert _records(out) == reference
    # Each task's parts are concatenated in task order, as the local path does.
    assert _shard_bytes(out) == _shard_bytes(local_dir)
    assert not (out / ".beam_parts").exists()
    # The counters, gathered from the workers, are the local counts.
    assert (summary.documents, summary.sentences, summary.examples) == (
        local.documents,
        local.sentences,
        local.examples,
    )
    assert summary.label_counts == local.label_counts
    assert summary.skipped == local.skipped and summary.notes == local.notes
    meta, local_meta = _metadata(out), _metadata(local_dir)
    assert set(meta) == set(local_meta) | {"runner"} and meta["runner"] == "DirectRunner"
    for key in ("documents", "sentences", "examples", "label_counts", "skipped", "num_shards"):
        assert meta["summary"][key] == local_meta["summary"][key], key
    assert meta["summary"]["documents"] == 42
    names = sorted(os.listdir(out))
    assert names == sorted(os.listdir(local_dir))  # shards, masking_vocab.json, metadata.json
    assert (out / "masking_vocab.json").read_text() == (
        local_dir / "masking_vocab.json"
    ).read_text()


def test_cli_runner_flag_runs_the_beam_pipeline(tmp_path, spm_dir, local_run):
    local_dir, _ = local_run
    out = tmp_path / "cli"
    args = [f"--{k}={v}" for k, v in OPTIONS.items() if k != "inputs"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.create_pretraining_data",
            f"--input={sample_path('en')}",
            f"--tokenizer_dir={spm_dir}",
            f"--output_dir={out}",
            *args,
            "--runner=DirectRunner",
            "--beam_pipeline_options=--direct_running_mode=in_memory",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "documents read:   42" in done.stdout
    assert _records(out) == _records(local_dir)
    assert _metadata(out)["runner"] == "DirectRunner"


def test_tfds_split_through_beam_gives_the_local_examples(tmp_path, spm_dir):
    import tensorflow_datasets as tfds

    from albert_tf.data.tfds_corpus import AlbertCorpus

    manual = tmp_path / "manual"
    manual.mkdir()
    (manual / "c.jsonl").write_bytes(open(sample_path("en"), "rb").read())  # noqa: SIM115
    data_dir = str(tmp_path / "tfds")
    AlbertCorpus(data_dir=data_dir).download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual))
    )
    common = dict(
        tfds_name="albert_corpus",
        tfds_data_dir=data_dir,
        max_seq_length=48,
        dupe_factor=1,
        num_shards=2,
        log=None,
    )
    local = write_pretraining_data(
        tokenizer=spm_dir, output_dir=str(tmp_path / "local"), show_progress=False, **common
    )
    beam_summary = run_beam_pipeline(
        tokenizer_dir=spm_dir, output_dir=str(tmp_path / "beam"), runner="DirectRunner", **common
    )
    assert beam_summary.documents == local.documents == 42
    assert _records(tmp_path / "beam") == _records(tmp_path / "local")
    assert _shard_bytes(tmp_path / "beam") == _shard_bytes(tmp_path / "local")
    assert _metadata(tmp_path / "beam")["inputs"] == ["tfds:albert_corpus/train"]


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--beam_pipeline_options=--direct_num_workers=2"], "--beam_pipeline_options needs"),
        (["--runner=DirectRunner", "--num_workers=2"], "--num_workers is for the local"),
    ],
)
def test_cli_rejects_mixed_up_runner_flags(tmp_path, flags, needle):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.create_pretraining_data",
            "--input=sample:en",
            f"--tokenizer_dir={tmp_path}",
            f"--output_dir={tmp_path / 'out'}",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("create_pretraining_data: error: ") and needle in last, last
    assert not (tmp_path / "out").exists()
