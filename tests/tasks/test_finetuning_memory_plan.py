"""``finetune --gradient_accumulation_steps=auto`` on devices with little memory: the
memory plan of the task's own compiled step picks the accumulation the run trains
with (a device budget faked from that step's measured bytes; CPU alone means 1)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.finetuning_start import tiny_start

from albert_tf.tasks.classification.data import read_classification
from albert_tf.tasks.run import run_finetuning
from albert_tf.training.finetuning.memory import step_bytes
from albert_tf.training.finetuning.options import FineTuningOptions
from albert_tf.training.memory_plan import DeviceBudget

WORDS = ["river", "house", "bread", "music", "winter", "garden", "letter", "money"]
SEQ, BATCH = 32, 16


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan")
    tiny_start(root, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    rows = [
        {
            "id": f"t{i}",
            "text": f"{WORDS[i % 8]} {WORDS[i // 8]} {WORDS[(i + 3) % 8]}",
            "label": i % 2,
        }
        for i in range(64)
    ]
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def _options(start, tmp_path, **more) -> FineTuningOptions:
    return FineTuningOptions(
        output_dir=str(tmp_path / "run"),
        train_files=str(start / "train.jsonl"),
        task="classification",
        init_config=str(start / "config.json"),
        tokenizer_dir=str(start / "tokenizer"),
        max_seq_length=SEQ,
        batch_size=BATCH,
        num_train_steps=2,
        eval_every=2,
        progress=False,
        precision="float32",
        **more,
    )


def test_auto_accumulation_is_the_plans_on_a_small_device(start, tmp_path, monkeypatch, capsys):
    import albert_tf
    from albert_tf.tasks.classification.trainer import ClassificationTrainer
    from albert_tf.tokenizers import load_tokenizer

    # The step's bytes, measured as the plan measures them, on the run's own model shape.
    tokenizer = load_tokenizer(start / "tokenizer")
    config = albert_tf.AlbertConfig.from_json(str(start / "config.json"))
    model = albert_tf.AlbertTextClassifier.from_albert_config(config, num_labels=2)
    trainer = ClassificationTrainer(
        model,
        tokenizer,
        output_dir=str(tmp_path / "probe"),
        max_seq_length=SEQ,
        batch_size=BATCH,
        progress=False,
        label_names=["0", "1"],
    )
    items, _, _ = read_classification([str(start / "train.jsonl")])
    example = next(iter(trainer.batches(trainer.encode(items[:2]), 2, shuffle=False, seed=0)))
    one, two = (step_bytes(trainer, example, m) for m in (1, 2))
    # Accumulating, a step also keeps a float32 sum of every trained weight's gradient.
    sums = sum(int(np.prod(v.shape)) * 4 for v in model.trainable_variables)
    # One device that holds about 4.5 items: of a batch of 16, micro-batch 4 fits and
    # 8 does not, so the plan is 4 accumulation steps.
    budget = DeviceBudget(1, int((one + sums + 3.5 * (two - one)) / 0.9), "1 faked")
    assert step_bytes(trainer, example, 4) + sums <= budget.usable_bytes
    assert step_bytes(trainer, example, 8) + sums > budget.usable_bytes
    monkeypatch.setattr(
        "albert_tf.training.memory_plan.device_budget", lambda devices, replicas=None: budget
    )
    summary = run_finetuning(_options(start, tmp_path))
    assert summary["steps"] == 2
    saved = json.loads((tmp_path / "run" / "best" / "finetune.json").read_text())
    assert saved["gradient_accumulation_steps"] == 4
    assert "micro-batch 4 × 4 accumulation step(s)" in capsys.readouterr().out


def test_auto_is_one_on_cpu_alone(start, tmp_path):
    run_finetuning(_options(start, tmp_path))
    saved = json.loads((tmp_path / "run" / "best" / "finetune.json").read_text())
    assert saved["gradient_accumulation_steps"] == 1
