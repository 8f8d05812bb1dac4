"""Which items go into which batch: one pass, optionally shuffled with little padding.

Every task's batches are padded to their own longest item. Shuffled, the items
are shuffled, sorted by length inside windows of ``bucket_batches`` batches (a
batch then holds items of similar length), and the batches are shuffled again,
all from one seed: the order is random, the padding small.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np


def bucketed_batches(
    lengths: Sequence[int],
    batch_size: int,
    *,
    shuffle: bool,
    seed: int,
    bucket_batches: int,
) -> list[list[int]]:
    """Indexes of the items (``lengths[i]``: item i's size) in each batch, in order.

    >>> bucketed_batches([3, 9, 4, 8], 2, shuffle=False, seed=0, bucket_batches=50)
    [[0, 1], [2, 3]]
    >>> [sorted(b) for b in bucketed_batches([3, 9, 4, 8], 2, shuffle=True, seed=0,
    ...                                      bucket_batches=50)]
    [[0, 2], [1, 3]]
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    order = list(range(len(lengths)))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(order)
        window = batch_size * bucket_batches
        order = [
            i
            for w in range(0, len(order), window)
            for i in sorted(order[w : w + window], key=lambda i: lengths[i])
        ]
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if shuffle:
        rng.shuffle(batches)
    return batches


def padded(rows: Sequence[dict], key: str, fill: int = 0) -> np.ndarray:
    """int32 [len(rows), longest]: each row's 1-D ``row[key]``, padded with ``fill``.

    >>> padded([{"ids": [5, 6, 7]}, {"ids": [8]}], "ids", fill=-1).tolist()
    [[5, 6, 7], [8, -1, -1]]
    """
    length = max((len(row[key]) for row in rows), default=0)
    out = np.full((len(rows), length), fill, np.int32)
    for r, row in enumerate(rows):
        out[r, : len(row[key])] = row[key]
    return out
