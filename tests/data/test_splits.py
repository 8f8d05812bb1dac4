"""Splits by group (`albert_tf.data.splits`, the ``finetune`` command's ``--split``): the
questions about one SQuAD paragraph or article, the multiple-choice questions about one
context and the copies of one text each land in one part; items alone in their group
land where the split by id put them; dev or test files that share contexts or texts
with the training file are counted in a warning."""

from __future__ import annotations

import collections
import json

import pytest

from albert_tf.data.splits import item_group, shared_groups, split_examples
from albert_tf.tasks.classification.data import ClassificationExample
from albert_tf.tasks.multiple_choice.data import MultipleChoiceExample
from albert_tf.tasks.run import _split, _warn_shared
from albert_tf.tasks.span_qa.data import read_span_qa
from albert_tf.training.finetuning.options import FineTuningOptions


def _squad(path, articles: int, paragraphs: int, questions: int, titles: bool = True):
    """A SQuAD file: each paragraph asked several questions, answered by its first word."""
    data = []
    for a in range(articles):
        article = {"paragraphs": []}
        if titles:
            article["title"] = f"Article {a}"
        for p in range(paragraphs):
            context = f"Word{a}x{p} is the subject of paragraph {p} of article {a}."
            qas = [
                {
                    "id": f"{a}-{p}-{q}",
                    "question": f"Question {q} about {a}/{p}?",
                    "answers": [{"text": f"Word{a}x{p}", "answer_start": 0}],
                }
                for q in range(questions)
            ]
            article["paragraphs"].append({"context": context, "qas": qas})
        data.append(article)
    path.write_text(json.dumps({"version": "1.1", "data": data}))
    return path


def _parts_of(parts, key) -> dict:
    where = collections.defaultdict(set)
    for index, part in enumerate(parts):
        for item in part:
            where[key(item)].add(index)
    return where


def test_a_squad_file_split_keeps_each_article_and_paragraph_in_one_part(tmp_path, capsys):
    items, _ = read_span_qa([str(_squad(tmp_path / "train.json", 60, 3, 4))])
    assert len(items) == 720 and {item.article for item in items} == {
        f"Article {a}" for a in range(60)
    }
    options = FineTuningOptions(str(tmp_path / "run"), str(tmp_path / "train.json"), "span_qa")
    train, dev, test = _split(options, items, [])
    # What the fine-tuning run prints: the split's sizes and the groups kept whole.
    out = capsys.readouterr().out
    assert f"split: {len(train)} train, {len(dev)} dev, {len(test)} test;" in out
    assert "60 group(s) of several items" in out
    assert len(train) + len(dev) + len(test) == 720 and dev and test
    for key in (lambda item: item.context, lambda item: item.article):
        assert all(len(parts) == 1 for parts in _parts_of([train, dev, test], key).values())
    # The split by question id (the old one) put most paragraphs in two parts or three.
    by_id = split_examples(items, [0.8, 0.1, 0.1])
    spread = _parts_of(by_id, lambda item: item.context).values()
    assert sum(len(parts) > 1 for parts in spread) > 90


def test_without_titles_the_articles_are_the_files_articles(tmp_path):
    items, _ = read_span_qa([str(_squad(tmp_path / "train.json", 30, 2, 3, titles=False))])
    assert {item.article for item in items} == {f"train.json#{a}" for a in range(30)}
    parts = split_examples(items, [0.8, 0.1, 0.1], group=item_group)
    assert all(len(p) == 1 for p in _parts_of(parts, lambda item: item.article).values())


def test_items_alone_in_their_group_split_as_by_id():
    # One question per context (PICO's abstracts), one review per text: nothing moves.
    unique = [ClassificationExample(str(i), f"text {i}") for i in range(500)]
    assert split_examples(unique, [0.8, 0.1, 0.1], group=item_group) == split_examples(
        unique, [0.8, 0.1, 0.1]
    )
    # Copies of one text go to one part; the other items stay where they were.
    copies = [ClassificationExample(f"c{i}", "same review", label=i % 2) for i in range(40)]
    grouped = split_examples(unique + copies, [0.8, 0.1, 0.1], group=item_group)
    assert sum(any(item.text == "same review" for item in part) for part in grouped) == 1
    by_id = split_examples(unique, [0.8, 0.1, 0.1])
    assert [[i for i in part if i in unique] for part in grouped] == by_id
    # A text with another pair is another item (the pair is half of the input).
    assert item_group(ClassificationExample("a", "t", "p")) != item_group(
        ClassificationExample("b", "t", "q")
    )
    # The order of the items does not matter; the seed does.
    again = split_examples(list(reversed(unique + copies)), [0.8, 0.1, 0.1], group=item_group)
    assert [sorted(i.id for i in p) for p in again] == [sorted(i.id for i in p) for p in grouped]
    other = split_examples(unique + copies, [0.8, 0.1, 0.1], seed=1, group=item_group)
    assert other != grouped


def test_multiple_choice_questions_about_one_context_stay_together():
    items = [
        MultipleChoiceExample(f"{c}-{q}", f"Article {c}.", f"Q{q}?", ["a", "b"], 0)
        for c in range(100)
        for q in range(4)
    ]
    items += [MultipleChoiceExample(f"n{i}", "", f"Alone {i}?", ["a", "b"], 1) for i in range(50)]
    parts = split_examples(items, [0.8, 0.1, 0.1], group=item_group)
    where = _parts_of(parts, lambda item: item.context)
    assert all(len(where[f"Article {c}."]) == 1 for c in range(100))
    # Without a context an item is a group of its own (not one group of all "" contexts).
    alone = [item for item in items if not item.context]
    assert len({item_group(item) for item in alone}) == 50
    assert sum(any(not item.context for item in part) for part in parts) > 1


def test_dev_and_test_files_that_share_texts_are_counted(tmp_path, capsys):
    train = [ClassificationExample(str(i), f"text {i % 30}") for i in range(90)]
    dev = [ClassificationExample(f"d{i}", f"text {i}") for i in range(25, 35)]  # 5 seen
    test = [ClassificationExample(f"t{i}", f"new {i}") for i in range(10)]
    assert shared_groups(dev, train) == {"text": 5}
    _warn_shared(train, {"dev": dev, "test": test})
    out = capsys.readouterr().out
    assert "warning: 5 of 10 dev items share their text with training items" in out
    assert "test items" not in out
    questions, _ = read_span_qa([str(_squad(tmp_path / "train.json", 4, 2, 2))])
    again, _ = read_span_qa([str(_squad(tmp_path / "dev.json", 2, 2, 1))])
    _warn_shared(questions, {"dev": again, "test": None})
    assert "warning: 4 of 4 dev items share their article" in capsys.readouterr().out


@pytest.mark.parametrize("fractions", [[0.5, 0.5], [0.8, 0.1, 0.1]])
def test_fractions_must_sum_to_one_with_groups_too(fractions):
    items = [ClassificationExample(str(i), "t" if i % 2 else f"u{i}") for i in range(20)]
    assert sum(map(len, split_examples(items, fractions, group=item_group))) == 20
    with pytest.raises(ValueError, match="sum to 1"):
        split_examples(items, [0.5, 0.1], group=item_group)
