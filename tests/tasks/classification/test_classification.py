"""Text classification end to end: ClassificationTrainer learns learnable tasks
(classes and a regression score), keeps its best checkpoint, and the raw-text
SavedModel answers as the Keras model in a fresh process that imports only
tensorflow and tensorflow_text; the finetune command does it all from files."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.numerics import albert_budget
from helpers.serving_scripts import OP_SCAN
from helpers.testing_utils import LEARNS, tiny_config

import albert_tf
from albert_tf.serving import export_saved_model
from albert_tf.tasks.classification.data import ClassificationExample, pack_classification
from albert_tf.tasks.classification.trainer import ClassificationTrainer
from albert_tf.tokenizers import load_tokenizer

WORDS = ["river", "house", "bread", "music", "winter", "garden", "letter", "money", "people"]
WARM, COLD = {"bread", "music", "garden", "money"}, {"river", "winter", "letter", "people"}


def _pairs(n: int, seed: int) -> list[ClassificationExample]:
    # Label 1 when the pair names a "warm" thing; the text names a random thing
    # too, so only the pair (segment 1) decides.
    rng = random.Random(seed)
    items = []
    for i in range(n):
        a, b = rng.sample(WORDS, 2)
        text, pair = f"we talk about the {a}", f"the {b}"
        items.append(ClassificationExample(f"p{i}", text, pair, int(b in WARM)))
    return items


def _scores(n: int, seed: int) -> list[ClassificationExample]:
    # The score counts the "warm" words in the text.
    rng = random.Random(seed)
    items = []
    for i in range(n):
        words = rng.sample(WORDS, 3)
        score = float(sum(w in WARM for w in words))
        items.append(ClassificationExample(f"s{i}", " and ".join(words), "", score))
    return items


@pytest.fixture(scope="module")
def tokenizer(mc_models):
    return load_tokenizer(mc_models["en"]["model"] / "tokenizer")


def _model(tokenizer, num_labels):
    keras.utils.set_random_seed(0)
    config = tiny_config(
        vocab_size=tokenizer.vocabulary_size,
        **LEARNS,
        classifier_dropout_prob=0.0,
    )
    return albert_tf.AlbertTextClassifier.from_albert_config(config, num_labels=num_labels)


def _trainer(model, tokenizer, tmp_path, **kwargs):
    settings = dict(
        output_dir=tmp_path / "run",
        max_seq_length=24,
        batch_size=16,
        learning_rate=1e-3,
        num_train_steps=150,
        eval_every=25,
        patience=0,
        progress=False,
    )
    return ClassificationTrainer(model, tokenizer, **(settings | kwargs))


@pytest.fixture(scope="module")
def pair_classifier(tokenizer, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("pairs")
    trainer = _trainer(_model(tokenizer, 2), tokenizer, tmp_path, label_names=["cold", "warm"])
    result = trainer.fit(_pairs(480, 0), _pairs(96, 1))
    return trainer, result, tmp_path


def test_classifier_learns_from_the_pair_and_keeps_its_best(pair_classifier, tokenizer):
    trainer, result, _ = pair_classifier
    assert result["metric"] == "accuracy"
    assert result["best_accuracy"] > 0.85, result["history"]
    record = result["history"][-1]
    assert {"dev_accuracy", "dev_macro_f1", "dev_mcc", "dev_loss", "train_accuracy"} <= set(record)
    with open(f"{result['best_dir']}/finetune.json") as f:
        settings = json.load(f)
    assert settings["task"] == "classification"
    assert settings["label_names"] == ["cold", "warm"]
    reloaded = albert_tf.load_task_model(result["best_dir"], "classification")
    again = ClassificationTrainer(
        reloaded, tokenizer, label_names=["cold", "warm"], output_dir="unused", max_seq_length=24
    )
    assert again.evaluate(_pairs(96, 1))["accuracy"] == result["best_accuracy"]
    probabilities = again.predict(_pairs(8, 1))
    assert probabilities.shape == (8, 2)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-6)


def test_regression_learns_a_score(tokenizer, tmp_path):
    trainer = _trainer(_model(tokenizer, 1), tokenizer, tmp_path, num_train_steps=200)
    result = trainer.fit(_scores(480, 0), _scores(96, 1))
    assert result["metric"] == "pearson"
    # An untrained model scores about 0 ± 0.1 on 96 items.
    assert result["best_pearson"] > 0.5, result["history"]
    assert "train_accuracy" not in result["history"][-1]
    scores = trainer.predict(_scores(5, 1))
    assert scores.shape == (5,)


def test_wrong_metric_and_label_count_are_named(tokenizer, tmp_path):
    with pytest.raises(ValueError, match="pearson.*does not apply to classes"):
        _trainer(
            _model(tokenizer, 2), tokenizer, tmp_path, label_names=["a", "b"], metric="pearson"
        )
    with pytest.raises(ValueError, match="3 label names for a model with 2 labels"):
        _trainer(_model(tokenizer, 2), tokenizer, tmp_path, label_names=["a", "b", "c"])


_SERVE = (
    OP_SCAN
    + r"""
model = tf.saved_model.load(spec["path"])
serve = model.signatures["serving_default"]
out = serve(text=tf.constant(spec["text"]), text_pair=tf.constant(spec["text_pair"]))
report["answer"] = {k: (v.numpy().astype(str) if v.dtype == tf.string else v.numpy()).tolist()
                    for k, v in out.items()}
empty = serve(text=tf.constant([], tf.string), text_pair=tf.constant([], tf.string))
report["empty"] = {k: list(v.shape) for k, v in empty.items()}
try:
    serve(text=tf.constant(["x" * 100001]), text_pair=tf.constant([""]))
    report["too_long"] = "no error"
except tf.errors.InvalidArgumentError as err:
    report["too_long"] = err.message
report["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
print(json.dumps(report))
"""
)


def test_saved_model_answers_as_the_keras_model_in_a_fresh_process(
    pair_classifier, tokenizer, tmp_path
):
    _, result, _ = pair_classifier
    path = export_saved_model(result["best_dir"], tmp_path / "exported" / "pairs", version=1)
    labels = json.loads((tmp_path / "exported/pairs/1/assets.extra/labels.json").read_text())
    assert labels == ["cold", "warm"]
    metadata = json.loads((tmp_path / "exported/pairs/1/assets.extra/albert_tf.json").read_text())
    assert metadata["task"] == "classification" and metadata["limits"]["max_text_chars"] > 0
    text = ["we talk about the river", "we talk about the bread", "mixed 中文 😀", "only a text"]
    pair = ["the music", "the winter", "the 中文", ""]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"path": path, "text": text, "text_pair": pair}))
    run = subprocess.run(
        [sys.executable, "-c", _SERVE, str(spec)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # albert_tf must not be importable by accident
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["albert_tf_imported"] is False
    assert report["unregistered"] == [] and report["tf_text"]
    # The Keras model on the same text, packed by the same function.
    model = albert_tf.load_task_model(result["best_dir"], "classification")
    packed = pack_classification(tf.constant(text), tf.constant(pair), tokenizer, 24)
    logits = model(packed, training=False).numpy()
    want = tf.nn.softmax(logits, -1).numpy()
    got = report["answer"]
    # The SavedModel's graph and Keras' round differently: the model's float32
    # budget on its logits; softmax moves a probability by at most half of that.
    atol = albert_budget(model.config, 24) * np.abs(logits).max() / 2
    np.testing.assert_allclose(got["probabilities"], want, rtol=0, atol=atol)
    assert got["prediction"] == want.argmax(-1).tolist()
    assert got["label"] == [labels[i] for i in want.argmax(-1)]
    assert got["label"][:2] == ["warm", "cold"]  # the model learned the task
    assert report["empty"] == {"probabilities": [0, 2], "prediction": [0], "label": [0]}
    assert "text length exceeds the serving limit of 100,000" in report["too_long"]


def test_finetune_command_classifies_from_files(tokenizer, mc_models, tmp_path):
    def rows(items):
        return [
            {
                "id": item.id,
                "text": item.text,
                "text_pair": item.text_pair,
                "label": ["no", "yes"][item.label],
            }
            for item in items
        ]

    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows(_pairs(200, 3))) + "\nnot json\n")
    # A test file of the same 9 x 8 (text, pair) combinations: it repeats training texts
    # (the split of train.jsonl keeps a repeated text in one part, dev too).
    test = tmp_path / "test.jsonl"
    test.write_text("\n".join(json.dumps(r) for r in rows(_pairs(40, 4))) + "\n")
    config = tmp_path / "config.json"
    _model(tokenizer, 2).config.to_hf_json(config)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.finetune",
            "--task=classification",
            f"--init_config={config}",
            f"--tokenizer_dir={mc_models['en']['model'] / 'tokenizer'}",
            f"--train_files={data}",
            f"--test_files={test}",
            f"--output_dir={tmp_path / 'run'}",
            f"--export_dir={tmp_path / 'exported'}",
            "--max_seq_length=24",
            "--num_train_steps=6",
            "--eval_every=3",
            "--batch_size=8",
            "--progress=false",
            # The scale flags reach the trainer: two micro-batches of 4 a step, bfloat16.
            "--gradient_accumulation_steps=2",
            "--precision=bfloat16",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "with 1 replica(s); precision bfloat16; XLA off" in run.stdout
    settings = json.loads((tmp_path / "run" / "best" / "finetune.json").read_text())
    assert settings["precision"] == "bfloat16"
    assert settings["gradient_accumulation_steps"] == 2
    assert "skipped 1 bad input(s): {'invalid_json': 1}" in run.stdout
    assert "per label {'no':" in run.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["metric"] == "accuracy" and summary["steps"] == 6
    assert {"accuracy", "accuracy_stderr", "macro_f1", "mcc"} <= set(summary["test"])
    # The test file repeats training texts: counted when read, and scored apart.
    assert "test items share their text with training items" in run.stdout
    assert "repeat the text of a training item" in run.stdout
    assert summary["test_unseen_texts"]["count"] < summary["test"]["count"]
    extra = tmp_path / "exported" / "1" / "assets.extra"
    assert json.loads((extra / "labels.json").read_text()) == ["no", "yes"]
    card = json.loads((extra / "model_card.json").read_text())
    assert card["task"] == "text classification: no, yes"
    assert card["held_out"]["accuracy"] == summary["test"]["accuracy"]
    assert card["held_out"]["items"] == summary["test"]["count"]
    assert 0.5 <= card["held_out"]["majority"] <= 1.0


def test_loops_of_accumulated_steps_train_as_one_call_a_step(tokenizer, tmp_path):
    # --steps_per_loop with --gradient_accumulation_steps: each loop step reads its two
    # micro-batches and sums them inside the compiled loop. The same micro-batches in
    # the same order, summed in the same order, make the same weights to the bit.
    weights = {}
    for loop in (1, 2):
        trainer = _trainer(
            _model(tokenizer, 2),
            tokenizer,
            tmp_path / f"loop{loop}",
            label_names=["cold", "warm"],
            num_train_steps=4,
            eval_every=4,
            gradient_accumulation_steps=2,
            steps_per_loop=loop,
        )
        result = trainer.fit(_pairs(64, 0), _pairs(16, 1))
        assert result["steps"] == 4
        weights[loop] = [w.numpy() for w in trainer.model.weights]
    for one_call, looped in zip(weights[1], weights[2], strict=True):
        np.testing.assert_array_equal(one_call, looped)
