"""The overlap baselines on items small enough to score by hand."""

import math

import pytest

from albert_tf.baselines.overlap import (
    WEIGHTINGS,
    DocumentFrequencies,
    baseline_name,
    document_frequencies,
    option_scores,
    overlap_accuracy,
    strongest_baseline,
    unit_counts,
)
from albert_tf.tasks.multiple_choice.data import MultipleChoiceExample as Item

# Context "The cat sat on the mat." + question "Where?": the ×2, cat, sat, on, mat, where.
# A "the cat": 2 units, both shared.
# B "the dog ...": 12 units (the dog sat by an old fence on a hill near farms), 3 shared.
ENGLISH = Item(
    "en",
    "The cat sat on the mat.",
    "Where?",
    ["the cat", "The dog sat by an old fence on a hill near farms."],
    0,
)
# Training documents: "the" in all 3, "cat" in 1, "sat" and "on" in none.
TRAINING = ["the cat", "the dog", "the end"]


def test_english_scores_by_hand():
    # count: distinct shared units, A 2 (the, cat), B 3 (the, sat, on): B wins.
    assert option_scores(ENGLISH, "count") == [2.0, 3.0]
    # normalized: A 2 / (√2 + 1) = 0.8284; B 3 / (√12 + 1) = 0.6720: A wins.
    assert option_scores(ENGLISH, "normalized") == pytest.approx([0.828427, 0.672028], abs=1e-6)
    # idf_normalized, N = 3: idf(the) = ln(4/4) + 1 = 1, idf(cat) = ln(4/2) + 1 = 1.6931,
    # idf(sat) = idf(on) = ln(4/1) + 1 = 2.3863 (never seen).
    # A (1 + 1.6931) / (√2 + 1) = 1.1155; B (1 + 2 × 2.3863) / (√12 + 1) = 1.2931: B wins.
    frequencies = document_frequencies(TRAINING)
    scores = option_scores(ENGLISH, "idf_normalized", frequencies)
    assert scores == pytest.approx([1.115538, 1.293113], abs=1e-6)
    accuracy = {w: overlap_accuracy([ENGLISH], w, frequencies)["accuracy"] for w in WEIGHTINGS}
    assert accuracy == {"count": 0.0, "idf": 0.0, "normalized": 1.0, "idf_normalized": 0.0}


def test_chinese_counts_characters_as_often_as_both_hold_them():
    # Context "我的猫猫": 我 1, 的 1, 猫 2. Option "猫猫猫的" (4 units): 猫 min(3, 2) = 2,
    # 的 1 → 3 / (√4 + 1) = 1. Option "猫狗" (2 units): 猫 1 → 1 / (√2 + 1) = 0.4142.
    item = Item("zh", "我的猫猫", "", ["猫猫猫的", "猫狗"], 0)
    assert option_scores(item, "count") == [2.0, 1.0]
    assert option_scores(item, "normalized") == pytest.approx([1.0, 0.414214], abs=1e-6)
    # N = 2 documents, 猫 in both (idf 1), 的 in one (ln(3/2) + 1 = 1.4055):
    # (2 × 1 + 1.4055) / 3 = 1.1352; 1 / (√2 + 1) = 0.4142.
    frequencies = document_frequencies(["猫的", "猫"])
    assert option_scores(item, "idf_normalized", frequencies) == pytest.approx(
        [1.135155, 0.414214], abs=1e-6
    )


def test_idf_weights_by_the_scored_items_own_texts():
    # Texts: "the cat " (context + empty question), "the dog", "a cat": N = 3;
    # the and cat are in 2 of them, so each shared unit weighs ln(3/2).
    item = Item("1", "the cat", "", ["the dog", "a cat"], 1)
    assert overlap_accuracy([item], "idf")["accuracy"] == 0.0  # a tie goes to the first
    frequencies = DocumentFrequencies(3, {"the": 2, "cat": 2, "dog": 1, "a": 1})
    assert option_scores(item, "idf", frequencies) == pytest.approx([math.log(1.5)] * 2)


def test_ties_and_options_without_units_go_to_the_first_option():
    frequencies = document_frequencies(["猫"])
    nothing = Item("1", "猫", "", ["狗", "鱼", "!!!"], 1)  # nothing shared: all 0
    same = Item("2", "猫", "", ["猫", "猫"], 1)  # equal scores
    empty = Item("3", "猫", "", ["", "猫"], 1)  # no units: 0 / (√0 + 1), no division by 0
    for weighting in WEIGHTINGS:
        assert option_scores(empty, weighting, frequencies)[0] == 0.0
        result = overlap_accuracy([nothing, same, empty], weighting, frequencies)
        assert result["accuracy"] == pytest.approx(1 / 3), weighting
        assert result["count"] == 3


def test_idf_is_the_smoothed_formula():
    documents = ["the cat sat", "the dog", "The end.", "猫", "the 猫 and the dog"]
    frequencies = document_frequencies(documents)
    # Units count once per document, whatever their case or repetition.
    assert frequencies.documents == 5
    assert frequencies.counts == {
        "the": 4, "cat": 1, "sat": 1, "dog": 2, "end": 1, "猫": 2, "and": 1
    }  # fmt: skip
    for unit, df in (("the", 4), ("cat", 1), ("dog", 2), ("猫", 2), ("unseen", 0)):
        assert frequencies.idf(unit) == pytest.approx(math.log((5 + 1) / (df + 1)) + 1)


def test_unit_counts_keep_repeats_of_the_same_units_as_text_units():
    assert unit_counts("The the THE 猫猫 cat_dog") == {"the": 3, "猫": 2, "cat": 1, "dog": 1}


def test_idf_normalized_without_frequencies_says_what_to_pass():
    with pytest.raises(ValueError, match=r"frequencies=document_frequencies"):
        overlap_accuracy([ENGLISH], "idf_normalized")
    with pytest.raises(ValueError, match="one of count, idf, normalized, idf_normalized"):
        overlap_accuracy([ENGLISH], "bm25")


def test_strongest_baseline_and_its_name():
    scores = {"count": 0.677, "idf": 0.7305, "normalized": 0.729, "idf_normalized": 0.7755}
    assert strongest_baseline(scores) == ("idf_normalized", 0.7755)
    assert strongest_baseline({"normalized": 0.5, "idf": 0.5}) == ("idf", 0.5)
    with pytest.raises(ValueError, match="names none of"):
        strongest_baseline({"chance": 0.25})
    assert baseline_name("normalized", "words") == "shared words, length-normalised"
    assert baseline_name("count") == "shared units, counted"
