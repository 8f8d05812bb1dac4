"""Entity chunking (`bio_chunks`) and entity-level scores (`entity_scores`) against
seqeval, on random BIO, IOB1 and BIOES sequences with ill-formed ones among them,
and hand-derived cases an off-by-one (an inclusive end taken as exclusive) fails."""

from __future__ import annotations

import random
import warnings

import pytest

from albert_tf.tasks.tagging.data import Entity
from albert_tf.tasks.tagging.decoding import chunks as bio_chunks
from albert_tf.training.finetuning.metrics import entity_scores

seqeval = pytest.importorskip("seqeval")
from seqeval.metrics import (  # noqa: E402
    classification_report,
    f1_score,
    precision_score,
    recall_score,
)
from seqeval.metrics.sequence_labeling import get_entities  # noqa: E402

TYPES = ("A", "B", "C")
#: Our per-label keys → classification_report's.
REPORT_KEYS = {"precision": "precision", "recall": "recall", "f1": "f1-score"}


def random_tags(rng: random.Random, scheme: str, length: int) -> list[str]:
    """Tags of ``scheme`` ("BIO", "IOB1", "BIOES"), drawn independently, so I- after
    O, a type switch inside an entity and E- without B- all occur."""
    prefixes = {"BIO": "OOBII", "IOB1": "OOIIIB", "BIOES": "OOBIIES"}[scheme]
    tags = []
    for _ in range(length):
        prefix = rng.choice(prefixes)
        tags.append("O" if prefix == "O" else f"{prefix}-{rng.choice(TYPES)}")
    return tags


def perturbed(rng: random.Random, tags: list[str], scheme: str) -> list[str]:
    """A prediction: ``tags`` with about one tag in five redrawn."""
    return [rng.choice(random_tags(rng, scheme, 1)) if rng.random() < 0.2 else t for t in tags]


def seqeval_spans(tags: list[str]) -> set[tuple[int, int, str]]:
    """seqeval's chunks (type, first, last inclusive) as (start, end exclusive, type)."""
    return {(first, last + 1, kind) for kind, first, last in get_entities(tags)}


def spans(tags: list[str]) -> set[tuple[int, int, str]]:
    return {(first, last + 1, kind) for kind, first, last in bio_chunks(tags)}


def corpus(seed: int, scheme: str, sentences: int = 300):
    rng = random.Random(seed)
    gold = [random_tags(rng, scheme, rng.randrange(0, 16)) for _ in range(sentences)]
    return gold, [perturbed(rng, tags, scheme) for tags in gold]


def seqeval_scores(gold, predicted) -> tuple[float, float, float, dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # UndefinedMetricWarning on zero divisions
        return (
            precision_score(gold, predicted),
            recall_score(gold, predicted),
            f1_score(gold, predicted),
            classification_report(gold, predicted, output_dict=True),
        )


@pytest.mark.parametrize("scheme", ["BIO", "IOB1", "BIOES"])
def test_bio_chunks_agree_with_seqeval_get_entities(scheme):
    gold, predicted = corpus(0, scheme, sentences=500)
    ill_formed = 0
    for tags in gold + predicted:
        assert bio_chunks(tags) == get_entities(tags), tags
        ill_formed += any(
            t.startswith("I-") and (i == 0 or tags[i - 1] == "O") for i, t in enumerate(tags)
        )
    assert ill_formed > 100  # the random sequences do exercise the repair rules


def test_bio_chunks_by_hand():
    # Last index inclusive: an exclusive end would give ("A", 0, 2).
    assert bio_chunks(["B-A", "I-A", "O", "B-B"]) == [("A", 0, 1), ("B", 3, 3)]
    assert bio_chunks(["O", "I-A"]) == [("A", 1, 1)]  # IOB1 start, closed at the end
    assert bio_chunks(["I-A", "I-B", "B-B", "I-B"]) == [("A", 0, 0), ("B", 1, 1), ("B", 2, 3)]
    assert bio_chunks(["B-A", "E-A", "I-A", "S-A", "E-A"]) == [
        ("A", 0, 1), ("A", 2, 2), ("A", 3, 3), ("A", 4, 4)]  # fmt: skip
    assert bio_chunks([]) == [] and bio_chunks(["O", "O"]) == []


@pytest.mark.parametrize(("scheme", "seed"), [("BIO", 1), ("IOB1", 2), ("BIOES", 3)])
def test_entity_scores_agree_with_seqeval(scheme, seed):
    gold, predicted = corpus(seed, scheme)
    # Gold chunked by seqeval, predictions by bio_chunks: an end off by one on either
    # side would match nothing.
    scores = entity_scores([seqeval_spans(t) for t in gold], [spans(t) for t in predicted])
    precision, recall, f1, report = seqeval_scores(gold, predicted)
    assert 0.2 < f1 < 0.9  # neither trivial nor perfect
    assert scores["precision"] == pytest.approx(precision, abs=1e-12)
    assert scores["recall"] == pytest.approx(recall, abs=1e-12)
    assert scores["f1"] == pytest.approx(f1, abs=1e-12)
    assert scores["gold"] == report["micro avg"]["support"]
    per_label = {k: v for k, v in report.items() if not k.endswith(" avg")}
    assert sorted(scores["per_label"]) == sorted(per_label) == list(TYPES)
    for label, mine in scores["per_label"].items():
        theirs = per_label[label]
        assert mine["support"] == theirs["support"]
        for key, their_key in REPORT_KEYS.items():
            assert mine[key] == pytest.approx(theirs[their_key], abs=1e-12), (label, key)
    assert scores["gold"] == sum(len(spans(tags)) for tags in gold)
    assert scores["predicted"] == sum(len(spans(tags)) for tags in predicted)
    assert scores["correct"] == round(scores["precision"] * scores["predicted"])


def test_an_off_by_one_span_is_wrong():
    gold = [[(0, 2, "A"), (5, 6, "B")]]
    assert entity_scores(gold, [[(0, 2, "A"), (5, 6, "B")]])["f1"] == 1.0
    for wrong in [(0, 3, "A")], [(1, 2, "A")], [(0, 1, "A")], [(5, 7, "B")], [(0, 2, "B")]:
        scores = entity_scores(gold, [wrong])
        assert (scores["correct"], scores["precision"], scores["recall"]) == (0, 0.0, 0.0)

    # The seqeval comparison has teeth: inclusive ends on one side disagree with it.
    gold_tags, predicted_tags = corpus(4, "BIO")
    _, _, f1, _ = seqeval_scores(gold_tags, predicted_tags)
    inclusive = [{(first, last, kind) for kind, first, last in bio_chunks(t)} for t in gold_tags]
    scores = entity_scores(inclusive, [seqeval_spans(t) for t in predicted_tags])
    assert scores["f1"] < f1 / 2
    right = entity_scores([seqeval_spans(t) for t in gold_tags], [spans(t) for t in predicted_tags])
    assert right["f1"] == pytest.approx(f1)


@pytest.mark.parametrize(
    ("gold", "predicted"),
    [
        ([["O", "O"]], [["O", "O"]]),  # nothing on either side
        ([["B-A", "O"]], [["O", "O"]]),  # nothing predicted
        ([["O", "O"]], [["B-A", "O"]]),  # no gold entity
        ([["B-A", "O"]], [["O", "B-A"]]),  # both, none correct
    ],
)
def test_zero_divisions_are_seqeval_defaults(gold, predicted):
    scores = entity_scores([spans(t) for t in gold], [spans(t) for t in predicted])
    precision, recall, f1, report = seqeval_scores(gold, predicted)
    assert (scores["precision"], scores["recall"], scores["f1"]) == (precision, recall, f1)
    assert (precision, recall, f1) == (0.0, 0.0, 0.0)
    for label, mine in scores["per_label"].items():
        assert {key: mine[key] for key in REPORT_KEYS} == {
            key: report[label][their_key] for key, their_key in REPORT_KEYS.items()
        }


def test_no_sentence_scores_zero():
    # seqeval refuses an empty corpus (a TypeError); here it is the all-empty case.
    scores = entity_scores([], [])
    assert scores == {
        **{"precision": 0.0, "recall": 0.0, "f1": 0.0},
        **{"gold": 0, "predicted": 0, "correct": 0, "per_label": {}},
    }


def test_entity_objects_repeats_and_errors():
    gold = [[Entity(0, 2, "PER"), Entity(0, 2, "PER")], [Entity(3, 5, "LOC")]]
    predicted = [[(0, 2, "PER")], [Entity(3, 5, "ORG")]]
    scores = entity_scores(gold, predicted)
    assert (scores["gold"], scores["predicted"], scores["correct"]) == (2, 2, 1)
    assert scores["per_label"] == {
        "LOC": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1},
        "ORG": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0},
        "PER": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1},
    }
    # The same span in another sentence is another entity.
    assert entity_scores([[(0, 2, "A")], []], [[], [(0, 2, "A")]])["correct"] == 0
    with pytest.raises(ValueError, match="2 gold and 1 predicted sentences"):
        entity_scores([[], []], [[]])
