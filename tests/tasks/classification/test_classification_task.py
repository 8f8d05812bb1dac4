"""What the finetune command's classification task refuses before any training."""

from __future__ import annotations

import json

import pytest

from albert_tf.tasks.classification.settings import ClassificationSettings
from albert_tf.tasks.classification.task import ClassificationTask
from albert_tf.training.finetuning.options import FineTuningOptions


def _write(path, rows):
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return str(path)


def _read(files, **settings):
    options = FineTuningOptions(
        "unused", files, task="classification", settings=ClassificationSettings(**settings)
    )
    return ClassificationTask().read(options, lambda *args: None)


def test_two_labels_are_read_with_their_names(tmp_path):
    train = _write(
        tmp_path / "t.jsonl", [{"text": "good", "label": "pos"}, {"text": "bad", "label": "neg"}]
    )
    data = _read([train])
    assert sorted(data.label_names) == ["neg", "pos"] and len(data.train) == 2


def test_one_label_is_refused_not_trained_as_regression(tmp_path):
    train = _write(tmp_path / "t.jsonl", [{"text": "good", "label": "pos"}] * 3)
    with pytest.raises(ValueError, match="one label, 'pos'.*--num_labels=1"):
        _read([train])


def test_training_files_without_any_label_are_refused(tmp_path):
    train = _write(tmp_path / "t.jsonl", [{"text": "good"}, {"text": "bad"}])
    with pytest.raises(ValueError, match="no training item has a label"):
        _read([train], num_labels=2)


def test_distinct_texts_keep_the_smallest_id_of_each_text(tmp_path):
    rows = [
        {"id": "r3", "text": "good", "label": "pos"},
        {"id": "r1", "text": "good", "label": "neg"},  # the same text: r1 is kept
        {"id": "r2", "text": "bad", "label": "neg"},
        {"id": "r4", "text": "good", "text_pair": "x", "label": "pos"},  # another pair
    ]
    train = _write(tmp_path / "t.jsonl", rows)
    assert len(_read([train]).train) == 4
    data = _read([train], distinct_texts=True)
    assert [(item.id, item.text, item.text_pair) for item in data.train] == [
        ("r1", "good", ""),
        ("r2", "bad", ""),
        ("r4", "good", "x"),
    ]
    assert data.skipped["repeated_text"] == 1
