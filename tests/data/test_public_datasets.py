"""Public datasets by name (`albert_tf.data.public_datasets`): folders and files that
Hugging Face ``datasets`` itself writes, and tensorflow-datasets' own mock data, read
by the task readers as the items a hand-made file of the same content gives."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

datasets = pytest.importorskip("datasets")
tf = pytest.importorskip("tensorflow")
tfds = pytest.importorskip("tensorflow_datasets")

from helpers.finetuning_start import tfds_rows  # noqa: E402

from albert_tf.data import public_datasets  # noqa: E402
from albert_tf.tasks.classification.data import read_classification  # noqa: E402
from albert_tf.tasks.multiple_choice.data import read_multiple_choice  # noqa: E402
from albert_tf.tasks.span_qa.data import read_span_qa  # noqa: E402
from albert_tf.tasks.tagging.data import read_tagging  # noqa: E402

CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
CONTEXT = "ALBERT shares layers across depth."


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ALBERT_TF_CACHE", str(tmp_path / "cache"))


def _squad_v2_rows():
    # As Hugging Face's squad_v2 has them: an unanswerable question has empty answers.
    return {
        "id": ["q1", "q2"],
        "title": ["t", "t"],
        "context": [CONTEXT, CONTEXT],
        "question": ["What does ALBERT share?", "Who wrote it?"],
        "answers": [
            {"text": ["layers"], "answer_start": [CONTEXT.index("layers")]},
            {"text": [], "answer_start": []},
        ],
    }


def _ner_dataset():
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "tokens": datasets.Sequence(datasets.Value("string")),
            "ner_tags": datasets.Sequence(datasets.ClassLabel(names=CONLL_TAGS)),
        }
    )
    return datasets.Dataset.from_dict(
        {
            "id": ["0", "1"],
            "tokens": [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]],
            "ner_tags": [[3, 0, 7, 0], [1, 2]],
        },
        features=features,
    )


def test_squad_v2_saved_by_datasets_keeps_unanswerable_questions(tmp_path):
    folder = str(tmp_path / "squad_v2")
    datasets.Dataset.from_dict(_squad_v2_rows()).save_to_disk(folder)
    items, skipped = read_span_qa([public_datasets.dataset_file(folder, log=lambda _: None)])
    assert [(i.id, i.impossible, [(a.start, a.end, a.text) for a in i.answers]) for i in items] == [
        ("q1", False, [(14, 20, "layers")]),
        ("q2", True, []),
    ]
    assert not skipped


def test_parquet_export_reads_like_the_saved_folder(tmp_path):
    dataset = datasets.Dataset.from_dict(_squad_v2_rows())
    dataset.to_parquet(str(tmp_path / "squad.parquet"))
    dataset.save_to_disk(str(tmp_path / "saved"))
    logged = []
    from_parquet = public_datasets.dataset_file(str(tmp_path / "squad.parquet"), logged.append)
    from_folder = public_datasets.dataset_file(str(tmp_path / "saved"), logged.append)
    assert read_span_qa([from_parquet])[0] == read_span_qa([from_folder])[0]
    assert len(logged) == 2 and all("2 rows" in line for line in logged)
    # A second call reads the cache: nothing converted, nothing logged.
    assert public_datasets.dataset_file(str(tmp_path / "saved"), logged.append) == from_folder
    assert len(logged) == 2


def test_a_dataset_dict_needs_a_split(tmp_path):
    dataset = datasets.Dataset.from_dict(_squad_v2_rows())
    datasets.DatasetDict({"train": dataset, "validation": dataset}).save_to_disk(
        str(tmp_path / "dict")
    )
    with pytest.raises(ValueError, match="DatasetDict.*dict/train"):
        public_datasets.dataset_file(str(tmp_path / "dict"))
    path = public_datasets.dataset_file(str(tmp_path / "dict" / "validation"), lambda _: None)
    assert len(read_span_qa([path])[0]) == 2


def test_conll_tags_saved_by_datasets_become_entities(tmp_path):
    folder = str(tmp_path / "conll")
    _ner_dataset().save_to_disk(folder)
    path = public_datasets.dataset_file(folder, lambda _: None)
    assert path.endswith(".conll")
    items, skipped = read_tagging([path])
    # Tokens joined by spaces: "EU rejects German call" has ORG at 0-2, MISC at 11-17.
    assert [[(e.start, e.end, e.label) for e in item.entities] for item in items] == [
        [(0, 2, "ORG"), (11, 17, "MISC")],
        [(0, 15, "PER")],
    ]
    assert not skipped


def test_classification_labels_keep_their_index_and_test_rows_stay_unlabelled(tmp_path):
    features = datasets.Features(
        {
            "sentence": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["negative", "positive"]),
            "idx": datasets.Value("int32"),
        }
    )
    datasets.Dataset.from_dict(
        {"sentence": ["a fine film", "dull"], "label": [1, 0], "idx": [0, 1]}, features=features
    ).save_to_disk(str(tmp_path / "train"))
    datasets.Dataset.from_dict(
        {"sentence": ["who knows"], "label": [-1], "idx": [7]}, features=features
    ).save_to_disk(str(tmp_path / "test"))
    train = public_datasets.dataset_file(str(tmp_path / "train"), lambda _: None)
    items, skipped, names = read_classification([train])
    assert [(i.id, i.text, i.label) for i in items] == [("0", "a fine film", 1), ("1", "dull", 0)]
    assert names == ["0", "1"] and not skipped
    test = public_datasets.dataset_file(str(tmp_path / "test"), lambda _: None)
    assert json.loads(pathlib.Path(test).read_text()) == {"id": "7", "text": "who knows"}


def test_columns_of_no_task_are_refused_with_the_layouts(tmp_path):
    datasets.Dataset.from_dict({"image": [1], "caption": ["x"]}).save_to_disk(str(tmp_path / "x"))
    with pytest.raises(public_datasets.DatasetLayoutError, match="span QA.*classification"):
        public_datasets.dataset_file(str(tmp_path / "x"))


def test_ordinary_files_are_left_alone(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text("{}\n")
    assert public_datasets.dataset_file(str(path)) is None
    assert list(public_datasets.dataset_files([str(path), str(tmp_path)])) == [
        str(path),
        str(tmp_path),
    ]


def test_tfds_squad_v2_through_mock_data():
    def rows(split):
        for i, impossible in enumerate([False, True, False]):
            yield {
                "id": f"{split}{i}",
                "title": "t",
                "context": CONTEXT,
                "question": "What does ALBERT share?",
                "is_impossible": impossible,
                "answers": {
                    "text": [] if impossible else ["layers"],
                    "answer_start": [] if impossible else [14],
                },
                "plausible_answers": {
                    "text": ["layers"] if impossible else [],
                    "answer_start": [14] if impossible else [],
                },
            }

    with tfds.testing.mock_data(as_dataset_fn=tfds_rows(rows)):
        path = public_datasets.dataset_file("tfds:squad/v2.0:validation", lambda _: None)
    items, skipped = read_span_qa([path])
    assert [(i.id, i.impossible, len(i.answers)) for i in items] == [
        ("validation0", False, 1),
        ("validation1", True, 0),
        ("validation2", False, 1),
    ]
    assert not skipped


def test_tfds_glue_sst2_random_mock_data():
    with tfds.testing.mock_data(num_examples=5):
        path = public_datasets.dataset_file("tfds:glue/sst2", lambda _: None)
    items, skipped, names = read_classification([path])
    assert len(items) == 5 and not skipped
    assert set(names) <= {"0", "1"} and all(isinstance(i.text, str) and i.text for i in items)


def test_tfds_conll2003_tags_by_their_class_names():
    def rows(split):
        # conll2003's own label order: O, B-PER, I-PER, B-ORG, I-ORG, B-LOC, ...
        yield {"tokens": ["Peter", "Blackburn"], "pos": [0, 0], "chunks": [0, 0], "ner": [1, 2]}

    with tfds.testing.mock_data(as_dataset_fn=tfds_rows(rows)):
        path = public_datasets.dataset_file("tfds:conll2003:test", lambda _: None)
    (item,), _ = read_tagging([path])
    assert [(e.start, e.end, e.label) for e in item.entities] == [(0, 15, "PER")]


def test_tfds_race_is_read_as_multiple_choice():
    def rows(split):
        yield {
            "example_id": "high1.txt",
            "article": "It rains.",
            "questions": ["Take an _ ."],
            "options": tf.ragged.constant([["umbrella", "ice cream", "a hat", "a cat"]]),
            "answers": ["A"],
        }

    with tfds.testing.mock_data(as_dataset_fn=tfds_rows(rows)):
        path = public_datasets.dataset_file("tfds:race/high:test", lambda _: None)
    items, skipped = read_multiple_choice([path])
    assert [(i.options[i.label], len(i.options)) for i in items] == [("umbrella", 4)]
    assert not skipped


def test_unknown_tfds_name_names_it():
    with pytest.raises(ValueError, match="no dataset 'no_such_dataset'"):
        public_datasets.dataset_file("tfds:no_such_dataset")


def test_cached_file_is_whole(tmp_path):
    datasets.Dataset.from_dict(_squad_v2_rows()).save_to_disk(str(tmp_path / "s"))
    path = public_datasets.dataset_file(str(tmp_path / "s"), lambda _: None)
    assert not os.path.exists(path + ".partial")
    lines = pathlib.Path(path).read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["q1", "q2"]


def test_squad_v2_json_lines_from_datasets_keep_unanswerable_questions(tmp_path):
    # Dataset.to_json writes JSON Lines that the reader reads as they are, with
    # Hugging Face's answer columns: empty ones mark an unanswerable question.
    path = str(tmp_path / "squad_v2.jsonl")
    datasets.Dataset.from_dict(_squad_v2_rows()).to_json(path)
    items, skipped = read_span_qa([path])
    assert [(i.id, i.impossible, len(i.answers)) for i in items] == [
        ("q1", False, 1),
        ("q2", True, 0),
    ]
    assert not skipped
