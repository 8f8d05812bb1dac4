"""Closed-form parameter counts, from the config and the sharing plan."""

from __future__ import annotations

import dataclasses

from albert_tf.config import AlbertConfig
from albert_tf.layers.encoder import sharing_plan


@dataclasses.dataclass(frozen=True)
class ParameterCount:
    embedding: int  # V·E + P·E + T·E + LayerNorm
    projection: int  # E·H + H, or 0 when E == H
    attention: int  # every distinct attention block
    feedforward: int  # every distinct FFN block
    pooler: int

    @property
    def encoder(self) -> int:
        return self.attention + self.feedforward

    @property
    def total(self) -> int:
        """Backbone: embeddings, projection, encoder and pooler (no heads)."""
        return self.embedding + self.projection + self.encoder + self.pooler


def parameter_count(config: AlbertConfig) -> ParameterCount:
    """Counts without building the model (xxlarge would allocate ~1 GB).

    `tests/test_model_size.py` checks it against built models.
    """
    e, h, f = config.embedding_size, config.hidden_size, config.intermediate_size
    plan = sharing_plan(
        config.num_hidden_layers,
        config.num_hidden_groups,
        config.inner_group_num,
        config.share,
    )
    attention_blocks = len({slot.attention for slot in plan})
    feedforward_blocks = len({slot.feedforward for slot in plan})
    positions_and_segments = config.max_position_embeddings + config.type_vocab_size
    if config.embedding_layout == "brightmart":
        # Positions, segments and the LayerNorm at width H; the projection has no bias.
        embedding = config.vocab_size * e + positions_and_segments * h + 2 * h
        projection = e * h
    else:
        embedding = (config.vocab_size + positions_and_segments) * e + 2 * e
        projection = (e * h + h) if config.has_embedding_projection else 0
    return ParameterCount(
        embedding=embedding,
        projection=projection,
        attention=attention_blocks * (4 * (h * h + h) + 2 * h),
        feedforward=feedforward_blocks * (h * f + f + f * h + h + 2 * h),
        pooler=h * h + h,
    )
