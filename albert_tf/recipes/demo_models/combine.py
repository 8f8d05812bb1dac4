"""The demo's ``combine`` stage: the fine-tuned model's score plus the options' overlap.

A small next-sentence model misses lexical clues that counting shared characters
catches (a rare name in both the context and the right option), and the overlap
misses what the model reads. Two weights (`albert_tf.baselines.combination`) fitted
on the dev items add them; the weights and the training documents' frequencies go
into the model directory's ``finetune.json`` (``overlap_combination``), and the
export computes both parts in its graph (`MultipleChoiceServingModule`), so TF
Serving answers as the card says.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

#: Texts per call when counting the units of the training documents.
_CHUNK = 256
#: Items per request when scoring the dev items.
_BATCH = 32


def document_frequencies(documents: Iterable[str]) -> tuple[int, dict[str, int]]:
    """How many documents there are, and in how many each unit occurs, with the units
    the SavedModel's graph cuts (`OverlapScorer.units`)."""
    import tensorflow as tf

    from albert_tf.baselines.overlap_in_graph import OverlapScorer

    counts: Counter[str] = Counter()
    total = 0
    batch: list[str] = []

    def count(texts: list[str]) -> None:
        for units in OverlapScorer.units(tf.constant(texts)).to_list():
            counts.update({u.decode("utf-8") for u in units})

    for text in documents:
        batch.append(text)
        total += 1
        if len(batch) == _CHUNK:
            count(batch)
            batch = []
    if batch:
        count(batch)
    if total == 0:
        raise ValueError("no training documents to count unit frequencies on")
    return total, dict(counts)


def pretraining_documents(path: str) -> Iterable[str]:
    """The texts of ``prepare``'s ``pretrain.jsonl`` (one document a line)."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield " ".join(json.loads(line)["sentences"])


def _scores(module, items: Sequence) -> dict[str, np.ndarray]:
    """``model_logits``, ``overlap`` [n, C] and ``prediction`` [n] of ``items`` as the
    export's ``serving_default`` computes them, and their ``labels``."""
    import tensorflow as tf

    width = max(len(i.options) for i in items)
    parts: dict[str, list] = {"model_logits": [], "overlap": [], "prediction": []}
    for start in range(0, len(items), _BATCH):
        batch = items[start : start + _BATCH]
        context = tf.constant([i.context for i in batch])
        question = tf.constant([i.question for i in batch])
        options = tf.constant([list(i.options) + [""] * (width - len(i.options)) for i in batch])
        scored = module.serving_default(context, question, options)
        for key, values in parts.items():
            values.append(scored[key].numpy())
    return {k: np.concatenate(v) for k, v in parts.items()} | {
        "labels": np.array([i.label for i in items])
    }


def serving_module(model_dir: str, settings: dict):
    """The multiple-choice module an export of ``model_dir`` serves, with ``settings``
    in place of its ``finetune.json`` (the combination's, for one)."""
    from albert_tf.checkpoints.saved_format import load_task_model
    from albert_tf.serving.export import default_max_seq_length, load_matching_tokenizer
    from albert_tf.tasks.multiple_choice.serving import MultipleChoiceServingModule

    model = load_task_model(model_dir, "multiple_choice")
    tokenizer = load_matching_tokenizer(os.path.join(model_dir, "tokenizer"), model)
    module, _, _ = MultipleChoiceServingModule.for_export(
        model, tokenizer, settings, default_max_seq_length(settings, model)
    )
    return module


def combined_accuracy(module, items: Sequence) -> dict:
    """``{"accuracy", "count"}`` of the module's ``serving_default`` (the model with
    the overlap, as the export answers) on ``items``."""
    scored = _scores(module, items)
    correct = scored["prediction"] == scored["labels"]
    return {"accuracy": float(correct.mean()), "count": len(items)}


def _absent() -> float:
    from albert_tf.tasks.multiple_choice.head import ABSENT_OPTION_LOGIT

    return ABSENT_OPTION_LOGIT


def combine(model_dir: str, dev_file: str, documents: Iterable[str]) -> dict:
    """Fits the combination on ``dev_file``'s items and writes it into ``model_dir``'s
    ``finetune.json``; returns what it wrote without the frequencies, with the dev
    accuracy of the model, the overlap and the two combined."""
    from albert_tf.baselines.combination import fit_combination
    from albert_tf.checkpoints.saved_format import SETTINGS_FILE, read_finetune_settings
    from albert_tf.storage import write_json_atomic
    from albert_tf.tasks.multiple_choice.data import read_multiple_choice

    settings = read_finetune_settings(model_dir)
    if settings.get("task", "multiple_choice") != "multiple_choice":
        raise ValueError(
            f"{model_dir} is a {settings['task']} model; combine needs multiple choice"
        )
    items, _ = read_multiple_choice(dev_file)
    if not items:
        raise ValueError(f"{dev_file} has no items to fit the combination on")
    n, frequency = document_frequencies(documents)
    fitted = {k: v for k, v in settings.items() if k != "overlap_combination"}
    zero = {"model_weight": 1.0, "overlap_weight": 0.0, "documents": n}
    module = serving_module(
        model_dir, fitted | {"overlap_combination": zero | {"document_frequency": frequency}}
    )
    scored = _scores(module, items)
    logits, overlap, labels = scored["model_logits"], scored["overlap"], scored["labels"]
    present = logits > _absent() / 2
    weights = fit_combination(logits, overlap, labels, present)

    def accuracy(scores: np.ndarray) -> float:
        return round(float((np.where(present, scores, -np.inf).argmax(1) == labels).mean()), 4)

    combined = weights["model_weight"] * logits + weights["overlap_weight"] * overlap
    record = {
        **{k: round(v, 6) for k, v in weights.items()},
        "documents": n,
        "fitted_on": {"file": os.path.basename(dev_file), "items": len(items)},
        "dev_accuracy": {
            "model": accuracy(logits),
            "overlap": accuracy(overlap),
            "combined": accuracy(combined),
        },
    }
    write_json_atomic(
        os.path.join(model_dir, SETTINGS_FILE),
        fitted | {"overlap_combination": record | {"document_frequency": frequency}},
    )
    return record
