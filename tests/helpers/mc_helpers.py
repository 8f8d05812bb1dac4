"""Tiny English and Chinese multiple-choice models for the fine-tuning,
serving and app tests: tokenizers trained here on the in-repo samples,
random weights, saved with `save_model(..., tokenizer=...)` and exported.

Built once per test session under pytest's base temp dir (shared by
tests/training/finetuning, tests/data, tests/serving and tests/apps).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from pathlib import Path

import numpy as np

from helpers.testing_utils import TWO_LAYERS, tiny_config

SENTENCES = {"en": 1200, "zh": 500}
VOCAB = {"en": 700, "zh": 1200}


def tiny_mc_config(vocab_size: int):
    return tiny_config(
        **TWO_LAYERS,
        vocab_size=vocab_size,
        max_position_embeddings=128,
        initializer_range=0.5,  # random but far from uniform outputs
    )


def train_tokenizer(lang: str, out: Path):
    from albert_tf.data import iter_sentences, sample_path
    from albert_tf.tokenizers import train_sentencepiece, train_wordpiece

    lines = list(itertools.islice(iter_sentences([sample_path(lang)]), SENTENCES[lang]))
    if lang == "en":
        return train_sentencepiece(lines, out, vocab_size=VOCAB[lang], shrink_vocab=True)
    extra = list(itertools.islice(iter_sentences([sample_path("en")]), 200))
    extra += ["算法组的成员们精通各种AI算法.", "成都动物园里的大熊猫人人都想摸一下.", "你吃饭了吗?"]
    return train_wordpiece(lines + extra, out, vocab_size=VOCAB[lang], num_unused=5)


# The Chinese model carries a card (as the demo models do); the English one has none.
MODEL_CARD = {
    "zh": {
        "name": "tiny_zh",
        "task": "Which option continues the context?",
        "good_at": "nothing: random weights, for tests",
        "not_good_at": "everything",
        "held_out": {
            "accuracy": 0.31,
            "accuracy_stderr": 0.01,
            "items": 2000,
            "chance": 0.25,
            "overlap_idf_baseline": 0.7,
        },
        "held_out_one_sentence": {
            "accuracy": 0.29,
            "chance": 0.25,
            "overlap_count_baseline": 0.27,
            "overlap_idf_baseline": 0.28,
            "previous_model": {"path": "models/exported/tiny_zh/0", "accuracy": 0.26},
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

    paths = {
        "model": root / f"model_{lang}",
        "export": root / "exported" / f"tiny_{lang}",
    }
    paths["saved_model"] = paths["export"] / "1"
    done = root / f"done_{lang}"
    if done.exists():
        return paths
    # What a build cut short (in this process or another) left is rebuilt whole.
    for stale in (paths["model"], paths["export"], root / f"tokenizer_{lang}"):
        shutil.rmtree(stale, ignore_errors=True)
    train_tokenizer(lang, root / f"tokenizer_{lang}")
    tokenizer = load_tokenizer(root / f"tokenizer_{lang}")
    keras.utils.set_random_seed(7)
    model = albert_tf.AlbertMultipleChoice.from_albert_config(
        tiny_mc_config(tokenizer.vocabulary_size)
    )
    # Random heads score every option almost alike; a larger scorer kernel
    # makes the probabilities differ so parity checks mean something.
    head = model.multiple_choice_head.dense
    head.kernel.assign(np.random.RandomState(0).normal(0, 0.5, head.kernel.shape))
    albert_tf.save_model(model, paths["model"], tokenizer=tokenizer)
    (paths["model"] / "finetune.json").write_text(
        json.dumps({"max_seq_length": 96, "max_qa_length": 32, "language": lang})
    )
    export_saved_model(paths["model"], paths["export"], version=1, model_card=MODEL_CARD[lang])
    done.write_text("ok")
    return paths


def models(base: Path) -> dict[str, dict[str, Path]]:
    root = base / "mc_models"
    root.mkdir(exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return {lang: build(root, lang) for lang in ("en", "zh")}
