"""Which items go into which batch: one pass, optionally shuffled with little padding.

Every task's batches are padded to their own longest item. Shuffled, the items
are shuffled, sorted by length inside windows of ``bucket_batches`` batches (a
batch then holds items of similar length), and the batches are shuffled again,
all from one seed: the order is random, the padding small.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

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


#: The packed ids every task's model reads, padded alike (`padded_batches`).
PACKED_KEYS = ("token_ids", "segment_ids", "padding_mask")


def padded_batches(
    rows: Sequence[dict], batch_size: int, *, shuffle: bool, seed: int, bucket_batches: int
) -> Iterator[tuple[dict[str, np.ndarray], list[dict]]]:
    """One pass over ``rows`` (each with 1-D `PACKED_KEYS`) as `bucketed_batches` orders
    them: each batch's packed ids padded to its longest row, and its rows (whose labels
    the task stacks its own way).

    >>> rows = [{k: [1] * n for k in PACKED_KEYS} for n in (3, 1)]
    >>> [(f["token_ids"].shape, len(r)) for f, r in padded_batches(
    ...     rows, 2, shuffle=False, seed=0, bucket_batches=1)]
    [((2, 3), 2)]
    """
    lengths = [len(row["token_ids"]) for row in rows]
    for batch in bucketed_batches(
        lengths, batch_size, shuffle=shuffle, seed=seed, bucket_batches=bucket_batches
    ):
        chosen = [rows[i] for i in batch]
        yield {key: padded(chosen, key) for key in PACKED_KEYS}, chosen
