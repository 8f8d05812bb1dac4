"""Convert official TF1 and Hugging Face ALBERT checkpoints to our format."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from collections.abc import Mapping

import numpy as np

from albert_tf import storage
from albert_tf.checkpoints.name_table import to_ours, weight_table
from albert_tf.checkpoints.saved_format import (
    PRETRAINING_HEADS,
    SETTINGS_FILE,
    CheckpointError,
    assign_weights,
    save_model,
)
from albert_tf.checkpoints.torch_free_readers import read_pytorch_bin, read_safetensors
from albert_tf.config import AlbertConfig
from albert_tf.storage import write_json_atomic
from albert_tf.tasks import DEFAULT_TASK, TASKS, TaskSpec, get_task, task_of_heads

# Optimizer slots and bookkeeping that official checkpoints carry.
_TF1_SKIPPED_SUFFIXES = ("/adam_m", "/adam_v", "/lamb_m", "/lamb_v")
_TF1_SKIPPED_NAMES = ("global_step",)
# Buffers Hugging Face may save that are not weights.
_HF_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
POOLER = "backbone/pooler/"


@dataclasses.dataclass
class Converted:
    """Arrays by our names, and what the source did and did not contain."""

    config: AlbertConfig
    arrays: dict[str, np.ndarray]
    heads: list[str]
    # The source folder's tokenizer, saved beside the model (set by `convert`).
    tokenizer: object | None = None

    @property
    def fresh(self) -> list[str]:
        """Components the source lacks, which keep their initialisation."""
        spec = self.spec
        heads = [spec.head] if spec else [p.rstrip("/") for p in PRETRAINING_HEADS]
        wanted = ["pooler", *heads]
        has_pooler = any(n.startswith(POOLER) for n in self.arrays)
        present = set(self.heads) | ({"pooler"} if has_pooler else set())
        return [c for c in wanted if c not in present]

    @property
    def spec(self) -> TaskSpec | None:
        """The fine-tuning task whose head the source holds (None: pretraining)."""
        return task_of_heads(self.heads)

    @property
    def task(self) -> str:
        return self.spec.name if self.spec else "pretraining"


def _collect(
    config: AlbertConfig,
    source: Mapping[str, np.ndarray],
    foreign_name,
    *,
    torch_layout,
) -> tuple[Converted, set[str]]:
    arrays: dict[str, np.ndarray] = {}
    used: set[str] = set()
    for row in weight_table(config):
        name = foreign_name(row)
        if not name or name not in source:
            continue
        arrays[row.ours] = to_ours(source[name], row.layout, config, torch_layout=torch_layout(row))
        used.add(name)
    return Converted(config, arrays, _heads_present(arrays)), used


def _heads_present(arrays: Mapping[str, np.ndarray]) -> list[str]:
    return sorted({n.split("/", 1)[0] for n in arrays} - {"backbone"})


def _check_leftovers(leftover: list[str], origin: str) -> None:
    if leftover:
        raise CheckpointError(
            f"{origin} has {len(leftover)} variables this converter does not know: "
            f"{sorted(leftover)[:20]}{' ...' if len(leftover) > 20 else ''}. Check "
            "that its config (num_hidden_groups, inner_group_num, embedding_size) "
            "matches the checkpoint; nothing is skipped silently."
        )


# ---------------------------------------------------------------- TF1
def read_tf1_checkpoint(prefix: str) -> dict[str, np.ndarray]:
    import tensorflow as tf

    if not tf.io.gfile.exists(prefix + ".index"):
        raise FileNotFoundError(
            f"No TF checkpoint at prefix {prefix!r} (expected {prefix}.index); pass "
            "the prefix, e.g. .../model.ckpt-best, not a file inside it."
        )
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


#: A variable only brightmart/albert_zh's checkpoints have: its E→H projection.
BRIGHTMART_PROJECTION = "bert/embeddings/word_embeddings_2"


def convert_tf1(prefix: str, config: AlbertConfig) -> Converted:
    """Official google-research/albert checkpoint (``bert/...``, ``cls/...``), or
    brightmart/albert_zh's (recognised by ``bert/embeddings/word_embeddings_2``;
    converted to ``embedding_layout="brightmart"``, E read from the checkpoint)."""
    raw = read_tf1_checkpoint(prefix)
    source = {}
    for name, array in raw.items():
        name = name.removeprefix("module/")  # TF-Hub exports
        if name in _TF1_SKIPPED_NAMES or name.endswith(_TF1_SKIPPED_SUFFIXES):
            continue
        source[name] = array
    if BRIGHTMART_PROJECTION in source:
        # brightmart's configs say nothing of the layout, and one release of its
        # code embedded at width H whatever embedding_size said.
        config = config.replace(
            embedding_layout="brightmart",
            embedding_size=int(source[BRIGHTMART_PROJECTION].shape[0]),
        )
    converted, used = _collect(
        config,
        source,
        lambda row: row.tf1,
        torch_layout=lambda row: row.ours == "sop_head/dense/kernel",
    )
    _check_leftovers([n for n in source if n not in used], prefix)
    _check_backbone_complete(converted, prefix)
    return converted


# ---------------------------------------------------------------- Hugging Face
def read_hf_weights(folder: str) -> dict[str, np.ndarray]:
    candidates = [
        ("model.safetensors", read_safetensors),
        ("pytorch_model.bin", read_pytorch_bin),
    ]
    index = os.path.join(folder, "model.safetensors.index.json")
    if storage.exists(index):
        files = sorted(set(json.loads(storage.read_text(index))["weight_map"].values()))
        arrays: dict[str, np.ndarray] = {}
        for file in files:
            arrays.update(read_safetensors(os.path.join(folder, file)))
        return arrays
    for filename, reader in candidates:
        path = os.path.join(folder, filename)
        if storage.exists(path):
            return reader(path)
    raise FileNotFoundError(
        f"No model.safetensors or pytorch_model.bin in {folder!r}; pass a folder "
        "written by save_pretrained()."
    )


def convert_hf(folder: str, config: AlbertConfig | None = None) -> Converted:
    """A Hugging Face ALBERT folder (config.json + safetensors or .bin)."""
    if not storage.isdir(folder):
        raise FileNotFoundError(
            f"{folder!r} is not a directory; pass a Hugging Face model folder "
            "(config.json and model.safetensors or pytorch_model.bin)."
        )
    if config is None:
        config = AlbertConfig.from_json(os.path.join(folder, "config.json"))
    raw = read_hf_weights(folder)
    source = {}
    for name, array in raw.items():
        # AlbertModel saves bare names; task models prefix the backbone.
        name = name.removeprefix("albert.")
        if name in _HF_BUFFERS:
            continue
        source[name] = array
    _check_tied_decoder(source, config)
    # Hugging Face calls every task's head "classifier": keep the head of the task
    # whose class the checkpoint names (the default task's when it names none).
    architectures = _architectures(folder)
    named = [spec for spec in TASKS.values() if spec.hf_architecture in architectures]
    kept = named[0] if named else get_task(DEFAULT_TASK)
    other_heads = tuple(spec.head_prefix for spec in TASKS.values() if spec is not kept)
    converted, used = _collect(
        config,
        source,
        lambda row: "" if row.ours.startswith(other_heads) else row.hf,
        torch_layout=lambda row: True,
    )
    used |= {"predictions.decoder.weight", "predictions.decoder.bias"}
    if not config.has_embedding_projection:
        used |= _check_identity_projection(source, config)
    _check_leftovers([n for n in source if n not in used], folder)
    _check_backbone_complete(converted, folder)
    return converted


def _architectures(folder: str) -> list[str]:
    """The model classes a Hugging Face ``config.json`` names (``architectures``)."""
    try:
        config = json.loads(storage.read_text(os.path.join(folder, "config.json")))
    except (OSError, ValueError):
        return []
    return list(config.get("architectures") or [])


def _check_tied_decoder(source: Mapping[str, np.ndarray], config: AlbertConfig) -> None:
    # The decoder must be the embedding (and its bias the head's bias): this
    # package ties them, so an untied checkpoint cannot be represented.
    pairs = [
        ("predictions.decoder.weight", "embeddings.word_embeddings.weight"),
        ("predictions.decoder.bias", "predictions.bias"),
    ]
    for a, b in pairs:
        if a in source and b in source and not np.array_equal(source[a], source[b]):
            raise CheckpointError(
                f"{a} differs from {b}: the checkpoint's MLM decoder is not tied to "
                "its embedding, which ALBERT (and this package) requires."
            )


def _check_identity_projection(source: Mapping[str, np.ndarray], config: AlbertConfig) -> set[str]:
    # Hugging Face always has embedding_hidden_mapping_in, even when E == H;
    # the official model has none then. Accept it only when it does nothing.
    names = {
        "encoder.embedding_hidden_mapping_in.weight",
        "encoder.embedding_hidden_mapping_in.bias",
    }
    weight = source.get("encoder.embedding_hidden_mapping_in.weight")
    bias = source.get("encoder.embedding_hidden_mapping_in.bias")
    if weight is None:
        return set()
    if not (
        np.array_equal(weight, np.eye(config.hidden_size, dtype=weight.dtype)) and not np.any(bias)
    ):
        raise CheckpointError(
            "embedding_size == hidden_size, yet the checkpoint's "
            "embedding_hidden_mapping_in is not the identity; the official ALBERT "
            "has no projection in that case, so it cannot be represented."
        )
    return names


def _check_backbone_complete(converted: Converted, origin: str) -> None:
    # A pooler-less source (HF's AlbertForMaskedLM) is fine: the pooler only
    # feeds the sentence and choice heads, and starts fresh like them.
    expected = [
        r.ours
        for r in weight_table(converted.config)
        if r.ours.startswith("backbone/") and not r.ours.startswith(POOLER)
    ]
    missing = [n for n in expected if n not in converted.arrays]
    if missing:
        raise CheckpointError(
            f"{origin} lacks {len(missing)} backbone weights, e.g. {missing[:5]}; "
            "is num_hidden_groups / inner_group_num / embedding_size in the config "
            "the one this checkpoint was trained with?"
        )


# ---------------------------------------------------------------- output
def build_model(converted: Converted, dtype=None):
    """The task model the converted heads call for, with weights assigned.

    A source with a multiple-choice head becomes `AlbertMultipleChoice`, one
    with a sequence-classification head `AlbertTextClassifier`; anything else an
    `AlbertPretrainingModel`, whose MLM/SOP heads keep their fresh
    initialisation when the source lacks them (reported by the caller).
    """
    from albert_tf.models.pretraining_model import AlbertPretrainingModel

    spec = converted.spec
    if spec is not None:
        model_class = spec.load("model")
        head_arguments = model_class.head_arguments(converted.arrays, spec.head_prefix)
        model = model_class.from_albert_config(converted.config, dtype=dtype, **head_arguments)
        arrays = {k: v for k, v in converted.arrays.items() if not k.startswith(PRETRAINING_HEADS)}
        assign_weights(model, arrays, allow_missing_prefixes=(POOLER,))
        return model
    model = AlbertPretrainingModel.from_albert_config(converted.config, dtype=dtype)
    assign_weights(model, converted.arrays, allow_missing_prefixes=(POOLER, *PRETRAINING_HEADS))
    return model


def find_tokenizer(folder: str):
    """The tokenizer a checkpoint folder ships, or None.

    ``spiece.model`` / ``30k-clean.model`` (ALBERT's SentencePiece, English
    releases) or a BERT-style ``vocab.txt`` / ``vocab_chinese.txt`` (WordPiece:
    Google's Chinese ALBERT and the community's ``albert_chinese_*`` on Hugging
    Face, which use BERT's tokenizer). Lower-casing
    follows ``tokenizer_config.json``'s ``do_lower_case`` (default: on); a WordPiece
    folder whose fast ``tokenizer.json`` normalises with NFKC first (our Hugging Face
    export of a vocabulary trained here) gets ``nfkc``.
    """
    from albert_tf.tokenizers import SentencePieceTokenizer, WordPieceTokenizer

    settings_path = os.path.join(folder, "tokenizer_config.json")
    settings = {}
    if storage.isfile(settings_path):
        settings = json.loads(storage.read_text(settings_path))
    lower_case = bool(settings.get("do_lower_case", True))
    # Hugging Face names first, then those of Google's TF1 release archives.
    for name in ("spiece.model", "30k-clean.model"):
        if storage.isfile(os.path.join(folder, name)):
            return SentencePieceTokenizer.from_file(
                os.path.join(folder, name),
                lower_case=lower_case,
                remove_space=bool(settings.get("remove_space", True)),
                keep_accents=bool(settings.get("keep_accents", False)),
            )
    for name in ("vocab.txt", "vocab_chinese.txt"):
        if storage.isfile(os.path.join(folder, name)):
            return WordPieceTokenizer(
                os.path.join(folder, name),
                lower_case=lower_case,
                tokenize_chinese_chars=bool(settings.get("tokenize_chinese_chars", True)),
                nfkc=_fast_normalizer_starts_with_nfkc(folder),
            )
    return None


def _fast_normalizer_starts_with_nfkc(folder: str) -> bool:
    """Whether the folder's fast ``tokenizer.json`` runs NFKC before anything else."""
    path = os.path.join(folder, "tokenizer.json")
    if not storage.isfile(path):
        return False
    try:
        normalizer = json.loads(storage.read_text(path)).get("normalizer") or {}
    except (OSError, ValueError):
        return False
    if normalizer.get("type") == "Sequence":
        steps = normalizer.get("normalizers") or [{}]
        return steps[0].get("type") == "NFKC"
    return normalizer.get("type") == "NFKC"


def hf_label_names(folder: str, num_labels: int) -> list[str]:
    """A Hugging Face classifier's ``id2label`` names, unless they are the defaults."""
    try:
        config = json.loads(storage.read_text(os.path.join(folder, "config.json")))
    except (OSError, ValueError):
        return []
    id2label = config.get("id2label") or {}
    names = [id2label.get(str(i)) for i in range(num_labels)]
    if None in names or names == [f"LABEL_{i}" for i in range(num_labels)]:
        return []
    return names


def _tf1_config_path(prefix: str) -> str:
    """The config beside a TF1 checkpoint: Google's ``albert_config.json``, else the
    one ``albert_config*.json`` or ``bert_config*.json`` (brightmart's names)."""
    folder = os.path.dirname(prefix) or "."
    official = os.path.join(folder, "albert_config.json")
    if storage.exists(official):
        return official
    escaped = folder if storage.is_remote(folder) else glob.escape(folder)
    for pattern in ("albert_config*.json", "bert_config*.json"):
        found = sorted(storage.glob(os.path.join(escaped, pattern)))
        if len(found) == 1:
            return found[0]
        if found:
            names = ", ".join(os.path.basename(f) for f in found)
            raise ValueError(f"{folder} has several configs ({names}): pass one with --config")
    return official  # from_json says it is missing and what to pass


def convert(
    source: str,
    input_path: str,
    output_dir: str,
    config_path: str | None = None,
) -> tuple[object, Converted]:
    """Converts and saves, with the source's tokenizer when it ships one.

    Returns the model and what was converted (``converted.tokenizer`` is the
    tokenizer saved beside the model, or None).
    """
    config = AlbertConfig.from_json(config_path) if config_path else None
    if source == "hf":
        converted = convert_hf(input_path, config)
    elif source == "tf1":
        if config is None:
            config = AlbertConfig.from_json(_tf1_config_path(input_path))
        converted = convert_tf1(input_path, config)
    else:
        raise ValueError(f"source must be 'hf' or 'tf1', got {source!r}")
    model = build_model(converted)
    folder = input_path if source == "hf" else os.path.dirname(input_path)
    tokenizer = find_tokenizer(folder)
    if tokenizer is not None and tokenizer.vocabulary_size != converted.config.vocab_size:
        raise ValueError(
            f"the tokenizer in {folder} has {tokenizer.vocabulary_size} entries but the "
            f"model's vocab_size is {converted.config.vocab_size}: not this model's tokenizer"
        )
    converted.tokenizer = tokenizer
    save_model(model, output_dir, tokenizer=tokenizer)
    if source == "hf" and converted.spec is not None and converted.spec.labelled:
        # The label names travel on, for the exporters and the app.
        outputs = converted.arrays[f"{converted.spec.head_prefix}dense/bias"].shape[0]
        names = hf_label_names(input_path, int(outputs))
        if names:
            write_json_atomic(
                os.path.join(output_dir, SETTINGS_FILE),
                {"task": converted.spec.name, "label_names": names},
            )
    return model, converted
