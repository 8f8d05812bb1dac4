"""The tiny Chinese models of the app tests whose answers are character spans: a tagger
(tags O / B-LOC / I-LOC / B-PER / I-PER) and a span QA model. Random weights, with a
head strong enough that texts get different entities and questions different answers;
the Chinese test tokenizer of `mc_helpers`; a model card; exported with
`export_saved_model` as ``BASE/<name>/1``. Each is built once per test session, like
the other helpers' models.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from helpers.mc_helpers import tiny_mc_config, train_tokenizer

TAGGER_NAME = "tiny_ner_zh"
TAGS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
TAGGER_CARD = {
    "name": TAGGER_NAME,
    "task": "named entities: LOC, PER",
    "trained_on": "nothing: random weights, for tests",
    "held_out": {"precision": 0.4, "recall": 0.5, "f1": 0.444, "texts": 100, "gazetteer_f1": 0.6},
}
READER_NAME = "tiny_qa_zh"
READER_CARD = {
    "name": READER_NAME,
    "task": "extractive question answering",
    "trained_on": "nothing: random weights, for tests",
    "held_out": {"exact_match": 0.2, "f1": 0.35, "questions": 46, "people_sentence_f1": 0.25},
}


def _build(
    root: Path, name: str, card: dict, settings: dict, make: Callable[[int], object]
) -> dict[str, Path]:
    """``{"model": model dir, "export": BASE/name, "saved_model": BASE/name/1}``, the
    model ``make(vocabulary_size)`` saved with ``settings`` as its ``finetune.json``."""
    import albert_tf
    from albert_tf.serving import export_saved_model
    from albert_tf.tokenizers import load_tokenizer

    paths = {"model": root / "model", "export": root / "exported" / name}
    paths["saved_model"] = paths["export"] / "1"
    done = root / "done"
    if done.exists():
        return paths
    for stale in (paths["model"], paths["export"], root / "tokenizer"):
        shutil.rmtree(stale, ignore_errors=True)
    train_tokenizer("zh", root / "tokenizer")
    tokenizer = load_tokenizer(root / "tokenizer")
    albert_tf.save_model(make(tokenizer.vocabulary_size), paths["model"], tokenizer=tokenizer)
    (paths["model"] / "finetune.json").write_text(json.dumps(settings))
    export_saved_model(paths["model"], paths["export"], version=1, model_card=card)
    done.write_text("ok")
    return paths


def _tagger(vocabulary_size: int):
    import keras

    import albert_tf

    keras.utils.set_random_seed(3)
    model = albert_tf.AlbertTokenClassifier.from_albert_config(
        tiny_mc_config(vocabulary_size), num_tags=len(TAGS)
    )
    head = model.tagger_head.dense
    head.kernel.assign(np.random.RandomState(1).normal(0, 0.5, head.kernel.shape))
    return model


def _reader(vocabulary_size: int):
    import keras

    import albert_tf

    keras.utils.set_random_seed(5)
    model = albert_tf.AlbertSpanQA.from_albert_config(tiny_mc_config(vocabulary_size))
    head = model.span_head.dense
    head.kernel.assign(np.random.RandomState(2).normal(0, 0.5, head.kernel.shape))
    return model


#: The tiny readers' fine-tuning settings, but for their no-answer threshold.
READER_SETTINGS = {
    "task": "span_qa",
    "max_seq_length": 64,
    "max_query_length": 16,
    "doc_stride": 24,
    "max_answer_length": 12,
    "language": "zh",
}


def tagger_models(base: Path) -> dict[str, Path]:
    """The tiny tagger under ``base/tagger_models`` (max_seq_length 32)."""
    root = base / "tagger_models"
    root.mkdir(exist_ok=True)
    settings = {"task": "tagging", "label_names": TAGS, "max_seq_length": 32, "language": "zh"}
    return _build(root, TAGGER_NAME, TAGGER_CARD, settings, _tagger)


def reader_models(base: Path) -> dict[str, Path]:
    """The tiny span QA model under ``base/reader_models`` (max_seq_length 64, windows
    of 16 question pieces and a stride of 24, answers of at most 12 pieces)."""
    root = base / "reader_models"
    root.mkdir(exist_ok=True)
    settings = READER_SETTINGS | {"no_answer_threshold": None}
    return _build(root, READER_NAME, READER_CARD, settings, _reader)


def squad2_reader_models(base: Path) -> dict[str, Path]:
    """The tiny span QA model as if fine-tuned on SQuAD 2.0: `reader_models`' weights
    and windows with a no-answer threshold (a question is left unanswered when its null
    score minus its best span's exceeds it) of −4.5, which its random weights' margins
    straddle on tests/tasks/test_predict.py's questions; under
    ``base/squad2_reader_models``."""
    root = base / "squad2_reader_models"
    root.mkdir(exist_ok=True)
    settings = READER_SETTINGS | {"no_answer_threshold": -4.5}
    card = {**READER_CARD, "name": f"{READER_NAME}_squad2"}
    return _build(root, f"{READER_NAME}_squad2", card, settings, _reader)
