"""Train / dev / test splits by a hash of each item's id, for every task's items."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def split_examples(items: Sequence[T], fractions: Sequence[float], seed: int = 0) -> list[list[T]]:
    """Deterministic split of any items with an ``id`` by a hash of the id (stable as
    files grow: an item stays in its part whatever else is added).

    >>> from types import SimpleNamespace
    >>> items = [SimpleNamespace(id=str(i)) for i in range(1000)]
    >>> [len(s) for s in split_examples(items, [0.8, 0.1, 0.1])]
    [801, 114, 85]
    """
    edges = np.cumsum(fractions)
    if not np.isclose(edges[-1], 1.0):
        raise ValueError(f"split fractions must sum to 1, got {list(fractions)}")
    out: list[list[T]] = [[] for _ in fractions]
    for item in items:
        digest = hashlib.sha256(f"{seed}:{item.id}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        out[min(int(np.searchsorted(edges, u, side="right")), len(out) - 1)].append(item)
    return out
