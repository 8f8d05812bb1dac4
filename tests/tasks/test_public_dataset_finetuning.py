"""Fine-tuning on public datasets by name: tensorflow-datasets' squad and glue/sst2 (TFDS's
own mock data) and a SQuAD 2.0 folder written by Hugging Face ``datasets``, each
fine-tuning a tiny model for two steps and evaluating it (`run_finetuning`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.finetuning_start import tfds_rows, tiny_start

from albert_tf.tasks.run import run_finetuning
from albert_tf.tasks.span_qa.settings import SpanQASettings
from albert_tf.training.finetuning.options import FineTuningOptions

datasets = pytest.importorskip("datasets")
tfds = pytest.importorskip("tensorflow_datasets")

WORDS = ["river", "house", "bread", "music", "winter", "garden", "letter", "money", "people"]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ALBERT_TF_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    return tiny_start(tmp_path_factory.mktemp("public"))


def _options(start, tmp_path, **more) -> FineTuningOptions:
    return FineTuningOptions(
        output_dir=str(tmp_path / "run"),
        max_seq_length=48,
        batch_size=8,
        num_train_steps=2,
        eval_every=2,
        progress=False,
        **start,
        **more,
    )


def _qa_rows(count: int, seed: int, impossible_every: int = 0):
    """Questions whose answer is the word after "the" in a short context."""
    rng = np.random.RandomState(seed)
    for i in range(count):
        words = list(rng.choice(WORDS, 6))
        context = f"{words[0]} {words[1]} the {words[2]} {words[3]} {words[4]}."
        impossible = bool(impossible_every) and i % impossible_every == 0
        start = context.index(" the ") + 5
        yield {
            "id": f"q{seed}-{i}",
            "title": "t",
            "context": context,
            "question": f"What comes after the in {words[5]}?",
            "answers": {
                "text": [] if impossible else [words[2]],
                "answer_start": [] if impossible else [start],
            },
        }


def test_tfds_squad_fine_tunes_and_evaluates(start, tmp_path, capsys):
    def rows(split):  # training and validation questions of their own
        return _qa_rows(40, 0 if split.startswith("train") else 1)

    with tfds.testing.mock_data(as_dataset_fn=tfds_rows(rows)):
        summary = run_finetuning(
            _options(
                start,
                tmp_path,
                task="span_qa",
                settings=SpanQASettings(max_query_length=16, doc_stride=16),
                train_files="tfds:squad/v1.1:train",
                dev_files="tfds:squad/v1.1:validation",
            )
        )
    assert summary["steps"] == 2
    dev = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert 0.0 <= dev["dev_f1"] <= 1.0
    out = capsys.readouterr().out
    assert "tfds:squad/v1.1:train: 40 rows" in out and "dev: 40 questions" in out


def test_tfds_glue_sst2_fine_tunes_and_evaluates(start, tmp_path, capsys):
    with tfds.testing.mock_data(num_examples=40):  # TFDS's random sentences and labels
        summary = run_finetuning(
            _options(
                start,
                tmp_path,
                task="classification",
                train_files="tfds:glue/sst2",
                dev_files="tfds:glue/sst2:validation",
            )
        )
    assert summary["steps"] == 2 and summary["metric"] == "accuracy"
    assert 0.0 <= summary["best_accuracy"] <= 1.0
    assert "dev: 40 items" in capsys.readouterr().out


def test_squad_v2_folder_from_datasets_keeps_its_unanswerable_questions(start, tmp_path, capsys):
    for split, seed in (("train", 0), ("validation", 1)):
        rows = list(_qa_rows(40, seed, impossible_every=4))
        columns = {key: [row[key] for row in rows] for key in rows[0]}
        datasets.Dataset.from_dict(columns).save_to_disk(str(tmp_path / "squad_v2" / split))
    summary = run_finetuning(
        _options(
            start,
            tmp_path,
            task="span_qa",
            settings=SpanQASettings(max_query_length=16, doc_stride=16),
            data_dir=str(tmp_path),  # the folders are named relative to it
            train_files="squad_v2/train",
            dev_files="squad_v2/validation",
        )
    )
    assert summary["steps"] == 2
    out = capsys.readouterr().out
    # 10 of every 40 are unanswerable: read as such, none dropped as "no_valid_answer".
    assert "dev: 40 questions on" in out and "'impossible': 10" in out
    assert "no_valid_answer" not in out
