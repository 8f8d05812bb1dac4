"""Helpers shared by the tests (importable thanks to pytest's pythonpath)."""

from __future__ import annotations

import numpy as np


def tiny_config(**overrides):
    """A model small enough for any test, with E != H and real sharing."""
    from albert_tf.config import AlbertConfig

    fields = dict(
        vocab_size=120,
        embedding_size=16,
        hidden_size=48,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=96,
        max_position_embeddings=64,
    )
    fields.update(overrides)
    return AlbertConfig(**fields)


def random_batch(vocab_size: int, batch: int = 3, seq: int = 20, seed: int = 0):
    """Ids with two segments and per-row padding (row 0 unpadded)."""
    rng = np.random.RandomState(seed)
    ids = rng.randint(5, vocab_size, size=(batch, seq)).astype("int32")
    segments = np.zeros_like(ids)
    segments[:, seq // 2 :] = 1
    mask = np.ones_like(ids)
    for row in range(1, batch):
        mask[row, seq - min(4 * row, seq // 2) :] = 0  # never a fully padded row
    ids[mask == 0] = 0
    segments[mask == 0] = 0
    return {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}
