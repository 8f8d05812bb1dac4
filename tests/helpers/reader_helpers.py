"""A tiny Chinese span QA model for the app tests: random weights (with a head strong
enough that questions get different answers), the Chinese test tokenizer of
`mc_helpers`, a model card, exported with `export_saved_model` as ``BASE/tiny_qa_zh/1``.
Built once per test session, like the other helpers' models.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from helpers.mc_helpers import tiny_mc_config, train_tokenizer

NAME = "tiny_qa_zh"
MAX_SEQ_LENGTH = 64
MODEL_CARD = {
    "name": NAME,
    "task": "extractive question answering",
    "trained_on": "nothing: random weights, for tests",
    "held_out": {"exact_match": 0.2, "f1": 0.35, "questions": 46, "people_sentence_f1": 0.25},
}


def build(root: Path) -> dict[str, Path]:
    """``{"model": model dir, "export": BASE/NAME, "saved_model": BASE/NAME/1}``."""
    import keras

    import albert_tf
    from albert_tf.serving import export_saved_model
    from albert_tf.tokenizers import load_tokenizer

    paths = {"model": root / "model", "export": root / "exported" / NAME}
    paths["saved_model"] = paths["export"] / "1"
    done = root / "done"
    if done.exists():
        return paths
    for stale in (paths["model"], paths["export"], root / "tokenizer"):
        shutil.rmtree(stale, ignore_errors=True)
    train_tokenizer("zh", root / "tokenizer")
    tokenizer = load_tokenizer(root / "tokenizer")
    keras.utils.set_random_seed(5)
    model = albert_tf.AlbertSpanQA.from_albert_config(tiny_mc_config(tokenizer.vocabulary_size))
    head = model.span_head.dense
    head.kernel.assign(np.random.RandomState(2).normal(0, 0.5, head.kernel.shape))
    albert_tf.save_model(model, paths["model"], tokenizer=tokenizer)
    settings = {
        "task": "span_qa",
        "max_seq_length": MAX_SEQ_LENGTH,
        "max_query_length": 16,
        "doc_stride": 24,
        "max_answer_length": 12,
        "no_answer_threshold": None,
        "language": "zh",
    }
    (paths["model"] / "finetune.json").write_text(json.dumps(settings))
    export_saved_model(paths["model"], paths["export"], version=1, model_card=MODEL_CARD)
    done.write_text("ok")
    return paths


def models(base: Path) -> dict[str, Path]:
    root = base / "reader_models"
    root.mkdir(exist_ok=True)
    return build(root)
