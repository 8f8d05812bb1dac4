"""Cross-layer sharing: object identity, parameter counts, and equivalence."""

import keras_hub
import numpy as np
import pytest
from helpers.testing_utils import random_batch, tiny_config

from albert_tf.checkpoints.saved_format import assign_weights, named_weights
from albert_tf.model_size import parameter_count
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.pretraining_model import AlbertPretrainingModel


def test_all_shared_is_one_transformer_encoder_called_l_times():
    config = tiny_config(num_hidden_layers=6)
    backbone = AlbertBackbone(config, output_hidden_states=True)
    layers = backbone.encoder.transformer_layers
    assert len(layers) == 1
    assert isinstance(layers[0], keras_hub.layers.TransformerEncoder)
    states = backbone(random_batch(config.vocab_size))["hidden_states"]
    assert len(states) == 7
    # Every application really ran: consecutive states all differ.
    for a, b in zip(states[:-1], states[1:], strict=True):
        assert np.abs(np.asarray(a) - np.asarray(b)).max() > 1e-3


@pytest.mark.parametrize(
    "share, attention_owners, feedforward_owners",
    [("all", 1, 1), ("attention", 1, 4), ("ffn", 4, 1), ("none", 4, 4)],
)
def test_sublayer_identity_per_share_mode(share, attention_owners, feedforward_owners):
    backbone = AlbertBackbone(tiny_config(share=share))
    layers = backbone.encoder.transformer_layers
    attention = {id(layer._self_attention_layer) for layer in layers}
    feedforward = {id(layer._feedforward_intermediate_dense) for layer in layers}
    assert (len(attention), len(feedforward)) == (attention_owners, feedforward_owners)


@pytest.mark.parametrize(
    "overrides",
    [
        dict(share="all"),
        dict(share="attention"),
        dict(share="ffn"),
        dict(share="none"),
        dict(num_hidden_groups=2, inner_group_num=2),
        dict(share="attention", num_hidden_groups=2),
        dict(embedding_size=48),  # E == H: no projection
        dict(embedding_layout="brightmart"),  # E-wide tokens only; no projection bias
        dict(embedding_layout="brightmart", embedding_size=48),  # a projection even at E == H
    ],
)
def test_closed_form_count_equals_built_model(overrides):
    config = tiny_config(**overrides)
    backbone = AlbertBackbone(config)
    built = sum(int(np.prod(w.shape)) for w in backbone.weights)
    assert built == parameter_count(config).total
    assert ("embeddings/projection/kernel" in [w.path for w in backbone.weights]) == (
        config.has_embedding_projection
    )


def _unshared_copy(shared: AlbertPretrainingModel) -> AlbertPretrainingModel:
    """A share='none' model whose every layer holds the shared model's blocks."""
    share = shared.config.share
    unshared = AlbertPretrainingModel.from_albert_config(shared.config.replace(share="none"))
    src = {k: np.asarray(v) for k, v in named_weights(shared).items()}
    owner_of_shared_block = "group_0_inner_0" if share == "all" else "layer_0_inner_0"
    arrays = {}
    for name in named_weights(unshared):
        parts = name.split("/")  # backbone/encoder/layer_i_inner_0/<sublayer>/...
        if parts[:2] == ["backbone", "encoder"]:
            is_attention = parts[3].startswith("self_attention")
            block_shared = share == "all" or (share == "attention") == is_attention
            if block_shared:
                parts[2] = owner_of_shared_block
        arrays[name] = src["/".join(parts)]
    assign_weights(unshared, arrays)
    return unshared


@pytest.mark.parametrize("share", ["all", "attention", "ffn"])
def test_sharing_equals_unshared_model_with_tied_copies(share):
    shared = AlbertPretrainingModel.from_albert_config(tiny_config(share=share))
    unshared = _unshared_copy(shared)
    batch = random_batch(shared.config.vocab_size)
    a, b = shared(batch), unshared(batch)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        np.testing.assert_allclose(np.asarray(a[key]), np.asarray(b[key]), atol=1e-6)


def test_hidden_states_per_inner_layer():
    config = tiny_config(num_hidden_layers=2, num_hidden_groups=2, inner_group_num=2)
    out = AlbertBackbone(config, output_hidden_states=True)(random_batch(120))
    assert len(out["hidden_states"]) == 2 * 2 + 1
    np.testing.assert_array_equal(out["hidden_states"][-1], out["sequence_output"])
