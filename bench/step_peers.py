"""The peers: Keras-Hub's ALBERT (TensorFlow) and Hugging Face's (PyTorch).

Each builds the same pretraining step (MLM decoded at the masked positions,
SOP on the pooled output, LAMB or AdamW, clipping by global norm 1) on the
shared synthetic batch of ``step_workload.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.step_workload import FEATURE_KEYS, LABEL_KEYS, Shape, synthetic_batch


# --------------------------------------------------------------------------- keras-hub
def build_keras_hub_step(
    shape: Shape, precision: str, jit_compile: bool
) -> tuple[Callable[[], float], dict]:
    """keras-hub's AlbertBackbone + its MaskedLMHead (tied) + Dense(2) SOP."""
    import keras
    import keras_hub
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    policy = {"float32": "float32", "bfloat16": "mixed_bfloat16"}[precision]
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=shape.vocab,
        num_layers=shape.layers,
        num_heads=shape.heads,
        num_groups=1,
        num_inner_repetitions=1,
        embedding_dim=shape.embed,
        hidden_dim=shape.hidden,
        intermediate_dim=shape.ffn,
        dropout=0.0,
        max_sequence_length=shape.max_position,
        num_segments=shape.type_vocab,
        dtype=policy,
    )
    mlm_head = keras_hub.layers.MaskedLMHead(
        token_embedding=backbone.token_embedding,
        intermediate_activation=lambda x: keras.activations.gelu(x, approximate=True),
        layer_norm_epsilon=1e-12,
        dtype=backbone.dtype_policy,
        name="mlm_head",
    )
    sop_head = keras.layers.Dense(2, dtype=backbone.dtype_policy, name="sop_head")
    data = synthetic_batch(shape)
    features = {k: tf.constant(data[k]) for k in FEATURE_KEYS}
    labels = {k: tf.constant(data[k]) for k in LABEL_KEYS}
    # Build every variable before tracing: a tf.function may not create them later.
    out = backbone({k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    mlm_head(out["sequence_output"], mask_positions=features["mask_positions"])
    sop_head(out["pooled_output"])
    variables = (
        backbone.trainable_variables + mlm_head.trainable_variables + sop_head.trainable_variables
    )
    optimizer = keras.optimizers.Lamb(learning_rate=1e-4, weight_decay=0.01, global_clipnorm=1.0)
    optimizer.build(variables)

    @tf.function(jit_compile=jit_compile)
    def train_step(features, labels):
        with tf.GradientTape() as tape:
            out = backbone(
                {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")},
                training=True,
            )
            mlm_logits = mlm_head(out["sequence_output"], mask_positions=features["mask_positions"])
            sop_logits = sop_head(out["pooled_output"])
            mlm_losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels["mask_ids"], tf.cast(mlm_logits, tf.float32)
            )
            weights = labels["mask_weights"]
            mlm_loss = tf.reduce_sum(mlm_losses * weights) / tf.reduce_sum(weights)
            sop_loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels["sentence_order_label"], tf.cast(sop_logits, tf.float32)
                )
            )
            loss = mlm_loss + sop_loss
        grads = tape.gradient(loss, variables)
        optimizer.apply(grads, variables)
        return loss

    def step() -> float:
        return float(train_step(features, labels))

    info = {
        "optimizer": "keras.optimizers.Lamb(weight_decay=0.01, global_clipnorm=1.0)",
        "model": "keras_hub AlbertBackbone + keras_hub.layers.MaskedLMHead + Dense(2)",
        "dtype_policy": policy,
        "jit_compile": jit_compile,
        "attention": "keras_hub TransformerEncoder / keras MultiHeadAttention (padding mask)",
    }
    return step, info


# --------------------------------------------------------------------------- Hugging Face
def build_hf_step(
    shape: Shape, precision: str, compile_model: bool, attention: str
) -> tuple[Callable[[], float], dict]:
    """transformers' AlbertForPreTraining, MLM decoded at the masked positions only."""
    import torch
    import torch.nn.functional as F
    import transformers

    torch.manual_seed(0)
    config = transformers.AlbertConfig(
        vocab_size=shape.vocab,
        embedding_size=shape.embed,
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_hidden_groups=1,
        inner_group_num=1,
        num_attention_heads=shape.heads,
        intermediate_size=shape.ffn,
        hidden_act="gelu_new",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
        max_position_embeddings=shape.max_position,
        type_vocab_size=shape.type_vocab,
        attn_implementation=attention,
    )
    model = transformers.AlbertForPreTraining(config)
    model.train()
    bf16 = precision == "bfloat16"

    class PretrainingLoss(torch.nn.Module):
        """Forward + loss in one module, so torch.compile sees all of it."""

        def __init__(self, pretraining: torch.nn.Module):
            super().__init__()
            self.pretraining = pretraining

        def forward(self, token_ids, segment_ids, padding_mask, positions, mask_ids, weights, sop):
            m = self.pretraining
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = m.albert(
                    input_ids=token_ids, attention_mask=padding_mask, token_type_ids=segment_ids
                )
                index = positions.unsqueeze(-1).expand(-1, -1, out.last_hidden_state.shape[-1])
                gathered = torch.gather(out.last_hidden_state, 1, index)  # [B, P, H]
                mlm_logits = m.predictions(gathered)
                sop_logits = m.sop_classifier(out.pooler_output)
            mlm = F.cross_entropy(
                mlm_logits.float().flatten(0, 1), mask_ids.flatten(), reduction="none"
            )
            mlm_loss = (mlm * weights.flatten()).sum() / weights.sum()
            return mlm_loss + F.cross_entropy(sop_logits.float(), sop)

    loss_module: Any = PretrainingLoss(model)
    if compile_model:
        loss_module = torch.compile(loss_module)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    data = synthetic_batch(shape)
    token_ids, segment_ids, padding_mask, positions, mask_ids, sop = (
        torch.from_numpy(data[k]).long()
        for k in (*FEATURE_KEYS, "mask_ids", "sentence_order_label")
    )
    weights = torch.from_numpy(data["mask_weights"])

    def step() -> float:
        loss = loss_module(token_ids, segment_ids, padding_mask, positions, mask_ids, weights, sop)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss)

    info = {
        "optimizer": "torch.optim.AdamW(weight_decay=0.01) + clip_grad_norm_ 1.0",
        "model": "transformers AlbertForPreTraining: albert, gather, predictions, sop_classifier",
        "dtype_policy": "autocast bfloat16" if bf16 else "float32",
        "attention": model.config._attn_implementation,
        # transformers drops an all-ones mask unless tracing: eager SDPA then
        # runs unmasked (slightly less work than ours), compiled keeps it.
        "attention_mask": "applied"
        if compile_model or attention != "sdpa"
        else "dropped (all tokens real)",
        "torch_compile": "default mode, forward+loss module" if compile_model else False,
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
    }
    return step, info
