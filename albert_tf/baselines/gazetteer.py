"""What a tagger must beat: a list of the training set's entities, matched in new text.

Every entity string of the training examples is remembered with its most
frequent label (a tie goes to the label first in sorted order). A text is
scanned left to right, and at each character the longest known string starting
there is taken, if any; the scan then resumes after it (greedy, no overlaps).
Chinese, Japanese and Korean text is matched anywhere; a match that begins (or
ends) with a letter or digit of a script written with spaces must begin (end)
at a word boundary, so "Bank" is not found in "Banking" nor "AI" in "MAIL".
Matching is case-sensitive.

>>> from albert_tf.tasks.tagging.data import Entity, TaggingExample as Example
>>> train = [
...     Example("1", "Bank of China, 中国银行", (Entity(0, 13, "ORG"), Entity(15, 19, "ORG"))),
...     Example("2", "Bank rates", (Entity(0, 4, "ORG"),)),
...     Example("3", "中国人", (Entity(0, 2, "LOC"),)),
... ]
>>> gazetteer = Gazetteer.from_examples(train)
>>> [(e.start, e.end, e.label) for e in gazetteer.find("Banking at Bank of China 在中国银行")]
[(11, 24, 'ORG'), (26, 30, 'ORG')]
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable, Mapping

from albert_tf.tasks.tagging.data import Entity, TaggingExample

# Letters and digits of scripts that put spaces between words: not CJK ideographs,
# kana or hangul, which may touch a name directly ("用AI算法", "AI는").
_SPACED_WORD_CHARACTER = re.compile(
    "[^\\W_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0002fa1f]"
)


def _word_character(text: str, index: int) -> bool:
    return 0 <= index < len(text) and bool(_SPACED_WORD_CHARACTER.match(text[index]))


class Gazetteer:
    """Entity strings and their labels; `find` marks them in a text.

    Args:
        labels: entity string → label. Empty strings are ignored.
    """

    def __init__(self, labels: Mapping[str, str]) -> None:
        self.labels = {text: label for text, label in labels.items() if text}
        # First character → the lengths of the strings starting with it, longest first.
        lengths: dict[str, set[int]] = collections.defaultdict(set)
        for text in self.labels:
            lengths[text[0]].add(len(text))
        self._lengths = {first: sorted(n, reverse=True) for first, n in lengths.items()}

    @classmethod
    def from_examples(cls, examples: Iterable[TaggingExample]) -> Gazetteer:
        """Every entity string of ``examples`` with its most frequent label."""
        counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for example in examples:
            for entity in example.entities:
                counts[example.text[entity.start : entity.end]][entity.label] += 1
        return cls(
            {
                text: min(labels, key=lambda label: (-labels[label], label))
                for text, labels in counts.items()
            }
        )

    def __len__(self) -> int:
        return len(self.labels)

    def _bounded(self, text: str, start: int, end: int) -> bool:
        """Whether ``text[start:end]`` does not cut a word on a side where it has one."""
        left = _word_character(text, start) and _word_character(text, start - 1)
        right = _word_character(text, end - 1) and _word_character(text, end)
        return not (left or right)

    def find(self, text: str) -> list[Entity]:
        """The known strings in ``text``: greedy longest match, left to right."""
        found: list[Entity] = []
        start = 0
        while start < len(text):
            for length in self._lengths.get(text[start], ()):
                end = start + length
                label = self.labels.get(text[start:end])
                if label is not None and self._bounded(text, start, end):
                    found.append(Entity(start, end, label))
                    start = end
                    break
            else:
                start += 1
        return found
