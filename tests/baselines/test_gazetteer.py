"""The gazetteer baseline on cases worked out by hand: longest match wins, English
names need word boundaries and Chinese ones do not, the most frequent label."""

from albert_tf.baselines.gazetteer import Gazetteer
from albert_tf.tasks.tagging.data import Entity, TaggingExample


def example(text: str, *entities: tuple[str, str]) -> TaggingExample:
    """An example whose entities are the first occurrence of each (surface, label)."""
    spans = []
    for surface, label in entities:
        start = text.index(surface)
        spans.append(Entity(start, start + len(surface), label))
    return TaggingExample(str(len(text)), text, tuple(sorted(spans, key=lambda e: e.start)))


def found(gazetteer: Gazetteer, text: str) -> list[tuple[str, str]]:
    return [(text[e.start : e.end], e.label) for e in gazetteer.find(text)]


def test_most_frequent_label_and_ties():
    gazetteer = Gazetteer.from_examples(
        [
            example("Washington said", ("Washington", "PER")),
            example("in Washington", ("Washington", "LOC")),
            example("to Washington", ("Washington", "LOC")),
            example("Jordan Jordan", ("Jordan", "PER")),
            example("Jordan", ("Jordan", "LOC")),  # a tie: the first label in sorted order
            example("no entities here"),
        ]
    )
    assert gazetteer.labels == {"Washington": "LOC", "Jordan": "LOC"}
    assert len(gazetteer) == 2
    assert gazetteer.find("Washington, Jordan") == [Entity(0, 10, "LOC"), Entity(12, 18, "LOC")]


def test_longest_match_wins_then_resumes_after_it():
    gazetteer = Gazetteer(
        {"中国": "LOC", "中国银行": "ORG", "银行": "ORG", "New York": "LOC", "York": "PER"}
    )
    # 中国银行 (ORG) beats 中国 (LOC) and hides the 银行 inside it.
    assert found(gazetteer, "他在中国银行工作") == [("中国银行", "ORG")]
    assert found(gazetteer, "中国的银行") == [("中国", "LOC"), ("银行", "ORG")]
    assert found(gazetteer, "New York and York") == [("New York", "LOC"), ("York", "PER")]
    # Greedy from the left: 国银 is not known, and after 中国 the scan goes on at 人.
    assert found(Gazetteer({"中国": "LOC", "国人": "X"}), "中国人") == [("中国", "LOC")]


def test_english_needs_word_boundaries_chinese_does_not():
    gazetteer = Gazetteer(
        {"Bank": "ORG", "AI": "ORG", "3M": "ORG", "北京": "LOC", "IBM公司": "ORG"}
    )
    assert found(gazetteer, "Banking at the Bank.") == [("Bank", "ORG")]
    assert gazetteer.find("Banking at the Bank.") == [Entity(15, 19, "ORG")]
    assert found(gazetteer, "EMAIL AI") == [("AI", "ORG")]
    assert found(gazetteer, "3M 33M 3Ms (3M)") == [("3M", "ORG"), ("3M", "ORG")]
    # CJK neighbours are boundaries for Latin names, and CJK names match anywhere.
    assert found(gazetteer, "用AI算法在北京市") == [("AI", "ORG"), ("北京", "LOC")]
    # A name's CJK end needs no boundary; its Latin start does.
    assert found(gazetteer, "XIBM公司 IBM公司的") == [("IBM公司", "ORG")]
    # Letters beyond ASCII join words too (ÉAI and AIé hold no "AI"); "_" does not.
    assert gazetteer.find("ÉAI AIé AI_x") == [Entity(8, 10, "ORG")]


def test_empty():
    assert Gazetteer.from_examples([]).find("anything") == []
    assert Gazetteer({"": "X"}).find("abc") == []
