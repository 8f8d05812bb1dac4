"""brightmart/albert_zh's layout in: a TF1 checkpoint written here with its variable names,
converted, and checked against brightmart's graph written here in NumPy (float64) from
its equations (``modeling.py``: the token embedding projected to H first, position and
segment embeddings at width H, BERT's post-LayerNorm layer under one ``layer_shared``
scope; ``run_pretraining.py``: the MLM head decoding through both tied tables)."""

import json

import numpy as np
import pytest
from helpers.numerics import albert_budget, assert_normwise_close
from helpers.testing_utils import random_batch, write_tf1_checkpoint

import albert_tf
from albert_tf.checkpoints.convert import convert
from albert_tf.checkpoints.hf_export import export_hf
from albert_tf.checkpoints.saved_format import CheckpointError

FIELDS = dict(
    vocab_size=90,
    embedding_size=16,
    hidden_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=40,
    type_vocab_size=2,
)


def brightmart_variables(v, e, h, i, p, t) -> dict[str, tuple[int, ...]]:
    """Names and shapes as brightmart's modeling.py and run_pretraining.py make them."""
    shared = "bert/encoder/layer_shared"
    shapes = {
        "bert/embeddings/word_embeddings": (v, e),
        "bert/embeddings/word_embeddings_2": (e, h),
        "bert/embeddings/token_type_embeddings": (t, h),
        "bert/embeddings/position_embeddings": (p, h),
        "bert/embeddings/LayerNorm/gamma": (h,),
        "bert/embeddings/LayerNorm/beta": (h,),
        f"{shared}/attention/output/dense/kernel": (h, h),
        f"{shared}/attention/output/dense/bias": (h,),
        f"{shared}/attention/output/LayerNorm/gamma": (h,),
        f"{shared}/attention/output/LayerNorm/beta": (h,),
        f"{shared}/intermediate/dense/kernel": (h, i),
        f"{shared}/intermediate/dense/bias": (i,),
        f"{shared}/output/dense/kernel": (i, h),
        f"{shared}/output/dense/bias": (h,),
        f"{shared}/output/LayerNorm/gamma": (h,),
        f"{shared}/output/LayerNorm/beta": (h,),
        "bert/pooler/dense/kernel": (h, h),
        "bert/pooler/dense/bias": (h,),
        "cls/predictions/transform/dense/kernel": (h, h),
        "cls/predictions/transform/dense/bias": (h,),
        "cls/predictions/transform/LayerNorm/gamma": (h,),
        "cls/predictions/transform/LayerNorm/beta": (h,),
        "cls/predictions/output_bias": (v,),
        "cls/seq_relationship/output_weights": (2, h),
        "cls/seq_relationship/output_bias": (2,),
    }
    for part in ("query", "key", "value"):
        shapes[f"{shared}/attention/self/{part}/kernel"] = (h, h)
        shapes[f"{shared}/attention/self/{part}/bias"] = (h,)
    return shapes


def write_brightmart_checkpoint(directory, e: int, config_e: int) -> tuple[str, dict]:
    f = FIELDS
    shapes = brightmart_variables(
        f["vocab_size"],
        e,
        f["hidden_size"],
        f["intermediate_size"],
        f["max_position_embeddings"],
        f["type_vocab_size"],
    )
    prefix = str(directory / "albert_model.ckpt")
    step = {"global_step": np.array(125000, np.int64)}
    arrays = write_tf1_checkpoint(prefix, shapes, seed=11, extra=step)
    # brightmart's albert_config_base.json, with its keys the code never reads.
    config = {**f, "embedding_size": config_e, "hidden_act": "gelu", "initializer_range": 0.02}
    config |= dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config |= dict(directionality="bidi", pooler_fc_size=32, pooler_num_attention_heads=4)
    config |= dict(
        pooler_num_fc_layers=3, pooler_size_per_head=8, pooler_type="first_token_transform"
    )
    (directory / "albert_config_base.json").write_text(json.dumps(config))
    return prefix, arrays


def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def brightmart_forward(w: dict, batch: dict, positions: np.ndarray) -> dict:
    """brightmart's graph in float64, from its equations."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    ids, segments, mask = batch["token_ids"], batch["segment_ids"], batch["padding_mask"]
    seq = ids.shape[1]
    x = w["bert/embeddings/word_embeddings"][ids] @ w["bert/embeddings/word_embeddings_2"]
    x = x + w["bert/embeddings/token_type_embeddings"][segments]
    x = x + w["bert/embeddings/position_embeddings"][:seq]
    x = _layer_norm(x, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"])
    s = "bert/encoder/layer_shared/"
    heads = FIELDS["num_attention_heads"]
    size = FIELDS["hidden_size"] // heads
    adder = (1.0 - mask[:, None, None, :]) * -10000.0  # brightmart's additive mask

    def split(t):  # [B, S, H] -> [B, N, S, D]
        return t.reshape(t.shape[0], seq, heads, size).transpose(0, 2, 1, 3)

    for _ in range(FIELDS["num_hidden_layers"]):  # one layer, applied L times
        q, k, v = (
            split(x @ w[f"{s}attention/self/{p}/kernel"] + w[f"{s}attention/self/{p}/bias"])
            for p in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size) + adder
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        attended = context @ w[f"{s}attention/output/dense/kernel"]
        attended += w[f"{s}attention/output/dense/bias"]
        a = _layer_norm(
            attended + x,
            w[f"{s}attention/output/LayerNorm/gamma"],
            w[f"{s}attention/output/LayerNorm/beta"],
        )
        hidden = _gelu(a @ w[f"{s}intermediate/dense/kernel"] + w[f"{s}intermediate/dense/bias"])
        out = hidden @ w[f"{s}output/dense/kernel"] + w[f"{s}output/dense/bias"]
        x = _layer_norm(out + a, w[f"{s}output/LayerNorm/gamma"], w[f"{s}output/LayerNorm/beta"])
    pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
    picked = np.take_along_axis(x, positions[..., None], axis=1)
    t = _gelu(
        picked @ w["cls/predictions/transform/dense/kernel"]
        + w["cls/predictions/transform/dense/bias"]
    )
    t = _layer_norm(
        t,
        w["cls/predictions/transform/LayerNorm/gamma"],
        w["cls/predictions/transform/LayerNorm/beta"],
    )
    t = t @ w["bert/embeddings/word_embeddings_2"].T  # H -> E
    mlm = t @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
    sop = (
        pooled @ w["cls/seq_relationship/output_weights"].T + w["cls/seq_relationship/output_bias"]
    )
    return {"sequence_output": x, "pooled_output": pooled, "mlm_logits": mlm, "sop_logits": sop}


@pytest.mark.parametrize(
    "e, config_e",
    [(16, 16), (32, 16)],  # the second: a release that embedded at H whatever the config said
    ids=["factorized", "embedded_at_h"],
)
def test_brightmart_checkpoint_converts_to_its_own_graph(tmp_path, e, config_e):
    prefix, arrays = write_brightmart_checkpoint(tmp_path, e, config_e)
    model, converted = convert("tf1", prefix, str(tmp_path / "out"))
    config = converted.config
    assert (config.embedding_layout, config.embedding_size) == ("brightmart", e)
    assert converted.heads == ["mlm_head", "sop_head"]
    batch = random_batch(FIELDS["vocab_size"], batch=3, seq=20)
    positions = np.array([[1, 4, 7], [2, 3, 9], [0, 5, 6]])
    want = brightmart_forward(arrays, batch, positions)
    loaded = albert_tf.load(tmp_path / "out")
    got = loaded({**batch, "mask_positions": positions}, training=False)
    budget = albert_budget(config, 20)
    for name in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        assert_normwise_close(got[name], want[name], rtol=budget, what=name)
    # Converted the same in memory.
    again = model({**batch, "mask_positions": positions}, training=False)
    np.testing.assert_allclose(again["mlm_logits"], got["mlm_logits"], rtol=0, atol=0)


def test_a_brightmart_model_does_not_leave_for_hugging_face(tmp_path):
    prefix, _ = write_brightmart_checkpoint(tmp_path, 16, 16)
    convert("tf1", prefix, str(tmp_path / "out"))
    with pytest.raises(CheckpointError, match="embedding_layout='brightmart'"):
        export_hf(str(tmp_path / "out"), str(tmp_path / "hf"))
    assert not (tmp_path / "hf").exists()


def test_a_pre_layer_norm_release_is_refused(tmp_path):
    # modeling_preln.py keeps the same variable names; only the config's ln_type
    # tells it apart, and converting it as post-LayerNorm would compute something else.
    from albert_tf.config import ConfigError

    prefix, _ = write_brightmart_checkpoint(tmp_path, 16, 16)
    path = tmp_path / "albert_config_base.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "ln_type": "preln"}))
    with pytest.raises(ConfigError, match="ln_type='preln': a pre-LayerNorm model"):
        convert("tf1", prefix, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
