"""A task defined outside the package: registered with `register_task`, its option
declared as a flag, run by `run_finetuning` and exported as a SavedModel; and
`run_finetuning` from Python gives the summary the command gives.

The toy task labels a line of text "long" when it has at least ``long_from``
words, else "short". It brings its own settings, head layer name, model, task and
trainer (the classification trainer's encoding on the shared loop), and serves
with classification's signatures.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags
from helpers.mc_helpers import train_tokenizer
from helpers.testing_utils import TWO_LAYERS, tiny_config

from albert_tf.checkpoints.saved_format import read_weights
from albert_tf.heads.pooled_classifier_head import PooledClassifierHead
from albert_tf.models.backbone import BACKBONE_INPUTS
from albert_tf.models.task import AlbertTask
from albert_tf.tasks import TASKS, TaskSpec, head_prefixes, register_task, task_of_heads
from albert_tf.tasks.classification.data import ClassificationExample
from albert_tf.tasks.classification.settings import ClassificationSettings
from albert_tf.tasks.classification.trainer import ClassificationTrainer
from albert_tf.tasks.run import run_finetuning
from albert_tf.tasks.settings import TaskSettings, define_flags, setting, settings_from_flags
from albert_tf.tasks.task import FineTuningTask, TaskData
from albert_tf.training.finetuning.options import FineTuningOptions

LABELS = ["short", "long"]
WORDS = ["river", "house", "bread", "music", "winter", "garden", "letter", "money", "people"]
SERVING = "albert_tf.tasks.classification.serving:TextClassifierServingModule"


@dataclasses.dataclass(frozen=True)
class ToySettings(TaskSettings):
    long_from: int = setting(4, "toy_length: words from which a text is long.", lower_bound=1)


class ToyClassifier(AlbertTask):
    """The pooled [CLS] vector, then a dense layer: classification's head, named ``toy_head``."""

    def __init__(self, backbone, num_labels: int = 2, **kwargs):
        super().__init__(backbone, **kwargs)
        self.num_labels = num_labels
        self.toy_head = PooledClassifierHead(
            num_labels,
            dropout=0.0,
            initializer_range=backbone.config.initializer_range,
            dtype=backbone.dtype_policy,
            name="toy_head",
        )
        ids = np.zeros((1, 2), "int32")
        self({"token_ids": ids, "segment_ids": ids, "padding_mask": ids + 1})

    @classmethod
    def head_arguments(cls, arrays, head_prefix: str) -> dict:
        return {"num_labels": int(arrays[f"{head_prefix}dense/bias"].shape[0])}

    def call(self, inputs, training=None):
        features = {key: inputs[key] for key in BACKBONE_INPUTS}
        pooled = self.backbone(features, training=training)["pooled_output"]
        return self.toy_head(pooled, training=training)


class ToyTrainer(ClassificationTrainer):
    """Classification's packing, loss and metrics; ``finetune.json`` names the toy task."""

    def task_settings(self) -> dict:
        return super().task_settings() | {"task": TOY.name}


class ToyTask(FineTuningTask):
    def read(self, options: FineTuningOptions, report) -> TaskData:
        long_from = options.settings.long_from
        items = []
        for path in options.train_files:
            with open(path, encoding="utf-8") as f:
                for i, line in enumerate(f):
                    label = int(len(line.split()) >= long_from)
                    items.append(ClassificationExample(f"toy{i}", line.strip(), "", label, "en"))
        return TaskData(items, None, None, collections.Counter(), list(LABELS))

    def head_arguments(self, data: TaskData) -> dict:
        return {"num_labels": len(LABELS)}

    def trainer(self, model, tokenizer, data: TaskData, options: FineTuningOptions, **common):
        return ToyTrainer(model, tokenizer, label_names=data.label_names, **common)

    def model_card(self, options: FineTuningOptions, data: TaskData, summary: dict) -> dict:
        return {"task": f"long from {options.settings.long_from} words", "steps": summary["steps"]}


TOY = TaskSpec(
    name="toy_length",
    head="toy_head",
    hf_architecture="AlbertForSequenceClassification",
    parts={
        "settings": f"{__name__}:ToySettings",
        "model": f"{__name__}:ToyClassifier",
        "task": f"{__name__}:ToyTask",
        "serving": SERVING,
    },
    description="toy: is a text long?",
)
ToyTask.spec = TOY


@pytest.fixture
def toy():
    register_task(TOY)
    yield TOY
    del TASKS[TOY.name]  # the registry is the one place a task lives


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tokenizer, a tiny model config for it and 80 lines of 1 to 7 words."""
    root = tmp_path_factory.mktemp("toy")
    train_tokenizer("en", root / "tokenizer")
    from albert_tf.tokenizers import load_tokenizer

    vocab = load_tokenizer(root / "tokenizer").vocabulary_size
    tiny_config(vocab_size=vocab, **TWO_LAYERS).to_hf_json(root / "config.json")
    rng = np.random.RandomState(0)
    lines = [" ".join(rng.choice(WORDS, rng.randint(1, 8))) for _ in range(80)]
    (root / "train.txt").write_text("\n".join(lines) + "\n")
    rows = [
        {"id": f"t{i}", "text": text, "label": LABELS[len(text.split()) >= 4]}
        for i, text in enumerate(lines)
    ]
    (root / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return root


def _shared(files, tmp_path, **more) -> dict:
    return (
        dict(
            output_dir=str(tmp_path / "run"),
            init_config=str(files / "config.json"),
            tokenizer_dir=str(files / "tokenizer"),
            max_seq_length=24,
            batch_size=8,
            num_train_steps=2,
            eval_every=2,
            progress=False,
        )
        | more
    )


def test_a_registered_task_is_found_by_its_name_and_head(toy):
    assert TASKS["toy_length"] is toy and task_of_heads(["toy_head"]) is toy
    assert "toy_head/" in head_prefixes()
    with pytest.raises(ValueError, match="registered already"):
        register_task(toy)
    with pytest.raises(ValueError, match="task 'classification' has the head"):
        register_task(dataclasses.replace(toy, name="other", head="classifier_head"))
    # Options for the toy task take its settings, and check their bounds.
    start = dict(task="toy_length", init_config="config.json")
    assert FineTuningOptions("out", "x", **start).settings == ToySettings()
    with pytest.raises(ValueError, match="long_from must be at least 1, got 0"):
        FineTuningOptions("out", "x", settings=ToySettings(0), **start).validate()
    with pytest.raises(ValueError, match="takes settings=ToySettings"):
        FineTuningOptions("out", "x", settings=ClassificationSettings(), **start).validate()


def test_the_toy_option_is_a_flag():
    flag_values = flags.FlagValues()
    assert define_flags(ToySettings, flag_values) == ["long_from"]
    assert flag_values["long_from"].help == "toy_length: words from which a text is long."
    assert [f.name for f in flag_values.get_flags_for_module(__name__)] == ["long_from"]
    flag_values(["prog", "--long_from=3"])
    assert settings_from_flags(ToySettings, flag_values) == ToySettings(long_from=3)
    with pytest.raises(flags.IllegalFlagValueError):
        flag_values(["prog", "--long_from=0"])


def test_run_finetuning_trains_and_exports_the_toy_task(toy, files, tmp_path):
    options = FineTuningOptions(
        train_files=str(files / "train.txt"),
        task="toy_length",
        settings=ToySettings(long_from=3),
        export_dir=str(tmp_path / "exported"),
        **_shared(files, tmp_path),
    )
    summary = run_finetuning(options)
    assert summary["steps"] == 2 and summary["best_step"] == 2 and summary["metric"] == "accuracy"
    assert summary["test"]["count"] > 0  # the hash split left test items
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == summary
    best = tmp_path / "run" / "best"
    assert json.loads((best / "finetune.json").read_text())["task"] == "toy_length"
    # The registered head is saved under its own name, and loads back.
    assert {name.split("/")[0] for name in read_weights(best)} == {"backbone", "toy_head"}
    # The export: the toy task's record, classification's signatures, the toy option.
    exported = tmp_path / "exported" / "1"
    extra = exported / "assets.extra"
    assert json.loads((extra / "albert_tf.json").read_text())["task"] == "toy_length"
    assert json.loads((extra / "labels.json").read_text()) == LABELS
    card = json.loads((extra / "model_card.json").read_text())
    assert card == {"task": "long from 3 words", "steps": 2}
    served = tf.saved_model.load(str(exported)).signatures["serving_default"](
        text=tf.constant(["river", "river house bread music"]), text_pair=tf.constant(["", ""])
    )
    assert served["probabilities"].shape == (2, 2)
    assert {label.decode() for label in served["label"].numpy()} <= set(LABELS)


def test_run_finetuning_gives_the_command_s_summary(files, tmp_path):
    shared = _shared(files, tmp_path / "command", task="classification")
    command = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.finetune",
            f"--train_files={files / 'train.jsonl'}",
            *(f"--{name}={value}" for name, value in shared.items()),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert command.returncode == 0, command.stderr[-3000:]
    by_command = json.loads((tmp_path / "command" / "run" / "summary.json").read_text())
    keras.utils.clear_session()
    options = FineTuningOptions(
        train_files=[str(files / "train.jsonl")],
        settings=ClassificationSettings(),
        **_shared(files, tmp_path / "python", task="classification"),
    )
    by_python = run_finetuning(options)
    assert set(by_python) == set(by_command) and "test" in by_python
    # The same steps, dev and test scores; only the times and the output folder differ.
    ours, theirs = _flat(by_python), _flat(by_command)
    floats = {key for key, value in ours.items() if isinstance(value, float)}
    exact = ours.keys() - floats
    assert {k: ours[k] for k in exact} == {k: theirs[k] for k in exact}
    assert {k: ours[k] for k in floats} == pytest.approx({k: theirs[k] for k in floats}, rel=1e-5)


def _flat(summary: dict, prefix: str = "") -> dict:
    """Nested scores as one level (``test.accuracy``), without times and paths."""
    flat = {}
    for key, value in summary.items():
        if key.endswith("seconds") or key == "best_dir":
            continue
        if isinstance(value, dict):
            flat |= _flat(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat
