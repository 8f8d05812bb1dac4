"""A demo model's card (``assets.extra/model_card.json``, which the app shows), from
the records its build's stages left in the work folder."""

from __future__ import annotations

import json
import os

from albert_tf import storage
from albert_tf.recipes.demo_models.scoring import good_at, named_baseline

#: The shipped encoders (models/README.md), pretrained on the pretraining documents of
#: the default corpora's splits (Chinese: with pretrain_on_finetune_text's extra text).
ENCODERS = {
    "zh": "models/pretrained/albert_tiny_zh_peoples_daily",
    "en": "models/pretrained/albert_tiny_en_books_pubmed",
}


def model_card(lang: str, work: str) -> dict:
    """What the app's sidebar shows: data, time, skill and held-out accuracy, read from
    the stages' files in ``work`` (one language's work folder)."""

    def read(name: str) -> dict:
        path = os.path.join(work, name)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} is missing; run the earlier stages first")
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    prepared, times = read("data/prepare.json"), read("times.json")
    evaluation = read("evaluation.json")
    finetune = read("finetune/summary.json")
    # Work dirs of before --<lang>_encoder lack start.json: they pretrained.
    encoder = read("start.json")["encoder"] if os.path.exists(f"{work}/start.json") else None
    # The strongest overlap baseline, named in the language's units (work dirs of
    # before the four baselines name none).
    held = named_baseline(lang, evaluation["held_out"])
    # Work dirs of before the one-sentence test items lack this report.
    short = evaluation.get("held_out_one_sentence")
    short = named_baseline(lang, short) if short else None
    # Work dirs of before --pretrain_on_finetune_text lack these two keys; the first of
    # them pretrained on the pretraining documents alone, later ones say how many.
    documents = prepared.get("pretraining_documents", prepared["documents"]["pretrain"])
    extra_text = prepared.get(
        "pretrain_on_finetune_text", documents > prepared["documents"]["pretrain"]
    )
    # The combine stage's weights and dev figures (work dirs of before have none).
    # What the export adds: the combine stage's fit, in the best checkpoint's settings
    # (not combination.json, its log, which a new fine-tuning run would leave stale).
    from albert_tf.checkpoints.saved_format import read_finetune_settings

    combination = read_finetune_settings(os.path.join(work, "finetune", "best")).get(
        "overlap_combination"
    )
    if combination is not None:
        combination = {k: v for k, v in combination.items() if k != "document_frequency"}
    if encoder:
        pretraining = _encoder_record(encoder)
        rebuild = f"python -m albert_tf.demo_models --languages={lang}"
        if encoder != ENCODERS[lang]:
            rebuild += f" --{lang}_encoder={encoder}"
    else:
        pretrain_run = read("pretrain/pretraining_run.json")
        pretrain_results = read("pretrain/eval_results.json")  # its step: the steps trained
        pretraining = {
            "corpora": prepared["corpora"],
            "documents": documents,
            "sentences": prepared["pretraining_sentences"],
            "steps": pretrain_results["step"],
            "batch_size": pretrain_run["options"]["train_batch_size"],
            "sentence_task": pretrain_run["options"]["sentence_task"],
            "model": _card_model(pretrain_run["albert_config"]),
            "seconds": round(times.get("pretrain", 0.0)),
        }
        rebuild = (
            f"python -m albert_tf.demo_models --languages={lang}"
            + (" --pretrain_on_finetune_text" if extra_text else "")
            + f" --{lang}_encoder="
        )
    return {
        "name": f"albert_demo_{lang}",
        "language": lang,
        "task": "Which option continues the context? (multiple choice, any number of options)",
        "good_at": good_at(lang, held, short, combination is not None),
        "not_good_at": (
            "Reasoning, world knowledge, reading comprehension questions, and text unlike "
            "its training corpora; it is a small model trained on two CPU cores."
        ),
        "pretraining": pretraining,
        "finetuning": {
            "items": prepared["items"]["train"],
            # Items come from the fine-tuning and the pretraining documents (dev
            # items from fine-tuning documents no training item comes from).
            "documents": prepared["documents"]["finetune"] + prepared["documents"]["pretrain"],
            "steps": finetune.get("steps"),
            "seconds": round(times.get("finetune", 0.0)),
        },
        "held_out": held,
        **({"held_out_one_sentence": short} if short else {}),
        "shared_sets": evaluation["shared_sets"],
        **({"overlap_combination": combination} if combination is not None else {}),
        "rebuild": rebuild,
    }


def _encoder_record(encoder: str) -> dict:
    """The card's pretraining entry for a shipped encoder: its name, model, steps and
    held-out MLM accuracy, from its ``card.json`` and ``config.json`` (a local path or
    a URL, as ``finetune --checkpoint`` takes)."""
    config = json.loads(storage.read_text(os.path.join(encoder, "config.json")))
    card_path = os.path.join(encoder, "card.json")
    card = json.loads(storage.read_text(card_path)) if storage.isfile(card_path) else {}
    return {
        "encoder": os.path.basename(os.path.normpath(encoder)),
        "data": card.get("data", ""),
        "steps": card.get("steps"),
        "mlm_accuracy": card.get("held_out", {}).get("mlm_accuracy"),
        "model": _card_model(config),
    }


def _card_model(config: dict) -> dict:
    """The model shape a card shows, from a config's (Hugging Face dialect) keys."""
    keys = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "share")
    return {k: config[k] for k in keys if k in config}
