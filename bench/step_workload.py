"""What ``pretraining_step.py`` measures: variants, shapes, FLOPs, the batch.

Shared by the runner, our step (``step_ours.py``), the peers
(``step_peers.py``) and the report (``step_report.py``), so every variant
trains the same model shape on the same synthetic batch and MFU uses one
FLOP count.
"""

from __future__ import annotations

import dataclasses
from typing import Any

VARIANTS = (
    "matmul_peak",
    "ours",
    "ours_unfused",
    "keras_hub",
    "keras_hub_xla",
    "hf_eager",
    "hf_compile",
)
PRECISIONS = ("float32", "bfloat16")
# Our own step without the fused kernels: reported beside ours, not a peer.
OWN = ("ours", "ours_unfused")
PEERS = tuple(v for v in VARIANTS if v != "matmul_peak" and v not in OWN)


@dataclasses.dataclass(frozen=True)
class Shape:
    """An ALBERT model and batch shape (all layers shared, one group)."""

    vocab: int
    embed: int
    hidden: int
    layers: int
    heads: int
    ffn: int
    batch: int
    seq: int
    predictions: int
    max_position: int = 512
    type_vocab: int = 2


FULL = Shape(
    vocab=30000, embed=128, hidden=768, layers=12, heads=12, ffn=3072, batch=16, seq=128,
    predictions=20,
)  # fmt: skip
SMOKE = Shape(
    vocab=1000, embed=16, hidden=64, layers=2, heads=2, ffn=128, batch=2, seq=16, predictions=3
)


# --------------------------------------------------------------------------- FLOPs
def albert_forward_flops(
    *,
    vocab: int,
    embed: int,
    hidden: int,
    layers: int,
    ffn: int,
    batch: int,
    seq: int,
    predictions: int,
) -> dict[str, int]:
    """Forward matmul FLOPs (2·m·n·k each) of one MLM + SOP step, by part.

    Embedding lookups, softmax, LayerNorm and activations are not matmuls
    and are left out, as usual for MFU. The MLM head runs only at the
    ``batch × predictions`` masked positions.
    """
    tokens = batch * seq
    masked = batch * predictions
    per_layer = (
        2 * tokens * hidden * 3 * hidden  # Q, K, V projections
        + 2 * batch * seq * seq * hidden  # scores Q·K^T, summed over heads
        + 2 * batch * seq * seq * hidden  # probabilities · V
        + 2 * tokens * hidden * hidden  # attention output projection
        + 2 * tokens * hidden * ffn * 2  # FFN in and out
    )
    return {
        "embedding_projection": 2 * tokens * embed * hidden,
        "transformer_layers": layers * per_layer,
        "pooler": 2 * batch * hidden * hidden,
        "sop_classifier": 2 * batch * hidden * 2,
        "mlm_dense": 2 * masked * hidden * embed,
        "mlm_decoder": 2 * masked * embed * vocab,
    }


def albert_training_flops(**shape: int) -> int:
    """Model FLOPs of a training step: 3 × forward (backward ≈ 2 × forward)."""
    return 3 * sum(albert_forward_flops(**shape).values())


def flops_args(shape: Shape) -> dict[str, int]:
    fields = ("vocab", "embed", "hidden", "layers", "ffn", "batch", "seq", "predictions")
    return {k: getattr(shape, k) for k in fields}


# --------------------------------------------------------------------------- data
def synthetic_batch(shape: Shape, seed: int = 0) -> dict[str, Any]:
    """The one batch every variant trains on, as numpy arrays.

    Ids in [5, V) (no special tokens), all tokens real, two segments split at
    a random point, distinct sorted mask positions in [1, seq - 1).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    b, s, p = shape.batch, shape.seq, shape.predictions
    token_ids = rng.integers(5, shape.vocab, (b, s)).astype("int32")
    cut = rng.integers(2, s - 1, b)
    segment_ids = (np.arange(s)[None, :] >= cut[:, None]).astype("int32")
    positions = np.stack(
        [np.sort(rng.choice(np.arange(1, s - 1), p, replace=False)) for _ in range(b)]
    )
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": np.ones((b, s), "int32"),
        "mask_positions": positions.astype("int32"),
        "mask_ids": np.take_along_axis(token_ids, positions, axis=1).astype("int32"),
        "mask_weights": np.ones((b, p), "float32"),
        "sentence_order_label": rng.integers(0, 2, b).astype("int32"),
    }


FEATURE_KEYS = ("token_ids", "segment_ids", "padding_mask", "mask_positions")
LABEL_KEYS = ("mask_ids", "mask_weights", "sentence_order_label")
