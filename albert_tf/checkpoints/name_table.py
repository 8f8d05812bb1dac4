"""The table from foreign checkpoint names to this package's weight names.

One row per weight: our name, the official TF1 name, the Hugging Face name,
and how the array is laid out. Both converters walk the same rows, so a
mapping mistake cannot hide in one of them.

Layouts (H = hidden, N = heads, D = H / N):

* ``copy``: identical shape.
* ``dense``: a dense kernel. TF1 stores [in, out] like Keras; PyTorch's
  ``nn.Linear.weight`` is [out, in] and is transposed.
* ``qkv_kernel``: [H, H] → [H, N, D] (Keras `EinsumDense` "abc,cde->abde").
* ``qkv_bias``: [H] → [N, D].
* ``attention_output_kernel``: [H, H] → [N, D, H].
"""

from __future__ import annotations

import dataclasses

import numpy as np

from albert_tf.config import AlbertConfig


@dataclasses.dataclass(frozen=True)
class Row:
    ours: str
    tf1: str
    hf: str
    layout: str = "copy"


def weight_table(config: AlbertConfig) -> list[Row]:
    """Rows for every weight of backbone and all heads.

    Only ``share="all"`` exists in official and Hugging Face checkpoints
    (their groups are this package's groups); the ablation modes have no
    foreign checkpoints to convert.
    """
    if config.share != "all":
        raise ValueError(
            f"share={config.share!r} has no official or Hugging Face checkpoint "
            "layout; only share='all' (with any num_hidden_groups) converts."
        )
    rows = [
        Row(
            "backbone/embeddings/token_embedding/embeddings",
            "bert/embeddings/word_embeddings",
            "embeddings.word_embeddings.weight",
        ),
        Row(
            "backbone/embeddings/position_embedding/embeddings",
            "bert/embeddings/position_embeddings",
            "embeddings.position_embeddings.weight",
        ),
        Row(
            "backbone/embeddings/segment_embedding/embeddings",
            "bert/embeddings/token_type_embeddings",
            "embeddings.token_type_embeddings.weight",
        ),
        Row(
            "backbone/embeddings/layer_norm/gamma",
            "bert/embeddings/LayerNorm/gamma",
            "embeddings.LayerNorm.weight",
        ),
        Row(
            "backbone/embeddings/layer_norm/beta",
            "bert/embeddings/LayerNorm/beta",
            "embeddings.LayerNorm.bias",
        ),
    ]
    if config.has_embedding_projection:
        rows += [
            Row(
                "backbone/embeddings/projection/kernel",
                "bert/encoder/embedding_hidden_mapping_in/kernel",
                "encoder.embedding_hidden_mapping_in.weight",
                "dense",
            ),
            Row(
                "backbone/embeddings/projection/bias",
                "bert/encoder/embedding_hidden_mapping_in/bias",
                "encoder.embedding_hidden_mapping_in.bias",
            ),
        ]
    for g in range(config.num_hidden_groups):
        for k in range(config.inner_group_num):
            ours = f"backbone/encoder/group_{g}_inner_{k}"
            tf1 = f"bert/encoder/transformer/group_{g}/inner_group_{k}"
            hf = f"encoder.albert_layer_groups.{g}.albert_layers.{k}"
            attn = f"{ours}/self_attention_layer"
            for part in ("query", "key", "value"):
                rows += [
                    Row(
                        f"{attn}/{part}/kernel",
                        f"{tf1}/attention_1/self/{part}/kernel",
                        f"{hf}.attention.{part}.weight",
                        "qkv_kernel",
                    ),
                    Row(
                        f"{attn}/{part}/bias",
                        f"{tf1}/attention_1/self/{part}/bias",
                        f"{hf}.attention.{part}.bias",
                        "qkv_bias",
                    ),
                ]
            rows += [
                Row(
                    f"{attn}/attention_output/kernel",
                    f"{tf1}/attention_1/output/dense/kernel",
                    f"{hf}.attention.dense.weight",
                    "attention_output_kernel",
                ),
                Row(
                    f"{attn}/attention_output/bias",
                    f"{tf1}/attention_1/output/dense/bias",
                    f"{hf}.attention.dense.bias",
                ),
                Row(
                    f"{ours}/self_attention_layer_norm/gamma",
                    f"{tf1}/LayerNorm/gamma",
                    f"{hf}.attention.LayerNorm.weight",
                ),
                Row(
                    f"{ours}/self_attention_layer_norm/beta",
                    f"{tf1}/LayerNorm/beta",
                    f"{hf}.attention.LayerNorm.bias",
                ),
                Row(
                    f"{ours}/feedforward_intermediate_dense/kernel",
                    f"{tf1}/ffn_1/intermediate/dense/kernel",
                    f"{hf}.ffn.weight",
                    "dense",
                ),
                Row(
                    f"{ours}/feedforward_intermediate_dense/bias",
                    f"{tf1}/ffn_1/intermediate/dense/bias",
                    f"{hf}.ffn.bias",
                ),
                Row(
                    f"{ours}/feedforward_output_dense/kernel",
                    f"{tf1}/ffn_1/intermediate/output/dense/kernel",
                    f"{hf}.ffn_output.weight",
                    "dense",
                ),
                Row(
                    f"{ours}/feedforward_output_dense/bias",
                    f"{tf1}/ffn_1/intermediate/output/dense/bias",
                    f"{hf}.ffn_output.bias",
                ),
                Row(
                    f"{ours}/feedforward_layer_norm/gamma",
                    f"{tf1}/LayerNorm_1/gamma",
                    f"{hf}.full_layer_layer_norm.weight",
                ),
                Row(
                    f"{ours}/feedforward_layer_norm/beta",
                    f"{tf1}/LayerNorm_1/beta",
                    f"{hf}.full_layer_layer_norm.bias",
                ),
            ]
    rows += [
        Row(
            "backbone/pooler/kernel",
            "bert/pooler/dense/kernel",
            "pooler.weight",
            "dense",
        ),
        Row("backbone/pooler/bias", "bert/pooler/dense/bias", "pooler.bias"),
        # Heads. HF names here are relative to the task model, not to `albert.`.
        Row(
            "mlm_head/dense/kernel",
            "cls/predictions/transform/dense/kernel",
            "predictions.dense.weight",
            "dense",
        ),
        Row(
            "mlm_head/dense/bias",
            "cls/predictions/transform/dense/bias",
            "predictions.dense.bias",
        ),
        Row(
            "mlm_head/layer_norm/gamma",
            "cls/predictions/transform/LayerNorm/gamma",
            "predictions.LayerNorm.weight",
        ),
        Row(
            "mlm_head/layer_norm/beta",
            "cls/predictions/transform/LayerNorm/beta",
            "predictions.LayerNorm.bias",
        ),
        Row("mlm_head/output_bias", "cls/predictions/output_bias", "predictions.bias"),
        # Official seq_relationship/output_weights is [2, H], like torch's Linear.
        Row(
            "sop_head/dense/kernel",
            "cls/seq_relationship/output_weights",
            "sop_classifier.classifier.weight",
            "dense",
        ),
        Row(
            "sop_head/dense/bias",
            "cls/seq_relationship/output_bias",
            "sop_classifier.classifier.bias",
        ),
        # Hugging Face names every task classifier "classifier"; the converter
        # keeps the row its source's architecture calls for.
        Row("multiple_choice_head/dense/kernel", "", "classifier.weight", "dense"),
        Row("multiple_choice_head/dense/bias", "", "classifier.bias"),
        Row("classifier_head/dense/kernel", "", "classifier.weight", "dense"),
        Row("classifier_head/dense/bias", "", "classifier.bias"),
        Row("tagger_head/dense/kernel", "", "classifier.weight", "dense"),
        Row("tagger_head/dense/bias", "", "classifier.bias"),
        # ... except the span QA head, "qa_outputs" (start and end: two outputs).
        Row("span_head/dense/kernel", "", "qa_outputs.weight", "dense"),
        Row("span_head/dense/bias", "", "qa_outputs.bias"),
    ]
    if config.embedding_layout == "brightmart":
        return _brightmart_rows(rows, config)
    return rows


#: Google's TF1 scopes → brightmart/albert_zh's (``modeling.py``: BERT's layer
#: names under one ``layer_shared`` scope, the projection beside the embeddings).
_BRIGHTMART_SCOPES = (
    ("bert/encoder/embedding_hidden_mapping_in/kernel", "bert/embeddings/word_embeddings_2"),
    ("bert/encoder/transformer/group_0/inner_group_0/", "bert/encoder/layer_shared/"),
    ("layer_shared/attention_1/", "layer_shared/attention/"),
    ("layer_shared/LayerNorm/", "layer_shared/attention/output/LayerNorm/"),
    ("layer_shared/ffn_1/intermediate/output/", "layer_shared/output/"),
    ("layer_shared/ffn_1/intermediate/dense/", "layer_shared/intermediate/dense/"),
    ("layer_shared/LayerNorm_1/", "layer_shared/output/LayerNorm/"),
)


def _brightmart_rows(rows: list[Row], config: AlbertConfig) -> list[Row]:
    """The rows of brightmart's layout: TF1 names of its checkpoints, no Hugging Face
    names (transformers has no such model), no projection bias."""
    if (config.num_hidden_groups, config.inner_group_num) != (1, 1):
        raise ValueError(
            "brightmart's checkpoints share one layer (layer_shared): num_hidden_groups "
            f"and inner_group_num must be 1, got {config.num_hidden_groups} and "
            f"{config.inner_group_num}"
        )
    renamed = []
    for row in rows:
        if row.ours == "backbone/embeddings/projection/bias":
            continue
        tf1 = row.tf1
        for google, brightmart in _BRIGHTMART_SCOPES:
            tf1 = tf1.replace(google, brightmart)
        renamed.append(dataclasses.replace(row, tf1=tf1, hf=""))
    return renamed


def to_ours(
    array: np.ndarray, layout: str, config: AlbertConfig, *, torch_layout: bool
) -> np.ndarray:
    """Reshapes a foreign array into our layout.

    ``torch_layout``: the array comes from PyTorch, whose dense weights are
    [out, in]. The official ``seq_relationship/output_weights`` is stored
    [out, in] as well, and callers pass ``torch_layout=True`` for it.
    """
    array = np.asarray(array)
    n, d, h = config.num_attention_heads, config.head_size, config.hidden_size
    if layout == "copy":
        return array
    if torch_layout:
        array = array.T  # [out, in] -> [in, out]
    if layout == "dense":
        return array
    if layout == "qkv_kernel":
        return array.reshape(h, n, d)
    if layout == "qkv_bias":
        return array.reshape(n, d)
    if layout == "attention_output_kernel":
        return array.reshape(n, d, h)
    raise ValueError(f"Unknown layout {layout!r}")
