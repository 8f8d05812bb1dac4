"""A tiny Chinese tagger for the app tests: random weights (with a head strong enough
that texts get different entities), the Chinese test tokenizer of `mc_helpers`, tags
O / B-LOC / I-LOC / B-PER / I-PER, a model card, exported with `export_saved_model` as
``BASE/tiny_ner_zh/1``. Built once per test session, like the other helpers' models.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from helpers.mc_helpers import tiny_mc_config, train_tokenizer

NAME = "tiny_ner_zh"
TAGS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
MAX_SEQ_LENGTH = 32
MODEL_CARD = {
    "name": NAME,
    "task": "named entities: LOC, PER",
    "trained_on": "nothing: random weights, for tests",
    "held_out": {"precision": 0.4, "recall": 0.5, "f1": 0.444, "texts": 100, "gazetteer_f1": 0.6},
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
    keras.utils.set_random_seed(3)
    model = albert_tf.AlbertTokenClassifier.from_albert_config(
        tiny_mc_config(tokenizer.vocabulary_size), num_tags=len(TAGS)
    )
    head = model.tagger_head.dense
    head.kernel.assign(np.random.RandomState(1).normal(0, 0.5, head.kernel.shape))
    albert_tf.save_model(model, paths["model"], tokenizer=tokenizer)
    settings = {"task": "tagging", "label_names": TAGS, "max_seq_length": MAX_SEQ_LENGTH}
    (paths["model"] / "finetune.json").write_text(json.dumps(settings | {"language": "zh"}))
    export_saved_model(paths["model"], paths["export"], version=1, model_card=MODEL_CARD)
    done.write_text("ok")
    return paths


def models(base: Path) -> dict[str, Path]:
    root = base / "tagger_models"
    root.mkdir(exist_ok=True)
    return build(root)
