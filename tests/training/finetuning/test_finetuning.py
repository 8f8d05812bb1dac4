"""MultipleChoiceTrainer learns a learnable task, keeps its best checkpoint,
stops early, and the checkpoint exports with its fine-tuning settings."""

from __future__ import annotations

import json
import os
import random

import keras
import tensorflow as tf
from helpers.numerics import albert_budget, assert_normwise_close
from helpers.testing_utils import LEARNS, tiny_config

import albert_tf
from albert_tf.tasks.multiple_choice.data import MultipleChoiceExample
from albert_tf.tasks.multiple_choice.trainer import MultipleChoiceTrainer
from albert_tf.tokenizers import load_tokenizer

WORDS = ["river", "house", "bread", "music", "winter", "garden", "letter", "money", "people"]


def _items(n: int, seed: int) -> list[MultipleChoiceExample]:
    # The answer is always the option that repeats a word of the context;
    # items have 2 to 5 options, mixed within batches.
    rng = random.Random(seed)
    items = []
    for i in range(n):
        words = rng.sample(WORDS, 6)
        count = rng.randint(2, 5)
        label = rng.randrange(count)
        options = [f"the {w}" for w in words[1 : count + 1]]
        options[label] = f"the {words[0]}"
        items.append(
            MultipleChoiceExample(str(i), f"We talk about the {words[0]}.", "", options, label)
        )
    return items


def test_trainer_learns_keeps_best_and_stops_early(mc_models, tmp_path):
    tokenizer = load_tokenizer(mc_models["en"]["model"] / "tokenizer")
    keras.utils.set_random_seed(0)
    config = tiny_config(
        vocab_size=tokenizer.vocabulary_size,
        **LEARNS,
    )
    model = albert_tf.AlbertMultipleChoice.from_albert_config(config)
    trainer = MultipleChoiceTrainer(
        model,
        tokenizer,
        output_dir=tmp_path / "run",
        max_seq_length=32,
        max_qa_length=8,
        batch_size=16,
        learning_rate=2e-3,
        num_train_steps=120,
        eval_every=20,
        patience=3,
        progress=False,
        language="en",
    )
    result = trainer.fit(_items(480, 0), _items(96, 1))
    # chance is about 0.33 (2 to 5 options); a learning model gets well above it
    assert result["best_accuracy"] > 0.6, result["history"]
    best = tmp_path / "run" / "best"
    settings = json.loads((best / "finetune.json").read_text())
    assert settings["max_seq_length"] == 32 and settings["metrics"]["step"] == result["best_step"]
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == len(
        result["history"]
    )
    # The best checkpoint reloads to the same dev accuracy.
    reloaded = MultipleChoiceTrainer(
        albert_tf.load_task_model(best, "multiple_choice"),
        load_tokenizer(best / "tokenizer"),
        output_dir=tmp_path / "eval",
        max_seq_length=32,
        max_qa_length=8,
        progress=False,
    )
    assert reloaded.evaluate(_items(96, 1))["accuracy"] == result["best_accuracy"]

    # With a zero learning rate nothing improves after the first evaluation.
    frozen = MultipleChoiceTrainer(
        model,
        tokenizer,
        output_dir=tmp_path / "frozen",
        max_seq_length=32,
        max_qa_length=8,
        batch_size=16,
        learning_rate=0.0,
        num_train_steps=200,
        eval_every=5,
        patience=2,
        progress=False,
    )
    stopped = frozen.fit(_items(64, 2), _items(32, 3))
    assert stopped["stopped_early"] and stopped["steps"] == 15


def test_trainer_rejects_wrong_tokenizer_and_lengths(mc_models, tmp_path):
    import pytest

    model = albert_tf.load_task_model(mc_models["en"]["model"], "multiple_choice")
    with pytest.raises(ValueError, match="wrong tokenizer"):
        MultipleChoiceTrainer(
            model,
            load_tokenizer(mc_models["zh"]["model"] / "tokenizer"),
            output_dir=tmp_path,
            max_seq_length=32,
        )
    with pytest.raises(ValueError, match="max_position_embeddings"):
        MultipleChoiceTrainer(
            model,
            load_tokenizer(mc_models["en"]["model"] / "tokenizer"),
            output_dir=tmp_path,
            max_seq_length=1024,
        )


def test_a_url_output_dir_gets_every_file_and_no_local_folder(mc_models, tmp_path, monkeypatch):
    # As a gs:// output_dir on a cloud run (ram:// here): best/, finetune.json and
    # metrics.jsonl are written there, nothing in a local folder named "ram:".
    monkeypatch.chdir(tmp_path)
    tokenizer = load_tokenizer(mc_models["en"]["model"] / "tokenizer")
    model = albert_tf.AlbertMultipleChoice.from_albert_config(
        tiny_config(vocab_size=tokenizer.vocabulary_size, num_hidden_layers=1)
    )
    url = "ram://albert_tf_finetune/run"
    trainer = MultipleChoiceTrainer(
        model, tokenizer, output_dir=url, max_seq_length=32, max_qa_length=8, batch_size=8,
        num_train_steps=2, eval_every=2, progress=False,
    )  # fmt: skip
    result = trainer.fit(_items(16, 0), _items(8, 1))
    assert len(tf.io.gfile.GFile(f"{url}/metrics.jsonl").read().splitlines()) == 1
    settings = json.loads(tf.io.gfile.GFile(f"{url}/best/finetune.json").read())
    assert settings["metrics"]["step"] == result["best_step"] == 2
    assert albert_tf.load_task_model(f"{url}/best", "multiple_choice").config == model.config
    # The export reads the URL checkpoint and writes a URL export_dir (gs:// for
    # TF Serving on a cloud run); the served answer is the Keras model's.
    from albert_tf.serving import export_saved_model

    exported = export_saved_model(f"{url}/best", f"{url}/exported")
    assert exported == f"{url}/exported/1"
    assert tf.io.gfile.exists(f"{exported}/assets.extra/albert_tf.json")
    assert not tf.io.gfile.exists(f"{url}/exported/.tmp-1-{os.getpid()}")
    item = _items(1, 2)[0]
    served = tf.saved_model.load(exported).signatures["serving_default"](
        context=tf.constant([item.context]),
        question=tf.constant([item.question]),
        options=tf.constant([item.options]),
    )
    (encoded,) = trainer.encode([item])
    want = tf.nn.softmax(trainer.logits({k: v[None] for k, v in encoded.items() if k != "label"}))
    # Fused training kernels against the export's stock ops: float32 rounding apart.
    assert_normwise_close(
        served["probabilities"], want, rtol=albert_budget(model.config, 32), what="served"
    )
    assert list(tmp_path.iterdir()) == []
