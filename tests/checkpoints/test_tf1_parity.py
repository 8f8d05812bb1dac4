"""An official-layout TF1 checkpoint, loaded by transformers' own loader and ours."""

import json

import numpy as np
import pytest
import torch
import transformers
from helpers.hf_reference import HF_FIELDS, max_abs_diff, torch_inputs
from helpers.testing_utils import random_batch, write_tf1_checkpoint
from transformers.models.albert.modeling_albert import load_tf_weights_in_albert

import albert_tf
from albert_tf.checkpoints.convert import convert
from albert_tf.checkpoints.saved_format import CheckpointError

TOLERANCE = 1e-5


def official_variables(f) -> dict[str, tuple[int, ...]]:
    """Names and shapes as google-research/albert's modeling.py creates them."""
    v, e, h, i = f["vocab_size"], f["embedding_size"], f["hidden_size"], f["intermediate_size"]
    shapes = {
        "bert/embeddings/word_embeddings": (v, e),
        "bert/embeddings/token_type_embeddings": (f["type_vocab_size"], e),
        "bert/embeddings/position_embeddings": (f["max_position_embeddings"], e),
        "bert/embeddings/LayerNorm/gamma": (e,),
        "bert/embeddings/LayerNorm/beta": (e,),
        "bert/encoder/embedding_hidden_mapping_in/kernel": (e, h),
        "bert/encoder/embedding_hidden_mapping_in/bias": (h,),
        "bert/pooler/dense/kernel": (h, h),
        "bert/pooler/dense/bias": (h,),
        "cls/predictions/transform/dense/kernel": (h, e),
        "cls/predictions/transform/dense/bias": (e,),
        "cls/predictions/transform/LayerNorm/gamma": (e,),
        "cls/predictions/transform/LayerNorm/beta": (e,),
        "cls/predictions/output_bias": (v,),
        "cls/seq_relationship/output_weights": (2, h),
        "cls/seq_relationship/output_bias": (2,),
    }
    for g in range(f["num_hidden_groups"]):
        for k in range(f["inner_group_num"]):
            p = f"bert/encoder/transformer/group_{g}/inner_group_{k}"
            for part in ("query", "key", "value"):
                shapes[f"{p}/attention_1/self/{part}/kernel"] = (h, h)
                shapes[f"{p}/attention_1/self/{part}/bias"] = (h,)
            shapes[f"{p}/attention_1/output/dense/kernel"] = (h, h)
            shapes[f"{p}/attention_1/output/dense/bias"] = (h,)
            shapes[f"{p}/ffn_1/intermediate/dense/kernel"] = (h, i)
            shapes[f"{p}/ffn_1/intermediate/dense/bias"] = (i,)
            shapes[f"{p}/ffn_1/intermediate/output/dense/kernel"] = (i, h)
            shapes[f"{p}/ffn_1/intermediate/output/dense/bias"] = (h,)
            for norm in ("LayerNorm", "LayerNorm_1"):
                shapes[f"{p}/{norm}/gamma"] = (h,)
                shapes[f"{p}/{norm}/beta"] = (h,)
    return shapes


def write_official_checkpoint(directory, fields, extra=None):
    # What real checkpoints also carry: optimizer slots and the step.
    slot = np.zeros((fields["hidden_size"],) * 2, np.float32)
    saved = {
        "bert/pooler/dense/kernel/adam_m": slot,
        "bert/pooler/dense/kernel/adam_v": slot,
        "global_step": np.array(1000, np.int64),
        **(extra or {}),
    }
    prefix = str(directory / "model.ckpt-1000")
    write_tf1_checkpoint(prefix, official_variables(fields), seed=7, extra=saved)
    official = {
        k: v for k, v in fields.items() if k not in ("layer_norm_eps", "classifier_dropout_prob")
    }
    official["hidden_act"] = {"gelu_new": "gelu", "relu": "relu"}[fields["hidden_act"]]
    (directory / "albert_config.json").write_text(json.dumps(official))
    return prefix


@pytest.mark.parametrize("hidden_act", ["gelu_new", "relu"])
def test_tf1_checkpoint_parity_with_transformers_loader(tmp_path, hidden_act):
    fields = {**HF_FIELDS, "hidden_act": hidden_act}
    prefix = write_official_checkpoint(tmp_path, fields)

    hf_model = transformers.AlbertForPreTraining(transformers.AlbertConfig(**fields)).eval()
    with torch.no_grad():
        for param in hf_model.parameters():
            param.fill_(float("nan"))
    load_tf_weights_in_albert(hf_model, hf_model.config, prefix)
    # transformers' loader skips what it does not recognise; make sure it
    # recognised everything, or the comparison would be against NaN.
    nan = [n for n, p in hf_model.named_parameters() if torch.isnan(p).any()]
    assert not nan, nan

    convert("tf1", prefix, str(tmp_path / "ours"))  # config found beside it
    model = albert_tf.load(tmp_path / "ours")
    batch = random_batch(fields["vocab_size"])
    ours = model(batch)
    with torch.no_grad():
        inputs = torch_inputs(batch)
        base = hf_model.albert(**inputs)
        heads = hf_model(**inputs)
    diffs = {
        "sequence_output": max_abs_diff(ours["sequence_output"], base.last_hidden_state),
        "pooled_output": max_abs_diff(ours["pooled_output"], base.pooler_output),
        "mlm_logits": max_abs_diff(ours["mlm_logits"], heads.prediction_logits),
        "sop_logits": max_abs_diff(ours["sop_logits"], heads.sop_logits),
    }
    print(hidden_act, diffs)
    assert max(diffs.values()) <= TOLERANCE, diffs


def test_tf1_unknown_variable_is_an_error(tmp_path):
    prefix = write_official_checkpoint(
        tmp_path, HF_FIELDS, extra={"bert/encoder/mystery/kernel": np.ones(3, np.float32)}
    )
    with pytest.raises(CheckpointError, match="mystery"):
        convert("tf1", prefix, str(tmp_path / "ours"))


def test_tf1_missing_prefix_is_a_clear_error(tmp_path):
    (tmp_path / "albert_config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="prefix"):
        convert("tf1", str(tmp_path / "model.ckpt-1"), str(tmp_path / "ours"))
