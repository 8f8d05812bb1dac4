"""A tokenized document as one id list plus where each sentence ends.

Pair building takes runs of consecutive sentences (a chunk, its A and B
segments, NSP's random segment). With the sentences packed end to end, each
run is a single slice of one list; as a list of per-sentence lists it had to
be sliced out sentence by sentence and flattened again.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import overload


class PackedDocument(Sequence[list[int]]):
    """A document's piece ids, sentences end to end, and each sentence's end.

    It is also a sequence of its sentences (each a list of ids), so code that
    takes a document as a list of sentences can take this one.

    Args:
      ids: every sentence's ids, in order.
      ends: ``ends[k]`` is where sentence ``k`` ends in ``ids`` (exclusive);
        non-decreasing, the last one ``len(ids)``.

    >>> doc = PackedDocument.from_sentences([[10, 11], [12], [13, 14]])
    >>> doc.ids, doc.ends, len(doc), doc[1], doc[-1], doc.span(0, 2)
    ([10, 11, 12, 13, 14], [2, 3, 5], 3, [12], [13, 14], [10, 11, 12])
    """

    __slots__ = ("ends", "ids")

    def __init__(self, ids: list[int], ends: list[int]) -> None:
        self.ids = ids
        self.ends = ends

    @classmethod
    def from_sentences(cls, sentences: Iterable[Sequence[int]]) -> PackedDocument:
        sentences = list(sentences)
        return cls(
            list(itertools.chain.from_iterable(sentences)),
            list(itertools.accumulate(map(len, sentences))),
        )

    def start(self, k: int) -> int:
        """Where sentence ``k`` starts in `ids`."""
        return self.ends[k - 1] if k else 0

    def span(self, first: int, stop: int) -> list[int]:
        """The ids of sentences ``first`` to ``stop - 1``, as one new list."""
        return self.ids[self.start(first) : self.ends[stop - 1]] if stop > first else []

    def __len__(self) -> int:
        return len(self.ends)

    @overload
    def __getitem__(self, index: int) -> list[int]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[int]]: ...

    def __getitem__(self, index: int | slice) -> list[int] | list[list[int]]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self.ends)
        if not 0 <= index < len(self.ends):
            raise IndexError(f"sentence {index} of a {len(self.ends)}-sentence document")
        return self.span(index, index + 1)

    def __repr__(self) -> str:
        return f"PackedDocument({len(self)} sentences, {len(self.ids)} ids)"
