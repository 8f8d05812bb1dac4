"""What a multiple-choice model must beat on next-sentence items: shared words.

The baseline picks the option that shares the most with the context (context and
question): Chinese, Japanese and Korean characters count one by one, other text by
lower-cased word. Four weightings (`WEIGHTINGS`):

- ``count``: the number of distinct shared units;
- ``idf``: distinct shared units, each weighted by its inverse document frequency
  ln(N / df) over the scored items' own texts (each context and each option a text),
  so that a shared rare name counts more than a shared particle;
- ``normalized``: Σ_u min(count of u in the option, count of u in the context),
  divided by (√(the option's units) + 1), so that a long option does not win by
  sharing more units by chance;
- ``idf_normalized``: the same sum with each unit weighted by its smoothed inverse
  document frequency over the training documents (`DocumentFrequencies.idf`).

Ties go to the first option, and a question whose options share nothing is
answered with its first option (a guess at chance when answers are shuffled).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from albert_tf.tasks.multiple_choice.data import MultipleChoiceExample
from albert_tf.training.evaluation import binomial_stderr

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_UNITS = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")

#: The baselines, simplest first (`strongest_baseline` keeps the first of equals).
WEIGHTINGS = ("count", "idf", "normalized", "idf_normalized")
# What each rule does to the shared units, for cards and pages.
_NAMES = {
    "count": "shared {units}, counted",
    "idf": "shared {units}, weighted by rarity",
    "normalized": "shared {units}, length-normalised",
    "idf_normalized": "shared {units}, length-normalised, weighted by rarity",
}


def text_units(text: str) -> set[str]:
    """The distinct characters (CJK) and words (other scripts) of a text.

    >>> sorted(text_units("他们负责AI算法, and the AI team."))
    ['ai', 'and', 'team', 'the', '他', '们', '法', '算', '负', '责']
    """
    return {unit.lower() for unit in _UNITS.findall(text)}


def unit_counts(text: str) -> Counter[str]:
    """The units of `text_units`, each with how often the text holds it.

    >>> sorted(unit_counts("AI算法, the ai 算").items())
    [('ai', 2), ('the', 1), ('法', 1), ('算', 2)]
    """
    return Counter(unit.lower() for unit in _UNITS.findall(text))


def baseline_name(weighting: str, units: str = "units") -> str:
    """How a weighting reads on a card, with ``units`` ("characters", "words").

    >>> baseline_name("idf_normalized", "characters")
    'shared characters, length-normalised, weighted by rarity'
    """
    _check(weighting)
    return _NAMES[weighting].format(units=units)


@dataclasses.dataclass(frozen=True)
class DocumentFrequencies:
    """How many documents there are, and how many hold each unit."""

    documents: int
    counts: Mapping[str, int]

    def idf(self, unit: str) -> float:
        """ln((N + 1) / (df + 1)) + 1: about 1 for a unit in every document,
        ln(N + 1) + 1 for one never seen.

        >>> frequencies = document_frequencies(["猫的", "的", "狗的"])
        >>> round(frequencies.idf("的"), 4), round(frequencies.idf("猫"), 4)
        (1.0, 1.6931)
        """
        return math.log((self.documents + 1) / (self.counts.get(unit, 0) + 1)) + 1.0


def document_frequencies(documents: Iterable[str]) -> DocumentFrequencies:
    """The document frequencies of the units of ``documents`` (each one text).

    >>> frequencies = document_frequencies(["The cat.", "the dog", "猫"])
    >>> frequencies.documents, frequencies.counts["the"], frequencies.counts["猫"]
    (3, 2, 1)
    """
    counts: Counter[str] = Counter()
    n = 0
    for text in documents:
        counts.update(text_units(text))
        n += 1
    return DocumentFrequencies(n, dict(counts))


def _check(weighting: str) -> None:
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}; got {weighting!r}")


def _context(item: MultipleChoiceExample) -> str:
    return f"{item.context} {item.question}"


def _item_frequencies(items: Sequence[MultipleChoiceExample]) -> DocumentFrequencies:
    """``idf``'s frequencies: each context (with its question) and option a text."""
    return document_frequencies(t for i in items for t in (_context(i), *i.options))


def option_scores(
    item: MultipleChoiceExample,
    weighting: str,
    frequencies: DocumentFrequencies | None = None,
) -> list[float]:
    """Each option's score under ``weighting``; the baseline picks the first highest.

    ``frequencies`` is what the IDF weightings count on: for ``idf``, the scored
    items' own texts (`overlap_accuracy` counts them); for ``idf_normalized``, the
    training documents (`document_frequencies`). The other two do not read it.

    >>> item = MultipleChoiceExample("1", "猫的猫", "", ["猫猫猫", "狗的"], 0)
    >>> option_scores(item, "count"), [round(s, 4) for s in option_scores(item, "normalized")]
    ([1.0, 1.0], [0.7321, 0.4142])
    """
    _check(weighting)
    if weighting in ("idf", "idf_normalized") and frequencies is None:
        raise ValueError(f"weighting {weighting!r} needs frequencies")
    if weighting in ("count", "idf"):
        context = text_units(_context(item))
        if weighting == "count":
            return [float(len(text_units(o) & context)) for o in item.options]
        n = frequencies.documents
        # Every unit of a scored text is counted; max() guards a caller's other counts.
        weight = {u: math.log(n / max(frequencies.counts.get(u, 0), 1)) for u in context}
        return [sum(weight[u] for u in text_units(o) & context) for o in item.options]
    context_counts = unit_counts(_context(item))
    weight = frequencies.idf if weighting == "idf_normalized" else lambda unit: 1.0
    scores = []
    for option in item.options:
        counts = unit_counts(option)
        shared = sum(min(n, context_counts[u]) * weight(u) for u, n in counts.items())
        scores.append(shared / (math.sqrt(counts.total()) + 1.0))
    return scores


def overlap_accuracy(
    items: Sequence[MultipleChoiceExample],
    weighting: str = "idf",
    frequencies: DocumentFrequencies | None = None,
) -> dict[str, float]:
    """Accuracy (with its binomial standard error) of the shared-units baseline.

    ``frequencies``: the training documents' (`document_frequencies`), which
    ``idf_normalized`` weights by; the other weightings do not read it (``idf``
    counts on the scored items' own texts).

    >>> from albert_tf.tasks.multiple_choice.data import MultipleChoiceExample as Item
    >>> items = [Item("1", "The cat sat.", "", ["A dog ran.", "The cat slept."], 1)]
    >>> overlap_accuracy(items, "count")["accuracy"]
    1.0
    """
    _check(weighting)
    if not items:
        raise ValueError("overlap_accuracy needs at least one item")
    if weighting == "idf_normalized" and frequencies is None:
        raise ValueError(
            "weighting 'idf_normalized' weights units by the training documents: pass "
            "frequencies=document_frequencies(<the training texts>)"
        )
    if weighting == "idf":
        frequencies = _item_frequencies(items)
    correct = 0
    for item in items:
        scores = option_scores(item, weighting, frequencies)
        correct += scores.index(max(scores)) == item.label
    accuracy = correct / len(items)
    return {
        "accuracy": accuracy,
        "accuracy_stderr": binomial_stderr(accuracy, len(items)),
        "count": len(items),
    }


def strongest_baseline(scores: Mapping[str, float]) -> tuple[str, float]:
    """The weighting with the highest accuracy in ``scores`` (weighting → accuracy),
    and that accuracy; of equals, the first in `WEIGHTINGS` (the simplest).

    >>> strongest_baseline({"idf": 0.7, "count": 0.7, "normalized": 0.65})
    ('count', 0.7)
    """
    known = [w for w in WEIGHTINGS if w in scores]
    if not known:
        raise ValueError(f"scores names none of {', '.join(WEIGHTINGS)}: {sorted(scores)}")
    best = max(known, key=lambda w: (scores[w], -WEIGHTINGS.index(w)))
    return best, scores[best]
