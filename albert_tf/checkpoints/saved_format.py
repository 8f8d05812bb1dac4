"""This package's own model format: a directory of config + named weights.

::

    MODEL_DIR/
      config.json     AlbertConfig, Hugging Face dialect (+ "share")
      weights.h5      one dataset per weight, keyed by its stable name
      albert_tf.json  format version and which heads are present
      tokenizer/      optional: the tokenizer's assets

Weights are stored by *name* ("backbone/encoder/group_0_inner_0/..."), not
by position, so a checkpoint converter is a table from a foreign name to one
of ours, files are inspectable with ``h5ls``, and a mismatch is reported by
name rather than as a shape error deep inside Keras.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping

import h5py
import keras
import numpy as np

from albert_tf import storage
from albert_tf.config import AlbertConfig
from albert_tf.storage import write_json_atomic
from albert_tf.tasks import TaskSpec, get_task, head_prefixes

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "weights.h5"
META_FILE = "albert_tf.json"
#: Fine-tuning's settings beside a fine-tuned model (the task, its packing, labels
#: and metrics); the exporters read it.
SETTINGS_FILE = "finetune.json"
FORMAT_VERSION = 1

#: The pretraining heads (a task model loads none of them).
PRETRAINING_HEADS = ("mlm_head/", "sop_head/")


def _heads() -> tuple[str, ...]:
    """Head components a model may carry, by attribute name (tasks registered now included)."""
    return tuple(prefix.rstrip("/") for prefix in (*PRETRAINING_HEADS, *head_prefixes()))


class CheckpointError(ValueError):
    """Weights that do not fit the model they are loaded into."""


def _relative_path(variable: keras.Variable, owner: keras.layers.Layer) -> str:
    # Keras prefixes a variable's path with the scopes it was built in (for a
    # head, the enclosing model's auto-generated name); keep what follows the
    # owner's own name.
    parts = variable.path.split("/")
    if owner.name in parts[:-1]:
        parts = parts[parts.index(owner.name) + 1 :]
    return "/".join(parts)


def named_weights(model: keras.Model) -> dict[str, keras.Variable]:
    """Every weight of a task model under its stable name.

    Names are ``backbone/<path in backbone>`` and ``<head>/<path in head>``.
    A weight shared by several layers (cross-layer sharing) appears once.
    """
    named: dict[str, keras.Variable] = {}
    seen: set[int] = set()
    components = [("backbone", model.backbone)] + [
        (head, getattr(model, head)) for head in _heads() if hasattr(model, head)
    ]
    for prefix, component in components:
        for variable in component.weights:
            if id(variable) in seen:
                continue
            seen.add(id(variable))
            name = f"{prefix}/{_relative_path(variable, component)}"
            if name in named:
                raise RuntimeError(f"Two weights share the name {name!r}.")
            named[name] = variable
    return named


def assign_weights(
    model: keras.Model,
    arrays: Mapping[str, np.ndarray],
    *,
    allow_missing_prefixes: tuple[str, ...] = (),
) -> list[str]:
    """Assigns ``arrays`` by name; every name must match exactly.

    Args:
        model: a built task model.
        arrays: name → array, as `named_weights` names them.
        allow_missing_prefixes: components (e.g. ``("multiple_choice_head/",)``)
            that may be absent from ``arrays`` and keep their initialisation.

    Returns:
        The names left at their initial values (only under allowed prefixes).

    Raises:
        CheckpointError: naming every missing, unexpected or mis-shaped weight.
    """
    targets = named_weights(model)
    missing = [n for n in targets if n not in arrays]
    unexpected = sorted(set(arrays) - set(targets))
    not_allowed = [n for n in missing if not n.startswith(allow_missing_prefixes)]
    shape_errors = [
        f"{n}: checkpoint {tuple(np.shape(arrays[n]))} vs model {tuple(v.shape)}"
        for n, v in targets.items()
        if n in arrays and tuple(np.shape(arrays[n])) != tuple(v.shape)
    ]
    if not_allowed or unexpected or shape_errors:
        lines = []
        if not_allowed:
            lines.append(f"missing from checkpoint ({len(not_allowed)}): {not_allowed}")
        if unexpected:
            lines.append(f"not in model ({len(unexpected)}): {unexpected}")
        if shape_errors:
            lines.append(f"shape mismatch ({len(shape_errors)}): {shape_errors}")
        raise CheckpointError(
            "Checkpoint does not fit the model; check that config.json matches "
            "the weights.\n  " + "\n  ".join(lines)
        )
    for name, variable in targets.items():
        if name in arrays:
            variable.assign(np.asarray(arrays[name], dtype=variable.dtype))
    return missing


def save_model(
    model: keras.Model,
    directory: str | os.PathLike[str],
    *,
    tokenizer=None,
) -> None:
    """Writes ``model`` (pretraining or multiple-choice) to ``directory``.

    Files are written under temporary names and renamed, so an interrupted
    save never leaves a directory that looks complete but is not.
    """
    directory = os.fspath(directory)
    storage.makedirs(directory)
    named = named_weights(model)
    heads = sorted({name.split("/", 1)[0] for name in named} - {"backbone"})
    target = os.path.join(directory, WEIGHTS_FILE)
    # h5py writes local files only: a bucket gets the file built in memory.
    remote = storage.is_remote(target)
    tmp = io.BytesIO() if remote else target + ".tmp"
    with h5py.File(tmp, "w") as f:
        for name, variable in named.items():
            f.create_dataset(name, data=keras.ops.convert_to_numpy(variable))
    if remote:
        storage.write_bytes(target, tmp.getvalue())
    else:
        os.replace(tmp, target)
    model.config.to_hf_json(os.path.join(directory, CONFIG_FILE))
    if tokenizer is not None:
        tokenizer.save(os.path.join(directory, "tokenizer"))
    meta = {"format_version": FORMAT_VERSION, "heads": heads}
    write_json_atomic(os.path.join(directory, META_FILE), meta)


def read_finetune_settings(directory: str | os.PathLike[str]) -> dict:
    """The ``finetune.json`` fine-tuning left in ``directory`` ({} if none)."""
    path = os.path.join(os.fspath(directory), SETTINGS_FILE)
    if not storage.exists(path):
        return {}
    return json.loads(storage.read_text(path))


def read_weights(directory: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """All arrays of a saved model, by name."""
    path = os.path.join(os.fspath(directory), WEIGHTS_FILE)
    arrays: dict[str, np.ndarray] = {}
    source = io.BytesIO(storage.read_bytes(path)) if storage.is_remote(path) else path
    with h5py.File(source, "r") as f:
        f.visititems(
            lambda name, obj: (
                arrays.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None
            )
        )
    return arrays


def read_config(directory: str | os.PathLike[str]) -> AlbertConfig:
    directory = os.fspath(directory)
    for required in (CONFIG_FILE, WEIGHTS_FILE, META_FILE):
        if not storage.exists(os.path.join(directory, required)):
            raise FileNotFoundError(
                f"{directory!r} is not an albert_tf model directory (no {required}). "
                "Create one with `python -m albert_tf.convert` or by pretraining."
            )
    meta = json.loads(storage.read_text(os.path.join(directory, META_FILE)))
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{directory} has format_version {meta.get('format_version')}, this "
            f"albert_tf reads {FORMAT_VERSION}."
        )
    return AlbertConfig.from_json(os.path.join(directory, CONFIG_FILE))


def load(directory: str | os.PathLike[str], *, dtype=None):
    """Loads the pretraining model (backbone + MLM + SOP heads).

    Example:
        >>> model = albert_tf.load("models/albert_base_v2")  # doctest: +SKIP
        >>> out = model({"token_ids": ids, "segment_ids": seg,
        ...              "padding_mask": mask})              # doctest: +SKIP
        >>> out["mlm_logits"].shape                          # doctest: +SKIP
    """
    from albert_tf.models.pretraining_model import AlbertPretrainingModel

    config = read_config(directory)
    model = AlbertPretrainingModel.from_albert_config(config, dtype=dtype)
    arrays = {k: v for k, v in read_weights(directory).items() if not k.startswith(head_prefixes())}
    assign_weights(model, arrays)
    return model


def load_task_model(
    directory: str | os.PathLike[str],
    task: str | TaskSpec,
    *,
    dtype=None,
    head_arguments: dict | None = None,
):
    """Loads ``task``'s model (`albert_tf.tasks`); a fresh head if the directory has none.

    Starting fine-tuning from a pretraining checkpoint is the common case: the
    backbone is loaded and the head is initialised as the config and
    ``head_arguments`` say (a classifier's ``num_labels``, a tagger's ``num_tags``).
    A head the directory holds fixes what it must (the model class's
    `AlbertTask.head_arguments`: a saved classifier gives its number of labels);
    ``head_arguments`` that disagree with it are an error.

    Example:
        >>> model = load_task_model("runs/mc/best", "multiple_choice")  # doctest: +SKIP
        >>> fresh = load_task_model("models/base", "classification",
        ...                         head_arguments={"num_labels": 3})  # doctest: +SKIP
    """
    spec = get_task(task) if isinstance(task, str) else task
    model_class = spec.load("model")
    config = read_config(directory)
    weights = read_weights(directory)
    has_head = any(name.startswith(spec.head_prefix) for name in weights)
    arguments = dict(head_arguments or {})
    if has_head:
        saved = model_class.head_arguments(weights, spec.head_prefix)
        differ = {k: (v, saved[k]) for k, v in arguments.items() if k in saved and saved[k] != v}
        if differ:
            raise CheckpointError(
                f"{directory} holds a {spec.head} with "
                + ", ".join(f"{k}={s}" for k, (_, s) in differ.items())
                + ", not "
                + ", ".join(f"{k}={v}" for k, (v, _) in differ.items())
                + "; start from its pretraining checkpoint for a new head (another label "
                "set or head shape)."
            )
        arguments |= saved
    try:
        model = model_class.from_albert_config(config, dtype=dtype, **arguments)
    except TypeError as e:  # a fresh head that needs what only a saved one fixes
        raise ValueError(
            f"{directory} has no {spec.head} to load a {spec.name} model from ({e})"
        ) from None
    arrays = _task_arrays(weights, spec.head_prefix)
    assign_weights(model, arrays, allow_missing_prefixes=(spec.head_prefix,))
    return model


def _task_arrays(weights: dict, head_prefix: str) -> dict:
    """The arrays a task model with the head ``head_prefix`` loads: the backbone,
    the pooler and its own head, not another task's or pretraining's heads."""
    others = tuple(p for p in (*PRETRAINING_HEADS, *head_prefixes()) if p != head_prefix)
    return {k: v for k, v in weights.items() if not k.startswith(others)}
