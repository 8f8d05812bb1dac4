"""Runs like the real runs, on two logical CPU replicas, in one process; writes JSON.

usage: scale_worker.py OUT.json TRAIN_FILES TOKENIZER_DIR WORK_DIR

Two logical devices must be configured before TensorFlow starts its runtime,
hence a process of its own. What it runs (`tests/training/test_scale.py` checks):

* ``equal``: the same step on one replica, on two, and on two as two
  accumulated micro-batches (dropout 0, float32): losses and gradient norms;
  and a tagging step on one replica and on two, whose replicas hold unequal
  numbers of scored pieces (the loss is a mean over the global batch's pieces).
* ``finetune``: fine-tuning on two replicas with dropout 0.1: float16 (loss
  scaling) with accumulation, bfloat16, XLA with compiled loops; and float32
  loops of 2 against one step a call (dropout 0).
* ``pretrain``: pretraining on two replicas with dropout 0.1: float16 with
  accumulation, bfloat16 with a token budget, XLA with compiled loops; and
  resumed from a ``file://`` model_dir.
"""

import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
MIRRORED = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
ONE = tf.distribute.get_strategy()

out, train_files, tokenizer_dir, work_dir = sys.argv[1:5]
# tests/ (the folder above this file that holds helpers/), for helpers.training_utils
TESTS = next(
    p for p in Path(__file__).resolve().parents if (p / "helpers" / "__init__.py").is_file()
)
sys.path.insert(0, str(TESTS))
import keras  # noqa: E402
from helpers.training_utils import tiny_albert  # noqa: E402

from albert_tf.data import read_documents, sample_path  # noqa: E402
from albert_tf.tasks.classification.data import ClassificationExample  # noqa: E402
from albert_tf.tasks.classification.model import AlbertTextClassifier  # noqa: E402
from albert_tf.tasks.classification.trainer import ClassificationTrainer  # noqa: E402
from albert_tf.tokenizers import load_tokenizer  # noqa: E402
from albert_tf.training.precision import dtype_policy  # noqa: E402
from albert_tf.training.pretraining.trainer import PretrainingTrainer  # noqa: E402

tokenizer = load_tokenizer(tokenizer_dir)
DROPOUT = dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def items(n: int) -> list:
    """Sentences of the English sample, labelled by whether they mention 'the'."""
    sentences = [s for doc in read_documents(sample_path("en")) for s in doc][:n]
    return [
        ClassificationExample(str(i), s, label=int(" the " in f" {s.lower()} "))
        for i, s in enumerate(sentences)
    ]


TRAIN, DEV = items(48)[:40], items(48)[40:]


def classifier(strategy, precision="float32", dropout=NO_DROPOUT):
    config = tiny_albert(tokenizer.vocabulary_size, **dropout)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        return AlbertTextClassifier.from_albert_config(
            config, num_labels=2, dtype=dtype_policy(precision)
        )


def finetuner(strategy, name, precision="float32", dropout=NO_DROPOUT, **kwargs):
    model = classifier(strategy, precision, dropout)
    settings = dict(
        output_dir=os.path.join(work_dir, name),
        label_names=["no", "yes"],
        max_seq_length=32,
        batch_size=8,
        learning_rate=1e-3,
        num_train_steps=4,
        eval_every=4,
        patience=0,
        progress=False,
        strategy=strategy,
    )
    return ClassificationTrainer(model, tokenizer, **(settings | kwargs))


def floats(sums: dict) -> dict:
    return {k: float(v) for k, v in sums.items()}


def equal_step() -> dict:
    """One optimizer step three ways on the same 8 examples; and on one example, which
    leaves one of two replicas an empty slice."""
    results = {}
    runs = (
        ("one", ONE, 1, 8),
        ("two", MIRRORED, 1, 8),
        ("two_acc", MIRRORED, 2, 8),
        ("one_item", ONE, 1, 1),
        ("two_item", MIRRORED, 1, 1),
    )
    for name, strategy, split, rows in runs:
        trainer = finetuner(strategy, f"equal_{name}", gradient_accumulation_steps=split)
        encoded = trainer.encode(TRAIN[:rows])
        (features, labels), *_ = trainer.batches(encoded, rows)
        features = {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")}
        steps = trainer.build_steps(10)
        size = rows // split
        micro = [
            ({k: v[i : i + size] for k, v in features.items()}, labels[i : i + size])
            for i in range(0, rows, size)
        ]
        # Micro-batches keep the full batch's padding: the same arithmetic per row.
        results[name] = floats(steps.train(micro))
    return results


# Short and long texts: the two replicas' halves hold unequal numbers of scored pieces.
TAGGED = [
    ("王明在北京工作。", [(0, 2, "PER"), (3, 5, "LOC")]),
    ("李华说。", [(0, 2, "PER")]),
    (
        "张伟和王芳昨天从上海坐火车到北京去看望他们的老朋友刘强。",
        [(0, 2, "PER"), (3, 5, "PER"), (8, 10, "LOC"), (14, 16, "LOC"), (25, 27, "PER")],
    ),
    ("好。", []),
]


def equal_tagging() -> dict:
    """One tagging step on one replica and on two, on the same four texts; with a
    softmax head and with a CRF (a loss per window, not per piece)."""
    from albert_tf.tasks.tagging.data import Entity, TaggingExample, tag_names
    from albert_tf.tasks.tagging.model import AlbertTokenClassifier
    from albert_tf.tasks.tagging.trainer import TaggingTrainer
    from albert_tf.tokenizers.wordpiece import train_wordpiece

    chinese = [s for doc in read_documents(sample_path("zh")) for s in doc][:300]
    wordpiece = train_wordpiece(
        chinese + [t for t, _ in TAGGED],
        os.path.join(work_dir, "wordpiece"),
        vocab_size=900,
        num_unused=5,
    )
    items = [
        TaggingExample(str(i), text, tuple(Entity(*e) for e in entities))
        for i, (text, entities) in enumerate(TAGGED)
    ]
    tags = tag_names(["LOC", "PER"])
    results = {}
    runs = [
        (name + suffix, strategy, crf)
        for suffix, crf in (("", False), ("_crf", True))
        for name, strategy in (("one", ONE), ("two", MIRRORED))
    ]
    for name, strategy, crf in runs:
        config = tiny_albert(wordpiece.vocabulary_size, **NO_DROPOUT)
        keras.utils.set_random_seed(0)
        with strategy.scope():
            model = AlbertTokenClassifier.from_albert_config(config, num_tags=len(tags), crf=crf)
        trainer = TaggingTrainer(
            model,
            wordpiece,
            tag_names=tags,
            output_dir=os.path.join(work_dir, f"tag_{name}"),
            max_seq_length=32,
            batch_size=4,
            learning_rate=1e-3,
            num_train_steps=1,
            eval_every=1,
            patience=0,
            progress=False,
            strategy=strategy,
        )
        (features, labels), *_ = trainer.batches(trainer.encode(items), 4)
        halves = [int((labels[i : i + 2] >= 0).sum()) for i in (0, 2)]
        results[name] = floats(trainer.build_steps(10).train([(features, labels)]))
        results[name]["scored_per_half"] = halves
    return results


def finetune() -> dict:
    results = {}
    # Each feature once, paired where they meet in real runs (loss scaling with
    # accumulated gradients; XLA with compiled loops).
    variants = {
        "float16_accumulation": dict(precision="float16", gradient_accumulation_steps=2),
        "bfloat16": dict(precision="bfloat16"),
        "xla_loops": dict(jit_compile=True, steps_per_loop=2),
    }
    for name, kwargs in variants.items():
        trainer = finetuner(MIRRORED, name, dropout=DROPOUT, **kwargs)
        before = [np.array(w) for w in trainer.model.trainable_weights]
        result = trainer.fit(TRAIN, DEV)
        after = [np.array(w) for w in trainer.model.trainable_weights]
        results[name] = {
            "steps": result["steps"],
            "train_loss": result["history"][-1]["train_loss"],
            "dev_loss": result["history"][-1]["dev_loss"],
            "weights_finite": all(bool(np.isfinite(w).all()) for w in after),
            "weights_moved": max(
                float(np.abs(a - b).max()) for a, b in zip(after, before, strict=True)
            ),
            "loss_scaling": type(trainer.build_steps(1).optimizer).__name__,
        }
    for name, loop in (("f32_step", 1), ("f32_loops", 2)):
        trainer = finetuner(MIRRORED, name, steps_per_loop=loop, num_train_steps=5, eval_every=5)
        result = trainer.fit(TRAIN, DEV)
        results[name] = {
            "train_loss": result["history"][-1]["train_loss"],
            "dev_loss": result["history"][-1]["dev_loss"],
            "steps": result["steps"],
        }
    return results


def pretrain() -> dict:
    from helpers.training_utils import tiny_options

    class Prepared:  # what tiny_options reads
        pass

    prepared = Prepared()
    prepared.train_files, prepared.eval_files = train_files, None
    config = tiny_albert(tokenizer.vocabulary_size, **DROPOUT)
    variants = {
        "float16_accumulation": dict(precision="float16", gradient_accumulation_steps=2),
        "bfloat16_token_budget": dict(precision="bfloat16", tokens_per_batch=256),
        "xla_loops": dict(jit_compile=True, steps_per_loop=3),
    }
    results = {}
    for name, overrides in variants.items():
        options = tiny_options(
            os.path.join(work_dir, f"pretrain_{name}"),
            prepared,
            num_train_steps=3,
            log_every_steps=3,
            **overrides,
        )
        trainer = PretrainingTrainer(config, options, MIRRORED)
        last = trainer.train(log=lambda *_: None)
        weights = [np.array(w) for w in trainer.model.weights]
        results[name] = {
            "step": trainer.step,
            "loss": last["mlm_loss"] + last["sop_loss"],
            "weights_finite": all(bool(np.isfinite(w).all()) for w in weights),
            "describe": trainer.describe(),
        }
    url = "file://" + os.path.abspath(os.path.join(work_dir, "pretrain_url"))
    lines = []
    for steps in (2, 4):
        options = tiny_options(url, prepared, num_train_steps=steps, log_every_steps=2)
        trainer = PretrainingTrainer(config, options, MIRRORED)
        trainer.train(log=lines.append)
        results[f"url_{steps}"] = {"step": trainer.step}
    results["url_log"] = lines
    return results


results, seconds = {}, {}
for part in (equal_step, equal_tagging, finetune, pretrain):
    start = time.perf_counter()
    results[part.__name__.removesuffix("_step")] = part()
    seconds[part.__name__] = round(time.perf_counter() - start, 1)
results["seconds"] = seconds
assert all(math.isfinite(v) for v in results["equal"]["one"].values())
with open(out, "w") as f:
    json.dump(results, f, indent=1)
