"""`export_encoder`: an encoder and a preprocessor SavedModel, as TF Hub's BERT pairs.

For people who build their own Keras models on ALBERT: the two SavedModels follow
the contract of Model Garden's ``export_tfhub`` (``bert_en_uncased_preprocess`` with
an ``..._L-12_H-768_A-12`` encoder), so code written for those runs on these::

    EXPORT/encoder/        __call__(inputs, training) -> pooled_output, sequence_output,
                           encoder_outputs (one per layer application), default;
                           variables, trainable_variables, regularization_losses;
                           mlm: the same with masked_lm_positions -> mlm_logits
                           (when the model has its MLM head);
                           signature serving_default (pooled_output, sequence_output)
    EXPORT/preprocessor/   __call__(sentences) -> input_word_ids, input_mask,
                           input_type_ids [batch, seq_length];
                           tokenize(sentences) -> int32 ragged [batch, (pieces)],
                           tokenize.get_special_tokens_dict();
                           bert_pack_inputs(segments, seq_length) (one or two
                           segments, round-robin trimmed)

``inputs`` is a dict of int32 [batch, seq] tensors ``input_word_ids``, ``input_mask``,
``input_type_ids``; ``training`` is a Python bool (dropout on or off). The pieces of
`tokenize` are flat per sentence (BERT's preprocessor nests them by word); both
packings accept either. Only stock TensorFlow and tensorflow-text ops are saved.
"""

from __future__ import annotations

import os

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf import storage
from albert_tf.checkpoints.saved_format import assign_weights, read_config
from albert_tf.checkpoints.saved_format import read_weights as read_saved_weights
from albert_tf.layers.implementations import set_implementation
from albert_tf.tasks import head_prefixes

#: The encoder's input names, as TF Hub's BERT encoders take them.
ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
#: Where Model Garden's preprocessors pack to unless told otherwise.
DEFAULT_SEQ_LENGTH = 128


def _ids_spec(name: str) -> tf.TensorSpec:
    return tf.TensorSpec([None, None], tf.int32, name=name)


def _backbone_inputs(inputs: dict) -> dict:
    return {
        "token_ids": inputs["input_word_ids"],
        "segment_ids": inputs["input_type_ids"],
        "padding_mask": inputs["input_mask"],
    }


def _trackable(variables) -> list[tf.Variable]:
    """The tf.Variables behind Keras variables (the ones the traced graphs read)."""
    return [v.value if hasattr(v, "value") else v for v in variables]


def _captured(traces) -> list[tf.Variable]:
    found = {id(v): v for trace in traces for v in trace.variables}
    return list(found.values())


def _encoder_object(model, with_mlm: bool) -> tf.__internal__.tracking.AutoTrackable:
    backbone = model.backbone

    def outputs(out: dict) -> dict:
        pooled = out["pooled_output"]
        return {
            "pooled_output": pooled,
            "sequence_output": out["sequence_output"],
            # The embeddings' output first, then one per layer application.
            "encoder_outputs": list(out["hidden_states"][1:]),
            "default": pooled,
        }

    @tf.function(autograph=False)
    def encode(inputs, training=False):
        return outputs(backbone(_backbone_inputs(inputs), training=training))

    specs = {name: _ids_spec(name) for name in ENCODER_INPUTS}
    root = tf.__internal__.tracking.AutoTrackable()
    traces = [encode.get_concrete_function(specs, training=t) for t in (False, True)]
    root.__call__ = encode  # a Python bool ``training``: both traces are saved
    # All the traces read: weights, and dropout's random state (training=True).
    root.variables = _captured(traces)
    root.trainable_variables = _trackable(backbone.trainable_weights)
    root.regularization_losses = []

    @tf.function(input_signature=[specs])
    def serve(inputs):
        out = encode(inputs, training=False)
        return {k: out[k] for k in ("pooled_output", "sequence_output")}

    root.serve = serve
    if with_mlm:

        @tf.function(autograph=False)
        def mlm(inputs, training=False):
            features = _backbone_inputs(inputs)
            features["mask_positions"] = inputs["masked_lm_positions"]
            out = model(features, training=training)
            return {**outputs(out), "mlm_logits": out["mlm_logits"]}

        mlm_specs = {**specs, "masked_lm_positions": _ids_spec("masked_lm_positions")}
        mlm_traces = [mlm.get_concrete_function(mlm_specs, training=t) for t in (False, True)]
        head = tf.__internal__.tracking.AutoTrackable()
        head.__call__ = mlm
        head.variables = _captured(mlm_traces)
        head.trainable_variables = _trackable(model.trainable_weights)
        head.regularization_losses = []
        root.mlm = head
    return root


def _pack(tokenizer, segments, seq_length):
    """[CLS] a [SEP] (b [SEP]), round-robin trimmed to ``seq_length``, padded."""
    segments = [s.merge_dims(1, -1) if s.ragged_rank > 1 else s for s in segments]
    segments = [tf.cast(s, tf.int32) for s in segments]
    budget = seq_length - (len(segments) + 1)
    trimmed = tf_text.RoundRobinTrimmer(budget).trim(segments)
    ids, types = tf_text.combine_segments(
        trimmed, start_of_sequence_id=tokenizer.cls_id, end_of_segment_id=tokenizer.sep_id
    )
    word_ids, mask = tf_text.pad_model_inputs(ids, seq_length, pad_value=tokenizer.pad_id)
    type_ids, _ = tf_text.pad_model_inputs(types, seq_length, pad_value=0)
    return {
        "input_word_ids": tf.cast(word_ids, tf.int32),
        "input_mask": tf.cast(mask, tf.int32),
        "input_type_ids": tf.cast(type_ids, tf.int32),
    }


def _preprocessor_object(tokenizer, seq_length: int) -> tf.__internal__.tracking.AutoTrackable:
    sentences = tf.TensorSpec([None], tf.string, name="sentences")

    @tf.function(input_signature=[sentences])
    def tokenize(texts):
        return tokenizer.tokenize(texts)

    special = {
        "vocab_size": tokenizer.vocabulary_size,
        "start_of_sequence_id": tokenizer.cls_id,
        "end_of_segment_id": tokenizer.sep_id,
        "padding_id": tokenizer.pad_id,
        "mask_id": tokenizer.mask_id,
    }

    @tf.function(input_signature=[])
    def special_tokens():
        return {k: tf.constant(v, tf.int32) for k, v in special.items()}

    @tf.function(autograph=False)
    def pack(inputs, seq_length=seq_length):
        return _pack(tokenizer, list(inputs), seq_length)

    length = tf.TensorSpec([], tf.int32, name="seq_length")
    for count in (1, 2):
        for ragged_rank in (1, 2):
            piece = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank)
            pack.get_concrete_function([piece] * count, length)

    @tf.function(input_signature=[sentences])
    def preprocess(texts):
        return _pack(tokenizer, [tokenizer.tokenize(texts)], seq_length)

    tokenize_object = tf.__internal__.tracking.AutoTrackable()
    tokenize_object.__call__ = tokenize
    tokenize_object.get_special_tokens_dict = special_tokens
    root = tf.__internal__.tracking.AutoTrackable()
    root.tokenizer = tokenizer  # its lookup tables and models, which the graphs use
    root.tokenize = tokenize_object
    root.bert_pack_inputs = pack
    root.__call__ = preprocess
    return root, preprocess


def export_encoder(
    model_dir: str | os.PathLike[str],
    export_dir: str | os.PathLike[str],
    *,
    tokenizer_dir: str | None = None,
    seq_length: int | None = None,
) -> dict[str, str]:
    """Writes ``export_dir/encoder`` and ``export_dir/preprocessor`` from a model directory.

    Args:
        model_dir: this package's model format (pretraining or fine-tuned; task
            heads are left out, the MLM head becomes the encoder's ``mlm``).
        export_dir: a new or empty folder (local or a URL).
        tokenizer_dir: default ``model_dir/tokenizer``.
        seq_length: the preprocessor's default packing length (default
            `DEFAULT_SEQ_LENGTH`, at most the model's max_position_embeddings).

    Returns:
        ``{"encoder": path, "preprocessor": path, "mlm": "yes" or "no"}``.

    Example:
        >>> export_encoder("runs/base/final", "exported/albert_base_hub")  # doctest: +SKIP
    """
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretraining_model import AlbertPretrainingModel
    from albert_tf.serving.export import load_matching_tokenizer

    model_dir, export_dir = os.fspath(model_dir), os.fspath(export_dir)
    config = read_config(model_dir)
    if seq_length is None:
        seq_length = min(DEFAULT_SEQ_LENGTH, config.max_position_embeddings)
    if seq_length < 3 or seq_length > config.max_position_embeddings:
        raise ValueError(
            f"seq_length={seq_length}: must be 3 to max_position_embeddings="
            f"{config.max_position_embeddings}"
        )
    arrays = {
        k: v for k, v in read_saved_weights(model_dir).items() if not k.startswith(head_prefixes())
    }
    with_mlm = any(name.startswith("mlm_head/") for name in arrays)
    model = AlbertPretrainingModel(AlbertBackbone(config, output_hidden_states=True))
    assign_weights(model, arrays, allow_missing_prefixes=("mlm_head/", "sop_head/"))
    set_implementation(model, "serving")  # stock ops: no albert_tf kernels in the graph
    tokenizer = load_matching_tokenizer(
        tokenizer_dir or os.path.join(model_dir, "tokenizer"), model
    )
    for name in ("encoder", "preprocessor"):
        target = os.path.join(export_dir, name)
        if storage.exists(target) and storage.listdir(target):
            raise FileExistsError(f"{target} exists and is not empty; pick another export_dir")

    # Both traced before either is written: a failure leaves no half export.
    encoder = _encoder_object(model, with_mlm)
    preprocessor, preprocess = _preprocessor_object(tokenizer, seq_length)
    encoder_dir = os.path.join(export_dir, "encoder")
    preprocessor_dir = os.path.join(export_dir, "preprocessor")
    tf.saved_model.save(encoder, encoder_dir, signatures={"serving_default": encoder.serve})
    tf.saved_model.save(preprocessor, preprocessor_dir, signatures={"serving_default": preprocess})
    return {
        "encoder": encoder_dir,
        "preprocessor": preprocessor_dir,
        "mlm": "yes" if with_mlm else "no",
    }
