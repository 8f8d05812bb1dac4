"""Random Hugging Face ALBERT models to compare against (test-only torch)."""

from __future__ import annotations

import numpy as np
import torch
import transformers

HF_FIELDS = dict(
    vocab_size=120,
    embedding_size=16,
    hidden_size=48,
    num_hidden_layers=4,
    num_hidden_groups=2,
    inner_group_num=2,
    num_attention_heads=4,
    intermediate_size=96,
    hidden_act="gelu_new",
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
    classifier_dropout_prob=0.0,
    max_position_embeddings=64,
    type_vocab_size=2,
    layer_norm_eps=1e-12,
)


def random_hf_model(model_class, seed: int = 0, **overrides):
    """An eval-mode HF model with *every* parameter random.

    Default init leaves biases at 0 and LayerNorm at (1, 0), which would hide
    a bias or gamma/beta mapped to the wrong place; here they are random too.
    """
    torch.manual_seed(seed)
    config = transformers.AlbertConfig(**{**HF_FIELDS, **overrides})
    model = model_class(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name:
                centre = 1.0 if name.endswith("weight") else 0.0
                param.copy_(torch.randn_like(param) * 0.5 + centre)
    return model


def torch_inputs(batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.tensor(batch["token_ids"], dtype=torch.long),
        "token_type_ids": torch.tensor(batch["segment_ids"], dtype=torch.long),
        "attention_mask": torch.tensor(batch["padding_mask"], dtype=torch.long),
    }


def max_abs_diff(ours, theirs) -> float:
    ours = np.asarray(ours, dtype=np.float64)
    theirs = np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    return float(np.max(np.abs(ours - theirs)))
