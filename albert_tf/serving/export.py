"""`export_saved_model`: a model directory → a versioned SavedModel for TF Serving.

Layout written (TF Serving watches ``BASE/NAME`` and serves the highest
numeric version)::

    BASE/NAME/<version>/
      saved_model.pb, variables/      the task's signatures: serving_default (raw
                                      text), tokenize, and score_ids (token ids)
                                      except for tagging
      assets/                         tokenizer assets the graph reads (vocab.txt)
      assets.extra/albert_tf.json     task, settings, request limits and provenance
                                      (ignored by TF Serving)
      assets.extra/labels.json        a classifier's label names by class index, a
                                      tagger's tags
      assets.extra/model_card.json    what the model was trained on and how it scored
                                      (when given; the Streamlit app shows it)
      assets.extra/tokenizer/         the tokenizer, for clients that tokenise themselves

With ``jit_compile=True`` the encoder and head run as one XLA cluster (`XlaCompiledModel`);
tokenisation and decoding stay ordinary TensorFlow ops.
"""

from __future__ import annotations

import functools
import os
import time
import warnings

import tensorflow as tf

from albert_tf import storage
from albert_tf.checkpoints.saved_format import load_task_model, read_finetune_settings
from albert_tf.hardware import cpu_flags
from albert_tf.layers.implementations import set_implementation
from albert_tf.serving.precision import (
    RELEVANT_CPU_FLAGS,
    load_for_serving,
    precision_warning,
)
from albert_tf.storage import write_json_atomic
from albert_tf.tasks import get_task

METADATA_FILE = "albert_tf.json"
MODEL_CARD_FILE = "model_card.json"
DEFAULT_MAX_SEQ_LENGTH = 512


def tokenizer_path(checkpoint_dir: str, tokenizer_dir: str | os.PathLike[str] | None = None) -> str:
    """``tokenizer_dir``, else ``checkpoint_dir/tokenizer``; an error naming the fix if absent."""
    path = os.fspath(tokenizer_dir or os.path.join(checkpoint_dir, "tokenizer"))
    if not storage.isdir(path):
        raise FileNotFoundError(
            f"no tokenizer at {path!r}; pass tokenizer_dir (--tokenizer_dir) or "
            "save the model with save_model(..., tokenizer=...)"
        )
    return path


def load_matching_tokenizer(path: str, model):
    """The tokenizer at ``path``, checked to have ``model``'s vocabulary size."""
    from albert_tf.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(path)
    if tokenizer.vocabulary_size != model.config.vocab_size:
        raise ValueError(
            f"tokenizer has {tokenizer.vocabulary_size} pieces but the model's "
            f"vocab_size is {model.config.vocab_size}: wrong tokenizer for this checkpoint"
        )
    return tokenizer


def default_max_seq_length(settings: dict, model) -> int:
    """Fine-tuning's ``max_seq_length``, else 512 capped by the model's positions."""
    limit = model.config.max_position_embeddings
    return settings.get("max_seq_length", min(DEFAULT_MAX_SEQ_LENGTH, limit))


def next_version(export_dir: str | os.PathLike[str]) -> int:
    """1 + the highest numeric version under ``export_dir`` (1 when none).

    >>> import tempfile; base = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(base, "7")); os.makedirs(os.path.join(base, "x"))
    >>> next_version(base)
    8
    """
    export_dir = os.fspath(export_dir)
    if not storage.isdir(export_dir):
        return 1
    versions = [int(n) for n in storage.listdir(export_dir) if n.isdigit()]
    return max(versions, default=0) + 1


def signature_root(
    module: tf.Module, functions: dict[str, tf.types.experimental.PolymorphicFunction]
) -> tuple[tf.Module, dict[str, tf.types.experimental.ConcreteFunction]]:
    """What to save: the traced signatures and only the state they read.

    Saving ``module`` itself would write every variable of its Keras model.
    The bfloat16 and int8 exports leave the float32 kernels they replaced in
    that model (checkpoints and conversion still see them), but their graphs
    never read them: saved, they made those SavedModels larger than the
    float32 one. The root holds the variables the traced graphs capture (the
    lower-precision projections' included), the tokenizer, whose resources
    the graphs use, and the module's other state its ``RESOURCES`` names (a
    multiple-choice export's overlap table).
    """
    concrete = {name: fn.get_concrete_function() for name, fn in functions.items()}
    used = {id(v): v for fn in concrete.values() for v in fn.variables}
    root = tf.Module(name=module.name)
    root.tokenizer = module.tokenizer
    root.serving_variables = list(used.values())
    root.resources = [
        getattr(module, name)
        for name in getattr(module, "RESOURCES", ())
        if getattr(module, name) is not None
    ]
    return root, concrete


#: XLA compiles once per input shape. The compiled model pads the sequence axis to a
#: multiple of `XLA_LENGTH_STEP` (capped at the model's positions), and the batch axis
#: to a power of two up to `XLA_BATCH_STEP`, then to a multiple of it: a server meets
#: a few dozen shapes, not one per request, and wastes at most a few rows a batch.
XLA_LENGTH_STEP = 32
XLA_BATCH_STEP = 32


def padded_length(length: tf.Tensor, cap: int) -> tf.Tensor:
    """The sequence length the XLA-compiled model runs ``length`` at.

    >>> [int(padded_length(tf.constant(n), 128)) for n in (1, 32, 33, 120, 130)]
    [32, 32, 64, 128, 130]
    """
    rounded = (length + XLA_LENGTH_STEP - 1) // XLA_LENGTH_STEP * XLA_LENGTH_STEP
    return tf.maximum(tf.minimum(rounded, cap), length)


def padded_batch(rows: tf.Tensor) -> tf.Tensor:
    """The batch size the XLA-compiled model runs ``rows`` at.

    >>> [int(padded_batch(tf.constant(n))) for n in (1, 3, 8, 17, 33, 262)]
    [1, 4, 8, 32, 64, 288]
    """
    step = XLA_BATCH_STEP
    powers = tf.constant([2**i for i in range(step.bit_length())])  # 1, 2, ... step
    power = tf.reduce_min(tf.where(powers >= rows, powers, step))
    return tf.where(rows <= step, tf.maximum(power, rows), (rows + step - 1) // step * step)


class XlaCompiledModel:
    """A task model whose forward pass the serving graph runs XLA-compiled.

    The serving module calls it as it calls the model (``model(features,
    training=False)``) and reads the model's other attributes through it (a
    classifier's ``num_labels``, a tagger's head). The call pads the packed ids
    (`padded_length`, `padded_batch`; padding is masked out, padded rows are
    dropped again) and runs one
    ``tf.function(jit_compile=True)``, which the SavedModel stores with XLA's
    must-compile mark. XLA fuses what oneDNN's rewrites leave as separate passes
    (bias + GELU, residual + LayerNorm) but compiles once per input shape, on the
    first request of that shape: the padding bounds how many there are.
    """

    def __init__(self, model):
        self._model = model
        self._forward = tf.function(
            lambda features: model(features, training=False), jit_compile=True
        )

    def __call__(self, features: dict[str, tf.Tensor], training: bool = False) -> tf.Tensor:
        if training:
            raise ValueError("an XLA-compiled serving model runs for inference only")
        some = next(iter(features.values()))
        shape = tf.shape(some)
        rank = some.shape.rank
        length = padded_length(shape[-1], self._model.config.max_position_embeddings)
        batch = padded_batch(shape[0])
        pads = tf.stack([[0, batch - shape[0]]] + [[0, 0]] * (rank - 2) + [[0, length - shape[-1]]])
        outputs = self._forward({k: tf.pad(v, pads) for k, v in features.items()})
        outputs = outputs[: shape[0]]
        # Per-piece outputs (span QA's logits, a tagger's) lose the padded positions.
        if outputs.shape.rank == rank + 1:
            outputs = outputs[..., : shape[-1], :]
        return outputs

    def __getattr__(self, name: str):
        if name.startswith("_"):  # tf.Module's tracking probes private names
            raise AttributeError(name)
        return getattr(self._model, name)


def export_saved_model(
    checkpoint_dir: str | os.PathLike[str],
    export_dir: str | os.PathLike[str],
    *,
    tokenizer_dir: str | os.PathLike[str] | None = None,
    version: int | None = None,
    max_seq_length: int | None = None,
    max_qa_length: int | None = None,
    model_card: dict | None = None,
    serving_precision: str = "float32",
    jit_compile: bool = False,
) -> str:
    """Writes ``export_dir/<version>/`` and returns its path.

    The task is the one fine-tuning recorded in ``finetune.json`` (multiple
    choice when there is no record); its serving module (`albert_tf.tasks`)
    names the signatures.

    Args:
        checkpoint_dir: a fine-tuned model directory (`albert_tf.load_task_model`
            reads it).
        export_dir: ``BASE/NAME``; the version folder is created inside.
        tokenizer_dir: defaults to ``checkpoint_dir/tokenizer``.
        version: defaults to `next_version`; an existing version is an error.
        max_seq_length, max_qa_length: default to the fine-tuning settings
            (``finetune.json``), else 512 / 128 capped by the model's positions.
        model_card: JSON-serialisable facts for people (data, training time,
            held-out accuracy against chance), written to
            ``assets.extra/model_card.json``.
        serving_precision: ``"float32"``, ``"bfloat16"`` or ``"int8"``
            (`albert_tf.serving.precision`); the signatures are the same.
            A precision this CPU has no instructions for is exported with a
            warning: it would be slower than float32 here.
        jit_compile: run the model's forward pass XLA-compiled (`XlaCompiledModel`);
            float32 and bfloat16 only (XLA has no kernel for the int8 export's
            oneDNN matmul). Loading needs TensorFlow's XLA CPU JIT, which the
            ``tensorflow`` wheel has; TF Serving runs it only when started with
            ``--xla_cpu_compilation_enabled`` (docs/serving.md).

    The SavedModel is written under a hidden temporary name and renamed, so
    a TF Serving instance watching ``export_dir`` never sees half a model.

    Example:
        >>> export_saved_model("runs/mc/best", "exported/albert_mc")  # doctest: +SKIP
        'exported/albert_mc/1'
    """
    checkpoint_dir, export_dir = os.fspath(checkpoint_dir), os.fspath(export_dir)
    if jit_compile and serving_precision == "int8":
        raise ValueError(
            "jit_compile=True with serving_precision='int8': XLA has no kernel for the "
            "int8 export's oneDNN matmul (QuantizedMatMulWithBiasAndDequantize); "
            "compile float32 or bfloat16"
        )
    tokenizer_dir = tokenizer_path(checkpoint_dir, tokenizer_dir)
    settings = read_finetune_settings(checkpoint_dir)
    task = get_task(settings.get("task"))
    loader = functools.partial(load_task_model, task=task)
    served = load_for_serving(loader, checkpoint_dir, serving_precision)
    model, blocks = served.model, served.blocks
    # Stock ops in the form oneDNN fuses: TF Serving has no albert_tf kernels.
    set_implementation(model, "serving")
    warning = precision_warning(serving_precision)
    if warning:
        warnings.warn(f"--serving_precision={serving_precision}: {warning}", stacklevel=2)
    tokenizer = load_matching_tokenizer(tokenizer_dir, model)
    max_seq_length = max_seq_length or default_max_seq_length(settings, model)
    module, task_metadata, extra_files = task.load("serving").for_export(
        model, tokenizer, settings, max_seq_length, max_qa_length
    )
    if jit_compile:
        module.model = XlaCompiledModel(module.model)

    version = next_version(export_dir) if version is None else int(version)
    final = os.path.join(export_dir, str(version))
    if storage.exists(final):
        raise FileExistsError(f"{final} exists; pick another --version or remove it")
    # Local paths and gs:// (file://, ram://) alike: TensorFlow writes the SavedModel.
    storage.makedirs(export_dir)
    tmp = os.path.join(export_dir, f".tmp-{version}-{os.getpid()}")
    storage.rmtree(tmp, ignore_errors=True)
    root, signatures = signature_root(
        module, {name: getattr(module, name) for name in module.SIGNATURES}
    )
    tf.saved_model.save(root, tmp, signatures=signatures)
    extra = os.path.join(tmp, "assets.extra")
    tokenizer.save(os.path.join(extra, "tokenizer"))
    metadata = {
        "task": task.name,
        "tokenizer": tokenizer.kind,
        "language": settings.get("language", "zh" if tokenizer.kind == "wordpiece" else "en"),
        "max_seq_length": max_seq_length,
        **task_metadata,
        "serving_precision": serving_precision,
        "projection_precision": blocks,
        "jit_compile": jit_compile,
        # Whether the precision suits a CPU depends on these (docs/serving.md).
        "export_cpu_flags": sorted(cpu_flags() & RELEVANT_CPU_FLAGS),
        "vocab_size": model.config.vocab_size,
        # A bucket URL names the checkpoint anywhere; a local path names one machine's
        # folder, which a shipped model must not carry.
        **(
            {"checkpoint": os.fspath(checkpoint_dir)}
            if storage.is_remote(os.fspath(checkpoint_dir))
            else {}
        ),
        "finetune": settings,
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "tensorflow": tf.__version__,
    }
    write_json_atomic(os.path.join(extra, METADATA_FILE), metadata)
    for name, value in extra_files.items():
        write_json_atomic(os.path.join(extra, name), value)
    if model_card is not None:
        write_json_atomic(os.path.join(extra, MODEL_CARD_FILE), model_card)
    # The version appears whole: TF Serving polls the base path and loads a version
    # once its saved_model.pb exists, which a remote copy writes last.
    storage.move_tree(tmp, final, last=("saved_model.pb", "fingerprint.pb"))
    return final
