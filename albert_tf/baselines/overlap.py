"""What a multiple-choice model must beat on next-sentence items: shared words.

The baseline picks the option that shares the most with the context: Chinese,
Japanese and Korean characters count one by one, other text by lower-cased word.
``count`` scores the number of distinct shared units; ``idf`` weights each by its
inverse document frequency over the scored items' texts, so a shared rare name
counts more than a shared particle. Ties go to the first option, and a question
whose options share nothing is a guess at chance.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from albert_tf.tasks.multiple_choice.data import MultipleChoiceExample
from albert_tf.training.evaluation import binomial_stderr

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_UNITS = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")


def text_units(text: str) -> set[str]:
    """The distinct characters (CJK) and words (other scripts) of a text.

    >>> sorted(text_units("他们负责AI算法, and the AI team."))
    ['ai', 'and', 'team', 'the', '他', '们', '法', '算', '负', '责']
    """
    return {unit.lower() for unit in _UNITS.findall(text)}


def overlap_accuracy(
    items: Sequence[MultipleChoiceExample], weighting: str = "idf"
) -> dict[str, float]:
    """Accuracy (with its binomial standard error) of the shared-units baseline.

    >>> from albert_tf.tasks.multiple_choice.data import MultipleChoiceExample as Item
    >>> items = [Item("1", "The cat sat.", "", ["A dog ran.", "The cat slept."], 1)]
    >>> overlap_accuracy(items, "count")["accuracy"]
    1.0
    """
    if weighting not in ("idf", "count"):
        raise ValueError(f"weighting must be 'idf' or 'count', got {weighting!r}")
    if not items:
        raise ValueError("overlap_accuracy needs at least one item")
    contexts = [text_units(f"{i.context} {i.question}") for i in items]
    options = [[text_units(o) for o in i.options] for i in items]
    document_frequency: Counter[str] = Counter()
    texts = 0
    for context, opts in zip(contexts, options, strict=True):
        for units in (context, *opts):
            document_frequency.update(units)
            texts += 1

    def weight(unit: str) -> float:
        if weighting == "count":
            return 1.0
        return math.log(texts / document_frequency[unit])

    correct = 0
    for item, context, opts in zip(items, contexts, options, strict=True):
        scores = [sum(weight(u) for u in units & context) for units in opts]
        correct += scores.index(max(scores)) == item.label
    accuracy = correct / len(items)
    return {
        "accuracy": accuracy,
        "accuracy_stderr": binomial_stderr(accuracy, len(items)),
        "count": len(items),
    }
