"""Train / dev / test splits by a hash of each item's id, or of its group, for every
task's items.

An item may name a ``group`` (a string): the questions about one context or article,
the copies of one text. `split_examples` with ``group=item_group`` keeps a group in
one part, so a dev or test score is not inflated by what training saw; `shared_groups`
counts the items of a separately given dev or test set whose group training holds.
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


def item_group(item: Any) -> str:
    """``item.group`` when the item defines one (span QA: its article or context,
    multiple choice: its context, classification: its text), else ``"id:<id>"``: each
    item its own group.

    >>> from types import SimpleNamespace
    >>> item_group(SimpleNamespace(id="7")), item_group(SimpleNamespace(id="7", group="text:a"))
    ('id:7', 'text:a')
    """
    return getattr(item, "group", None) or f"id:{item.id}"


def _part(key: str, seed: int, edges: np.ndarray) -> int:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    return min(int(np.searchsorted(edges, u, side="right")), len(edges) - 1)


def split_examples(
    items: Sequence[T],
    fractions: Sequence[float],
    seed: int = 0,
    group: Callable[[T], str] | None = None,
) -> list[list[T]]:
    """Deterministic split of any items with an ``id`` by a hash of the id (stable as
    files grow: an item stays in its part whatever else is added).

    With ``group`` (e.g. `item_group`), the items of one group go to one part: the
    part of the group's smallest id (as a string). An item alone in its group thus
    goes where it went without ``group``, so data without repeats splits exactly as
    before, and of a repeated text only the copies away from the first one's part
    move. Parts keep the items' order.

    >>> from types import SimpleNamespace
    >>> items = [SimpleNamespace(id=str(i)) for i in range(1000)]
    >>> [len(s) for s in split_examples(items, [0.8, 0.1, 0.1])]
    [801, 114, 85]
    >>> asked = [SimpleNamespace(id=str(i), group=f"context:{i // 4}") for i in range(1000)]
    >>> parts = split_examples(asked, [0.8, 0.1, 0.1], group=item_group)
    >>> [len({item.group for item in part}) for part in parts], sum(map(len, parts))
    ([201, 27, 22], 1000)
    """
    edges = np.cumsum(fractions)
    if not np.isclose(edges[-1], 1.0):
        raise ValueError(f"split fractions must sum to 1, got {list(fractions)}")
    keys = [f"{item.id}" for item in items]
    if group is not None:
        groups = [group(item) for item in items]
        first: dict[str, str] = {}
        for key, name in zip(keys, groups, strict=True):
            first[name] = min(first.get(name, key), key)
        keys = [first[name] for name in groups]
    out: list[list[T]] = [[] for _ in fractions]
    parts: dict[str, int] = {}
    for item, key in zip(items, keys, strict=True):
        if key not in parts:
            parts[key] = _part(key, seed, edges)
        out[parts[key]].append(item)
    return out


def shared_groups(
    items: Sequence[Any], train: Sequence[Any], group: Callable[[Any], str] = item_group
) -> collections.Counter:
    """How many of ``items`` share their group with an item of ``train``, by the kind of
    group (the key's prefix: ``"context"``, ``"article"``, ``"text"``, ``"id"``).

    >>> from types import SimpleNamespace
    >>> train = [SimpleNamespace(id="a", group="text:x")]
    >>> dict(shared_groups([SimpleNamespace(id="b", group="text:x")] * 2, train))
    {'text': 2}
    """
    seen = {group(item) for item in train}
    return collections.Counter(
        group(item).split(":", 1)[0] for item in items if group(item) in seen
    )
