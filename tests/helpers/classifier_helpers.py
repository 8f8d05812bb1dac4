"""Tiny text-classification models for the app tests: a Chinese two-label
classifier ("negative", "positive") with a model card and an English regression
model (one score, no card), random weights, tokenizers trained by
`mc_helpers.train_tokenizer`, exported with `export_saved_model` as
``BASE/tiny_reviews_zh/1`` and ``BASE/tiny_score_en/1``.

Built once per test session under pytest's base temp dir (like mc_helpers).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from helpers.mc_helpers import tiny_mc_config, train_tokenizer

LABEL_NAMES = {"zh": ["negative", "positive"], "en": []}  # en: regression
NAMES = {"zh": "tiny_reviews_zh", "en": "tiny_score_en"}
MAX_SEQ_LENGTH = 64

# What the page's sidebar reads; the English model has none.
MODEL_CARD = {
    "zh": {
        "name": "tiny_reviews_zh",
        "language": "zh",
        "task": "Is a product review positive or negative?",
        "trained_on": "nothing: random weights, for tests",
        "good_at": "nothing",
        "not_good_at": "everything",
        "held_out": {
            "accuracy": 0.62,
            "accuracy_stderr": 0.01,
            "items": 2986,
            "chance": 0.5,
            "majority": 0.55,
            "bag_of_units_baseline": 0.9,
            "macro_f1": 0.6,
        },
    },
    "en": None,
}


def build(root: Path, lang: str) -> dict[str, Path]:
    """``{"model": model dir, "export": BASE/NAME, "saved_model": BASE/NAME/1}``."""
    import keras

    import albert_tf
    from albert_tf.serving import export_saved_model
    from albert_tf.tokenizers import load_tokenizer

    paths = {"model": root / f"model_{lang}", "export": root / "exported" / NAMES[lang]}
    paths["saved_model"] = paths["export"] / "1"
    done = root / f"done_{lang}"
    if done.exists():
        return paths
    # What a build cut short (in this process or another) left is rebuilt whole.
    for stale in (paths["model"], paths["export"], root / f"tokenizer_{lang}"):
        shutil.rmtree(stale, ignore_errors=True)
    train_tokenizer(lang, root / f"tokenizer_{lang}")
    tokenizer = load_tokenizer(root / f"tokenizer_{lang}")
    keras.utils.set_random_seed(11)
    labels = LABEL_NAMES[lang]
    model = albert_tf.AlbertTextClassifier.from_albert_config(
        tiny_mc_config(tokenizer.vocabulary_size), num_labels=max(len(labels), 1)
    )
    # A random head gives every text about the same probabilities; a larger kernel
    # makes them differ per text, so parity with the SavedModel means something.
    head = model.classifier_head.dense
    head.kernel.assign(np.random.RandomState(0).normal(0, 0.3, head.kernel.shape))
    albert_tf.save_model(model, paths["model"], tokenizer=tokenizer)
    settings = {"task": "classification", "max_seq_length": MAX_SEQ_LENGTH, "language": lang}
    (paths["model"] / "finetune.json").write_text(json.dumps(settings | {"label_names": labels}))
    export_saved_model(paths["model"], paths["export"], version=1, model_card=MODEL_CARD[lang])
    done.write_text("ok")
    return paths


def models(base: Path) -> dict[str, dict[str, Path]]:
    root = base / "classifier_models"
    root.mkdir(exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return {lang: build(root, lang) for lang in ("en", "zh")}
