"""`recover_checkpoint`: a model directory back from one of this package's exports.

An export (`albert_tf.serving.export_saved_model`) keeps everything a fine-tuned
model needs except its config and the shape of its layout: the weights its
signatures read (``serving_variables``, named as the model's variables were),
the LayerNorms' ``gamma`` and ``beta`` as graph constants when the export froze
them (`albert_tf.layers.layer_norm.AlbertLayerNormalization.freeze`), the
tokenizer (``assets.extra/tokenizer``) and fine-tuning's settings
(``assets.extra/albert_tf.json``, ``"finetune"``). This rebuilds the model
directory that export read, so that a model whose checkpoint is lost can be
exported again, converted or fine-tuned further.

The variables' shapes give the vocabulary, E, H, heads, the feed-forward width
and the positions; what shapes cannot tell (the number of layers, the share mode,
the activation, LayerNorm's epsilon) the caller passes as `AlbertConfig` fields.
Only float32 exports can be recovered: bfloat16 and int8 ones hold rounded
projections.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from albert_tf import storage
from albert_tf.checkpoints.saved_format import (
    SETTINGS_FILE,
    assign_weights,
    named_weights,
    save_model,
)
from albert_tf.config import AlbertConfig
from albert_tf.serving.export import METADATA_FILE
from albert_tf.storage import write_json_atomic
from albert_tf.tasks import get_task

#: Config fields read from the exported variables' shapes: (variable, axis) per field.
SHAPE_FIELDS = {
    "vocab_size": ("embeddings/token_embedding/embeddings", 0),
    "embedding_size": ("embeddings/token_embedding/embeddings", 1),
    "max_position_embeddings": ("embeddings/position_embedding/embeddings", 0),
    "type_vocab_size": ("embeddings/segment_embedding/embeddings", 0),
    "hidden_size": ("embeddings/projection/kernel", 1),
    "num_attention_heads": ("self_attention_layer/query/kernel", 1),
    "intermediate_size": ("feedforward_intermediate_dense/kernel", 1),
}


def variable_key(name: str) -> str:
    """A variable's name without ``:0`` and without the numbering Keras gives a
    model's name (``albert_multiple_choice_1/kernel`` → ``albert_multiple_choice/kernel``):
    the same key for a variable of the exported model and of its rebuilt twin.

    >>> variable_key("albert_multiple_choice_3/kernel:0")
    'albert_multiple_choice/kernel'
    >>> variable_key("encoder/group_0_inner_0/value/bias:0")
    'encoder/group_0_inner_0/value/bias'
    """
    first, _, rest = name.removesuffix(":0").partition("/")
    return "/".join(filter(None, (re.sub(r"_\d+$", "", first), rest)))


def read_metadata(saved_model_dir: str | os.PathLike[str]) -> dict:
    """The export's ``assets.extra/albert_tf.json``."""
    path = os.path.join(os.fspath(saved_model_dir), "assets.extra", METADATA_FILE)
    return json.loads(storage.read_text(path))


def exported_variables(saved_model_dir: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The values of the variables the export's signatures read, by `variable_key`."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops the graph holds)

    root = tf.saved_model.load(os.fspath(saved_model_dir))
    if not hasattr(root, "serving_variables"):
        raise ValueError(f"{saved_model_dir} holds no serving_variables: not an albert_tf export")
    arrays: dict[str, np.ndarray] = {}
    for variable in root.serving_variables:
        key = variable_key(variable.name)
        if key in arrays:
            raise ValueError(f"two exported variables are named {key!r}")
        arrays[key] = variable.numpy()
    return arrays


def frozen_layer_norms(saved_model_dir: str | os.PathLike[str]) -> list[tuple[str, np.ndarray]]:
    """The graph constants of frozen LayerNorms, with their node names: ``scope/Const``
    is a ``gamma``, ``scope/Const_1`` a ``beta`` (the order `AlbertLayerNormalization`
    makes them in); one entry per call of the layer in each traced function."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(
        storage.read_bytes(os.path.join(os.fspath(saved_model_dir), "saved_model.pb"))
    )
    return [
        (node.name, tf.make_ndarray(node.attr["value"].tensor))
        for function in proto.meta_graphs[0].graph_def.library.function
        for node in function.node_def
        if node.op == "Const" and re.search(r"layer_norm[^/]*/Const(_1)?$", node.name)
    ]


def layer_norm_value(weight: str, constants: list[tuple[str, np.ndarray]]) -> np.ndarray | None:
    """The value of ``backbone/.../<layer norm>/gamma`` (or ``beta``) among
    `frozen_layer_norms`: the constants whose scope ends with the weight's path,
    each part perhaps numbered as Keras numbers a layer called more than once
    (``embeddings_1/layer_norm_1/Const``). None if there is none.

    >>> ones, twos = np.ones(2), np.full(2, 2.0)
    >>> found = [("cond/m_1/embeddings_1/layer_norm_1/Const", ones),
    ...          ("m/embeddings/layer_norm/Const_1", twos)]
    >>> layer_norm_value("backbone/embeddings/layer_norm/gamma", found)
    array([1., 1.])
    >>> layer_norm_value("backbone/encoder/group_0_inner_0/feedforward_layer_norm/beta", found)
    """
    *path, kind = weight.split("/")[1:]
    suffix = {"gamma": "Const", "beta": "Const_1"}[kind]
    pattern = re.compile(
        r"(?:^|/)" + "/".join(re.escape(p) + r"(?:_\d+)?" for p in path) + f"/{suffix}$"
    )
    values = [value for name, value in constants if pattern.search(name)]
    if any(not np.array_equal(values[0], v) for v in values[1:]):
        raise ValueError(f"the graph holds different constants for {weight}")
    return values[0] if values else None


def recovered_config(arrays: dict[str, np.ndarray], **fields) -> AlbertConfig:
    """`AlbertConfig` of ``fields`` and what the exported variables' shapes say
    (`SHAPE_FIELDS`); a field given that the shapes contradict is an error."""
    for field, (suffix, axis) in SHAPE_FIELDS.items():
        shapes = {a.shape[axis] for key, a in arrays.items() if key.endswith(suffix)}
        if len(shapes) != 1:
            raise ValueError(f"{field}: {len(shapes)} sizes among the variables *{suffix}")
        value = int(shapes.pop())
        if fields.get(field, value) != value:
            raise ValueError(f"{field}={fields[field]} given, the exported weights say {value}")
        fields[field] = value
    return AlbertConfig(**fields)


def recover_checkpoint(
    saved_model_dir: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    head_arguments: dict | None = None,
    **config_fields,
):
    """Writes the model directory ``saved_model_dir`` was exported from; returns the model.

    ``output_dir`` gets what fine-tuning writes (`albert_tf.save_model` with the
    tokenizer, and ``finetune.json`` as the export recorded it), so
    ``python -m albert_tf.export --checkpoint=output_dir`` exports the same model.

    Args:
        saved_model_dir: a version folder written by `export_saved_model` (float32).
        output_dir: the model directory to write.
        head_arguments: the task head's constructor arguments (a classifier's
            ``num_labels``); none for multiple choice.
        **config_fields: `AlbertConfig` fields the shapes do not tell
            (``num_hidden_layers``, ``share``, ``hidden_act``, ...); others default.

    Raises:
        ValueError: a bfloat16/int8 export, or an exported variable the rebuilt
            model has no place for.
        CheckpointError: a weight of the rebuilt model the export does not hold,
            or holds in another shape.

    Example:
        >>> recover_checkpoint("models/exported/albert_demo_zh/5", "runs/zh_best",
        ...                    num_hidden_layers=4, hidden_act="relu")  # doctest: +SKIP
    """
    from albert_tf.tokenizers import load_tokenizer

    metadata = read_metadata(saved_model_dir)
    if metadata.get("serving_precision", "float32") != "float32":
        raise ValueError(
            f"{saved_model_dir} serves in {metadata['serving_precision']}: its projections "
            "are rounded, only a float32 export holds the trained weights"
        )
    arrays = exported_variables(saved_model_dir)
    config = recovered_config(arrays, **config_fields)
    spec = get_task(metadata.get("task"))
    model = spec.load("model").from_albert_config(config, **(head_arguments or {}))
    # The exported variables carry the TensorFlow names of the model's variables.
    values = {
        name: arrays.pop(key)
        for name, variable in named_weights(model).items()
        if (key := variable_key(variable.value.name)) in arrays
    }
    constants = None
    for name in named_weights(model):
        if name not in values and name.endswith(("/gamma", "/beta")):
            constants = frozen_layer_norms(saved_model_dir) if constants is None else constants
            value = layer_norm_value(name, constants)
            if value is not None:
                values[name] = value
    if arrays:
        raise ValueError(f"{saved_model_dir}: no weight of a {spec.name} model is {sorted(arrays)}")
    # By name, every weight: what the export lacks or misshapes is named in the error.
    assign_weights(model, values)
    tokenizer = load_tokenizer(
        os.path.join(os.fspath(saved_model_dir), "assets.extra", "tokenizer")
    )
    save_model(model, output_dir, tokenizer=tokenizer)
    settings = metadata.get("finetune") or {"task": spec.name}
    write_json_atomic(os.path.join(os.fspath(output_dir), SETTINGS_FILE), settings)
    return model
