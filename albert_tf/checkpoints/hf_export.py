"""A model directory of this package, written in Hugging Face's ALBERT layout.

The inverse of `albert_tf.checkpoints.convert.convert_hf`, walking the same
name table (`albert_tf.checkpoints.name_table`), with NumPy alone (no torch):

* ``config.json``: ``model_type: albert``, the task class in ``architectures``,
  every field Hugging Face's ``AlbertConfig`` reads, labels for a classifier;
* ``model.safetensors``: backbone weights under ``albert.``, the heads under
  their Hugging Face names;
* the tokenizer: ``spiece.model`` with ``AlbertTokenizer`` settings, or a
  ``vocab.txt`` with ``tokenizer_class: BertTokenizer`` (as the Chinese ALBERTs
  on the Hub ship theirs).

What Hugging Face cannot express is refused with an error that names it:
sharing other than ``all``, an activation its ``ACT2FN`` lacks, a SentencePiece
tokenizer without ALBERT's digit-comma split.
"""

from __future__ import annotations

import os

import numpy as np

from albert_tf import storage
from albert_tf.checkpoints.name_table import weight_table
from albert_tf.checkpoints.saved_format import (
    PRETRAINING_HEADS,
    CheckpointError,
    read_config,
    read_finetune_settings,
    read_weights,
)
from albert_tf.checkpoints.torch_free_readers import write_safetensors
from albert_tf.config import AlbertConfig
from albert_tf.storage import write_json_atomic
from albert_tf.tasks import TaskSpec, task_of_heads

#: Hugging Face's class of a pretraining model (a task's is in its `TaskSpec`).
PRETRAINING_ARCHITECTURE = "AlbertForPreTraining"
#: The LayerNorm epsilon keras-hub's AlbertBackbone hard-codes.
KERAS_HUB_LAYER_NORM_EPS = 1e-12
#: Activations Hugging Face's ``ACT2FN`` has under these names.
HF_ACTIVATIONS = frozenset({"gelu_new", "gelu", "relu", "tanh", "silu", "linear"})


def to_hf(array: np.ndarray, layout: str, config: AlbertConfig) -> np.ndarray:
    """Our array in PyTorch's layout: the inverse of `name_table.to_ours`
    with ``torch_layout=True`` (dense weights [out, in])."""
    h = config.hidden_size
    if layout == "copy":
        return array
    if layout == "dense":
        return array.T
    if layout in ("qkv_kernel", "attention_output_kernel"):
        return array.reshape(h, h).T  # [H, N, D] or [N, D, H] → [in, out] → [out, in]
    if layout == "qkv_bias":
        return array.reshape(h)
    raise ValueError(f"Unknown layout {layout!r}")


def task_of(heads: list[str]) -> TaskSpec | None:
    """The task whose head a model directory holds (None: a pretraining model)."""
    return task_of_heads(heads)


def architecture(task: TaskSpec | None) -> str:
    return PRETRAINING_ARCHITECTURE if task is None else task.hf_architecture


def _heads(task: TaskSpec | None) -> tuple[str, ...]:
    return PRETRAINING_HEADS if task is None else (task.head_prefix,)


def check_expressible(config: AlbertConfig) -> None:
    """Raises what Hugging Face's ALBERT cannot represent, naming it."""
    if config.share != "all":
        kinds = {"attention": "attention-only", "ffn": "FFN-only", "none": "no"}
        raise CheckpointError(
            f"share={config.share!r}: Hugging Face's ALBERT shares whole layers in groups "
            f"(share='all' with num_hidden_groups); this exporter writes no "
            f"{kinds.get(config.share, config.share)} sharing (attention-only and FFN-only "
            "sharing have no Hugging Face form at all), so the model stays in albert_tf's "
            "format."
        )
    if config.embedding_layout != "albert":
        raise CheckpointError(
            f"embedding_layout={config.embedding_layout!r}: Hugging Face's ALBERT adds "
            "position and segment embeddings at width E before its projection (and its "
            "MLM head decodes at width E); this model projects first, so it has no "
            "Hugging Face form and stays in albert_tf's format."
        )
    if config.hidden_act not in HF_ACTIVATIONS:
        raise CheckpointError(
            f"hidden_act={config.hidden_act!r} has no Hugging Face name "
            f"({', '.join(sorted(HF_ACTIVATIONS))})."
        )


def hf_state_dict(
    config: AlbertConfig, arrays: dict[str, np.ndarray], task: TaskSpec | None
) -> dict:
    """Hugging Face names → arrays for the class of ``task`` (None: pretraining)."""
    check_expressible(config)
    heads = _heads(task)
    table = weight_table(config)
    mapped = {row.ours for row in table}
    unmapped = sorted(n for n in arrays if heads and n.startswith(heads) and n not in mapped)
    if unmapped:
        # A tagger head's BiLSTM or CRF (finetune --tagger_lstm_units, --tagger_crf), say.
        raise CheckpointError(
            f"Hugging Face's {architecture(task)} has no place for {len(unmapped)} weights of "
            f"this head ({', '.join(unmapped[:3])}, ...): keep the model in albert_tf's "
            "format or its SavedModel, or train a head without them"
        )
    out: dict[str, np.ndarray] = {}
    for row in table:
        if row.ours.startswith("backbone/"):
            name = f"albert.{row.hf}"
        elif row.ours.startswith(heads):
            name = row.hf
        else:
            continue
        if row.ours not in arrays:
            raise CheckpointError(f"the model directory lacks {row.ours}")
        out[name] = np.ascontiguousarray(to_hf(arrays[row.ours], row.layout, config), np.float32)
    if not config.has_embedding_projection:
        # Hugging Face always projects E → H; with E == H ours is the identity.
        h = config.hidden_size
        out["albert.encoder.embedding_hidden_mapping_in.weight"] = np.eye(h, dtype=np.float32)
        out["albert.encoder.embedding_hidden_mapping_in.bias"] = np.zeros(h, np.float32)
    return out


def hf_config(
    config: AlbertConfig,
    task: TaskSpec | None,
    tokenizer=None,
    label_names: list[str] | None = None,
    num_labels: int = 0,
) -> dict:
    """``config.json`` for Hugging Face (and keras-hub's transformers loader).

    A classifier's ``num_labels`` comes from its head; ``label_names`` (from
    ``finetune.json``) name them when there are as many, else ``LABEL_i``.
    """
    check_expressible(config)
    data = config.to_hf_dict()
    data.pop("share")
    data.update(
        architectures=[architecture(task)],
        model_type="albert",
        position_embedding_type="absolute",
        torch_dtype="float32",
    )
    if tokenizer is not None:
        # Hugging Face's bos/eos of ALBERT are [CLS] and [SEP].
        data.update(
            pad_token_id=tokenizer.pad_id,
            bos_token_id=tokenizer.cls_id,
            eos_token_id=tokenizer.sep_id,
        )
    if task is not None and task.labelled:
        names = list(label_names or [])
        if len(names) != num_labels:
            names = [f"LABEL_{i}" for i in range(num_labels)]
        data["id2label"] = {str(i): name for i, name in enumerate(names)}
        data["label2id"] = {name: i for i, name in enumerate(names)}
        if num_labels == 1:  # one score: a regression model
            data["problem_type"] = "regression"
    return data


def check_hf_tokenizer(tokenizer) -> None:
    """Raises when Hugging Face's tokenizer would give other ids than ``tokenizer``."""
    if tokenizer.kind == "sentencepiece" and not tokenizer.split_digit_comma:
        raise CheckpointError(
            "this SentencePiece tokenizer does not split digits before commas, which "
            "Hugging Face's AlbertTokenizer always does: the ids would differ"
        )
    if tokenizer.kind == "sentencepiece" and tokenizer.fold_punctuation:
        from albert_tf.tokenizers.normalization import check_foldable

        try:
            check_foldable(tokenizer._model_proto)
        except ValueError as err:
            raise CheckpointError(f"{err}: Hugging Face's ids would differ") from err


def _fast_wordpiece_file(tokenizer) -> dict:
    """``tokenizer.json`` of Hugging Face's fast BERT tokenizer for a WordPiece
    tokenizer with ``nfkc``: NFKC, then BERT's normaliser, as here."""
    vocab = tokenizer.vocabulary
    special = [tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id]
    special.append(tokenizer.mask_id)
    cls, sep = vocab[tokenizer.cls_id], vocab[tokenizer.sep_id]

    def piece(name: str, type_id: int) -> dict:
        return {"SpecialToken": {"id": name, "type_id": type_id}}

    def sequence(name: str, type_id: int) -> dict:
        return {"Sequence": {"id": name, "type_id": type_id}}

    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": vocab[i],
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i in sorted(special)
        ],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {"type": "NFKC"},
                {
                    "type": "BertNormalizer",
                    "clean_text": True,
                    "handle_chinese_chars": tokenizer.tokenize_chinese_chars,
                    "strip_accents": None,
                    "lowercase": tokenizer.lower_case,
                },
            ],
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [piece(cls, 0), sequence("A", 0), piece(sep, 0)],
            "pair": [
                piece(cls, 0),
                sequence("A", 0),
                piece(sep, 0),
                sequence("B", 1),
                piece(sep, 1),
            ],
            "special_tokens": {
                name: {"id": name, "ids": [vocab.index(name)], "tokens": [name]}
                for name in (cls, sep)
            },
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": vocab[tokenizer.unk_id],
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": tokenizer.max_input_chars_per_word,
            "vocab": {token: i for i, token in enumerate(vocab)},
        },
    }


def write_hf_tokenizer(tokenizer, directory: str, max_length: int) -> list[str]:
    """The tokenizer's files in Hugging Face's layout; returns their names."""
    vocab = tokenizer.vocabulary
    specials = {
        "unk_token": vocab[tokenizer.unk_id],
        "sep_token": vocab[tokenizer.sep_id],
        "pad_token": vocab[tokenizer.pad_id],
        "cls_token": vocab[tokenizer.cls_id],
        "mask_token": vocab[tokenizer.mask_id],
    }
    settings = {"model_max_length": max_length, **specials}
    check_hf_tokenizer(tokenizer)
    if tokenizer.kind == "sentencepiece":
        proto = tokenizer._model_proto
        if getattr(tokenizer, "fold_punctuation", False):
            # AlbertTokenizer has no such step; the model's own normaliser can fold
            # (check_hf_tokenizer made sure it can).
            from albert_tf.tokenizers.normalization import typography_folding_model

            proto = typography_folding_model(proto)
        storage.write_bytes(os.path.join(directory, "spiece.model"), proto)
        settings.update(
            tokenizer_class="AlbertTokenizer",
            do_lower_case=tokenizer.lower_case,
            remove_space=tokenizer.remove_space,
            keep_accents=tokenizer.keep_accents,
            bos_token=specials["cls_token"],
            eos_token=specials["sep_token"],
        )
        files = ["spiece.model"]
    else:
        storage.write_bytes(
            os.path.join(directory, "vocab.txt"), ("\n".join(vocab) + "\n").encode("utf-8")
        )
        settings.update(
            tokenizer_class="BertTokenizer",
            do_lower_case=tokenizer.lower_case,
            tokenize_chinese_chars=tokenizer.tokenize_chinese_chars,
        )
        files = ["vocab.txt"]
        if getattr(tokenizer, "nfkc", False):
            # BertTokenizer has no NFKC step; the fast tokenizer's file can say it,
            # and AutoTokenizer loads the fast tokenizer from it.
            write_json_atomic(
                os.path.join(directory, "tokenizer.json"), _fast_wordpiece_file(tokenizer)
            )
            files.append("tokenizer.json")
    write_json_atomic(os.path.join(directory, "tokenizer_config.json"), settings)
    write_json_atomic(os.path.join(directory, "special_tokens_map.json"), specials)
    return [*files, "tokenizer_config.json", "special_tokens_map.json"]


def export_hf(model_dir: str, output_dir: str) -> dict:
    """Writes the albert_tf model directory ``model_dir`` in Hugging Face's layout.

    Returns what was written: ``architecture``, ``tensors``, ``files``.
    """
    from albert_tf.tokenizers import load_tokenizer

    config = read_config(model_dir)
    check_expressible(config)
    arrays = read_weights(model_dir)
    heads = sorted({name.split("/", 1)[0] for name in arrays} - {"backbone"})
    task = task_of(heads)
    tokenizer_dir = os.path.join(model_dir, "tokenizer")
    tokenizer = load_tokenizer(tokenizer_dir) if storage.isdir(tokenizer_dir) else None
    label_names = read_finetune_settings(model_dir).get("label_names")
    num_labels = (
        int(arrays[f"{task.head_prefix}dense/bias"].shape[0]) if task and task.labelled else 0
    )
    # Everything that can be refused is checked before anything is written.
    state = hf_state_dict(config, arrays, task)
    if tokenizer is not None:
        check_hf_tokenizer(tokenizer)
    storage.makedirs(output_dir)
    write_safetensors(os.path.join(output_dir, "model.safetensors"), state)
    write_json_atomic(
        os.path.join(output_dir, "config.json"),
        hf_config(config, task, tokenizer, label_names, num_labels),
        sort_keys=True,
    )
    files = ["config.json", "model.safetensors"]
    if tokenizer is not None:
        files += write_hf_tokenizer(tokenizer, output_dir, config.max_position_embeddings)
    return {"architecture": architecture(task), "tensors": len(state), "files": files}


def export_keras_hub(model_dir: str, output_dir: str) -> dict:
    """Writes the model directory ``model_dir`` as a native keras-hub preset.

    Built through keras-hub's own transformers loader (the Hugging Face layout
    above) and saved with its ``save_to_preset``: a classifier becomes an
    ``AlbertTextClassifier`` with its preprocessor (``from_preset`` then takes raw
    strings), anything else an ``AlbertBackbone`` with its tokenizer.

    keras-hub's ALBERT runs approximate GELU, LayerNorm epsilon 1e-12 and a
    SentencePiece tokenizer only: other activations, epsilons and WordPiece
    vocabularies are refused, naming the reason. Its tokenizer runs the
    SentencePiece model alone, without ALBERT's lower-casing, accent stripping
    and digit-comma split (docs/moving_models.md).
    """
    import tempfile

    import keras_hub

    config = read_config(model_dir)
    check_expressible(config)
    if config.hidden_act != "gelu_new":
        raise CheckpointError(
            f"hidden_act={config.hidden_act!r}: keras-hub's AlbertBackbone always runs "
            "approximate GELU ('gelu_new'), so this model would compute something else "
            "there; use --target=hf (transformers reads every activation)"
        )
    if config.layer_norm_eps != KERAS_HUB_LAYER_NORM_EPS:
        raise CheckpointError(
            f"layer_norm_eps={config.layer_norm_eps}: keras-hub's AlbertBackbone always "
            f"uses {KERAS_HUB_LAYER_NORM_EPS}; use --target=hf"
        )
    from albert_tf.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(os.path.join(model_dir, "tokenizer"))
    if tokenizer.kind != "sentencepiece":
        raise CheckpointError(
            f"a {tokenizer.kind} tokenizer: keras-hub's AlbertTokenizer reads SentencePiece "
            "models only; use --target=hf (BertTokenizer reads vocab.txt)"
        )
    arrays = read_weights(model_dir)
    task = task_of(sorted({name.split("/", 1)[0] for name in arrays} - {"backbone"}))
    settings = read_finetune_settings(model_dir)
    with tempfile.TemporaryDirectory() as hf_dir:
        export_hf(model_dir, hf_dir)
        backbone = keras_hub.models.AlbertBackbone.from_preset(hf_dir)
        hub_tokenizer = keras_hub.models.AlbertTokenizer(proto=os.path.join(hf_dir, "spiece.model"))
    # keras-hub writes presets with os and open(): a bucket gets a local copy moved up.
    remote = storage.is_remote(output_dir)
    local_dir = tempfile.mkdtemp(prefix="keras_hub_preset_") if remote else output_dir
    written = _save_keras_hub(arrays, task, settings, config, backbone, hub_tokenizer, local_dir)
    if remote:
        storage.move_tree(local_dir, output_dir)
    return written


def _save_keras_hub(arrays, task, settings, config, backbone, hub_tokenizer, output_dir) -> dict:
    import keras_hub

    if task is not None and task.keras_hub_class == "AlbertTextClassifier":
        kernel = arrays[f"{task.head_prefix}dense/kernel"]
        preprocessor = keras_hub.models.AlbertTextClassifierPreprocessor(
            hub_tokenizer,
            sequence_length=settings.get("max_seq_length", config.max_position_embeddings),
        )
        classifier = keras_hub.models.AlbertTextClassifier(
            backbone,
            num_classes=kernel.shape[1],
            preprocessor=preprocessor,
            dropout=config.classifier_dropout_prob,
        )
        classifier.output_dense.set_weights([kernel, arrays[f"{task.head_prefix}dense/bias"]])
        classifier.save_to_preset(output_dir)
        return {"class": "AlbertTextClassifier", "num_classes": int(kernel.shape[1])}
    backbone.save_to_preset(output_dir)
    hub_tokenizer.save_to_preset(output_dir)
    return {"class": "AlbertBackbone", "num_classes": 0}
