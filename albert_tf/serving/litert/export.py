"""`export_litert`: a fine-tuned multiple-choice model → one ``.tflite`` file."""

from __future__ import annotations

import os
import tempfile

import tensorflow as tf

from albert_tf import storage
from albert_tf.layers.implementations import set_implementation
from albert_tf.serving.export import (
    default_max_seq_length,
    load_matching_tokenizer,
    read_finetune_settings,
    tokenizer_path,
)
from albert_tf.serving.litert.module import LiteRTModule
from albert_tf.tasks import get_task
from albert_tf.tasks.multiple_choice.serving import DEFAULT_MAX_QA_LENGTH

PRECISIONS = ("float32", "int8")


def _frozen(function):
    """``function`` (a `tf.function` with an input signature) with its variables
    as constants, under its own name (the converter names signatures after them)."""
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    concrete = function.get_concrete_function()
    constant = convert_variables_to_constants_v2(concrete)
    spec = concrete.structured_input_signature[0]

    def call(*args):
        flat = constant(*args)
        return tf.nest.pack_sequence_as(concrete.structured_outputs, flat)

    return tf.function(call, input_signature=spec)


# -- export ------------------------------------------------------------------------


def export_litert(
    checkpoint_dir: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    *,
    precision: str = "float32",
    tokenizer_dir: str | os.PathLike[str] | None = None,
    max_seq_length: int | None = None,
    max_options: int = 4,
) -> str:
    """Writes the raw-text multiple-choice ``.tflite`` file and returns its path.

    Args:
        checkpoint_dir: a fine-tuned multiple-choice model directory.
        output_path: the ``.tflite`` file to write (its folder is created); a local
            path or a bucket URL (``gs://``, ``file://``).
        precision: ``"float32"``, or ``"int8"`` for dynamic-range quantisation
            (int8 weights, float activations; about 4x smaller).
        tokenizer_dir: defaults to ``checkpoint_dir/tokenizer``.
        max_seq_length: defaults to the fine-tuning setting (``finetune.json``),
            else 512 capped by the model's positions. ``max_qa_length`` and
            ``context_keep`` always come from ``finetune.json`` (else 128 and
            "start"), as for `albert_tf.serving.export_saved_model`.
        max_options: the fixed width of ``options`` (pad with empty strings);
            fixed so that every encoder shape is static and XNNPACK runs it all.

    Example:
        >>> export_litert("runs/mc/best", "albert_mc_int8.tflite", precision="int8")
        ... # doctest: +SKIP
        'albert_mc_int8.tflite'
    """
    from albert_tf.checkpoints.saved_format import load_task_model

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    checkpoint_dir, output_path = os.fspath(checkpoint_dir), os.fspath(output_path)
    tokenizer_dir = tokenizer_path(checkpoint_dir, tokenizer_dir)
    settings = read_finetune_settings(checkpoint_dir)
    task = get_task(settings.get("task"))
    if not task.litert:
        raise ValueError(f"the LiteRT export is for multiple choice, not {task.name!r}")
    model = load_task_model(checkpoint_dir, task)
    tokenizer = load_matching_tokenizer(tokenizer_dir, model)
    max_seq_length = max_seq_length or default_max_seq_length(settings, model)
    max_qa_length = min(settings.get("max_qa_length", DEFAULT_MAX_QA_LENGTH), max_seq_length - 3)
    module = LiteRTModule(
        model,
        tokenizer,
        max_seq_length,
        max_qa_length,
        settings.get("context_keep", "start"),
        max_options=max_options,
    )
    # Stock ops only: LiteRT has no albert_tf kernels. The weights are frozen
    # into constants, which XNNPACK needs and int8 quantisation acts on.
    set_implementation(model, "serving")
    with tempfile.TemporaryDirectory() as tmp:
        frozen = tf.Module()
        for name in ("serving_default", "tokenize"):
            setattr(frozen, name, _frozen(getattr(module, name)))
        # Via a SavedModel: the converter keeps both signatures' names.
        signatures = {"serving_default": frozen.serving_default, "tokenize": frozen.tokenize}
        tf.saved_model.save(
            frozen,
            tmp,
            signatures=signatures,
            options=tf.saved_model.SaveOptions(experimental_custom_gradients=False),
        )
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp, signature_keys=list(signatures))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.allow_custom_ops = True  # tensorflow-text's TFLite kernels
        if precision == "int8":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        flatbuffer = converter.convert()
    storage.make_parent(output_path)
    storage.write_bytes(output_path, flatbuffer)
    return output_path
