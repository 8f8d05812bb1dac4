"""Multiple-choice items without a label: read as items to answer (for `predict`), left
out of training with a count, refused as dev or test data."""

from __future__ import annotations

import json

import pytest

from albert_tf.tasks.multiple_choice.data import read_multiple_choice
from albert_tf.tasks.multiple_choice.task import MultipleChoiceTask
from albert_tf.training.finetuning.options import FineTuningOptions

ITEM = {"context": "It rains.", "question": "Take an _ .", "options": ["umbrella", "ice cream"]}


def _write(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_a_missing_label_is_an_item_to_answer_and_a_wrong_one_is_skipped(tmp_path):
    path = _write(
        tmp_path / "mc.jsonl",
        [ITEM | {"id": "a", "label": 1}, ITEM | {"id": "b"}, ITEM | {"id": "c", "label": 2}],
    )
    items, skipped = read_multiple_choice([path])
    assert [(item.id, item.label) for item in items] == [("a", 1), ("b", -1)]
    assert dict(skipped) == {"bad_label": 1}


def test_training_leaves_unlabelled_items_out_and_dev_refuses_them(tmp_path):
    train = _write(tmp_path / "train.jsonl", [ITEM | {"id": "a", "label": 0}, ITEM | {"id": "b"}])
    options = FineTuningOptions("out", train, init_config="c.json")
    data = MultipleChoiceTask().read(options, lambda *_: None)
    assert [item.id for item in data.train] == ["a"]
    assert dict(data.skipped) == {"missing_label": 1}
    with pytest.raises(ValueError, match="--dev_files has items without a label"):
        MultipleChoiceTask().read(
            FineTuningOptions("out", train, dev_files=train, init_config="c.json"),
            lambda *_: None,
        )
