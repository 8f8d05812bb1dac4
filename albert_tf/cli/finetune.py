"""Fine-tune ALBERT for multiple choice or for text classification.

    python -m albert_tf.finetune --flagfile=configs/finetune_quickstart.flags
    python -m albert_tf.finetune --task=classification --flagfile=configs/classify_zh_reviews.flags

Starts from a model directory in this package's format (``--checkpoint``:
pretrained here or converted with ``python -m albert_tf.convert``), or from
random weights (``--init_config``, a config JSON; with ``--tokenizer_dir``).
Data: JSON Lines / RACE / C3 files, globs or folders (see
docs/finetuning.md), or ``sample:en`` / ``sample:zh`` for a next-sentence
task built from the embedded sample corpora. ``--task=classification``
reads single texts or text pairs with labels: JSON Lines (``text``,
``text_pair``, ``label``), GLUE's TSV files and CLUE's JSON Lines
(`albert_tf.data.classification`); ``--num_labels=1`` fine-tunes a
regression model (STS-B). Without ``--dev_files`` the training items are
split by a hash of their ids (``--split``).
"""

from __future__ import annotations

import json
import os
import sys

from absl import flags

from albert_tf.cli import runner, scale_flags
from albert_tf.cli.runner import UserError
from albert_tf.data.choices import CONTEXT_KEEP

FLAGS = flags.FLAGS
# --strategy, --precision, --jit_compile, --gradient_accumulation_steps, --steps_per_loop,
# --fused_kernels: the same flags and defaults as pretraining.
flags.adopt_module_key_flags(scale_flags)
TASKS = ("multiple_choice", "classification")
flags.DEFINE_enum("task", "multiple_choice", list(TASKS), "What to fine-tune for.")
flags.DEFINE_integer(
    "num_labels",
    None,
    "classification: classes (default: the labels found in --train_files); 1 = regression.",
    lower_bound=1,
)
flags.DEFINE_string(
    "metric",
    None,
    "classification: dev metric that picks the best checkpoint: accuracy (default), "
    "macro_f1 or mcc; pearson (default) or spearman for regression.",
)
flags.DEFINE_string("checkpoint", None, "Model directory to start from (albert_tf format).")
flags.DEFINE_string("init_config", None, "Instead of --checkpoint: config JSON, random init.")
flags.DEFINE_string("tokenizer_dir", None, "Tokenizer (default: CHECKPOINT/tokenizer).")
flags.DEFINE_list("train_files", None, "Training data: files, globs, folders or sample:en|zh.")
flags.DEFINE_list("dev_files", None, "Dev data (default: a split of --train_files).")
flags.DEFINE_list("test_files", None, "Test data, scored with the best checkpoint at the end.")
flags.DEFINE_list("split", ["0.8", "0.1", "0.1"], "train,dev,test fractions without --dev_files.")
flags.DEFINE_integer("split_seed", 0, "Seed of the hash split.")
flags.DEFINE_string("output_dir", None, "Where best/ and metrics.jsonl go.")
flags.DEFINE_integer("max_seq_length", 512, "Packed sequence length limit.")
flags.DEFINE_integer(
    "max_qa_length", 128, "multiple_choice: question+option pieces kept (the last ones)."
)
flags.DEFINE_enum(
    "context_keep",
    "start",
    list(CONTEXT_KEEP),
    "multiple_choice: which end of a too-long context is kept: start (a reading passage) or end "
    "(a 'what comes next?' item, whose clue is the text just before the options).",
)
flags.DEFINE_integer(
    "batch_size", 16, "Items per optimizer step (all replicas, all accumulation steps)."
)
flags.DEFINE_integer(
    "eval_batch_size",
    None,
    "Items per dev/test batch (default: twice a micro-batch, batch_size / "
    "gradient_accumulation_steps).",
    lower_bound=1,
)
flags.DEFINE_float("learning_rate", 1e-5, "Peak learning rate.")
flags.DEFINE_float("num_epochs", 3.0, "Epochs (unless --num_train_steps).")
flags.DEFINE_integer("num_train_steps", None, "Total steps.")
flags.DEFINE_float("warmup_proportion", 0.1, "Warm-up fraction of the steps.")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
flags.DEFINE_integer("eval_every", 500, "Steps between dev evaluations.")
flags.DEFINE_integer("patience", 5, "Evaluations without improvement before stopping; 0 = off.")
flags.DEFINE_integer("seed", 0, "Random seed (weights of a fresh head, shuffling).")
flags.DEFINE_integer("max_items", None, "Use at most this many training items (quick runs).")
flags.DEFINE_string("export_dir", None, "Also export the best checkpoint as a SavedModel here.")
flags.DEFINE_bool("progress", True, "Show a progress bar.")


def load_items(specs: list[str], seed: int):
    """Items and skip counts from paths, or a sample task for ``sample:<lang>``."""
    import collections

    from albert_tf.data import read_documents, sample_language, sample_path
    from albert_tf.data.multiple_choice import read_multiple_choice
    from albert_tf.data.next_sentence import next_sentence_items

    items, skipped, files = [], collections.Counter(), []
    for spec in specs:
        lang = sample_language(spec)
        if lang is not None:
            docs = list(read_documents(sample_path(lang)))
            items += next_sentence_items(docs, seed=seed, lang=lang, prefix=f"sample_{lang}")
        else:
            files.append(spec)
    if files:
        more, skipped = read_multiple_choice(files)
        items += more
    return items, skipped


def _report(name: str, items, skipped, label_names=None) -> None:
    counts: dict = {}
    for item in items:
        key = len(item.options) if hasattr(item, "options") else item.label
        counts[key] = counts.get(key, 0) + 1
    if items and hasattr(items[0], "options"):
        print(f"{name}: {len(items)} items; options per item {dict(sorted(counts.items()))}")
    elif label_names:
        per_label = {label_names[k]: v for k, v in sorted(counts.items()) if k >= 0}
        print(f"{name}: {len(items)} items; per label {per_label}")
    else:
        print(f"{name}: {len(items)} items (scores)")
    if skipped:
        print(f"{name}: skipped {sum(skipped.values())} bad input(s): {dict(skipped)}")


def unseen_texts(items, train):
    """The items whose text (and pair) no training item has."""
    seen = {(item.text, item.text_pair) for item in train}
    return [item for item in items if (item.text, item.text_pair) not in seen]


def _split(train, test):
    from albert_tf.data.multiple_choice import split_examples

    if FLAGS.dev_files:
        return train, None, test
    fractions = [float(x) for x in FLAGS.split]
    train, dev, *rest = split_examples(train, fractions, seed=FLAGS.split_seed)
    return train, dev, (test or (rest[0] if rest else []))


def _classification_data(label_names):
    from albert_tf.data.classification import read_classification

    regression = FLAGS.num_labels == 1
    train, skipped, names = read_classification(
        FLAGS.train_files, label_names=label_names, regression=regression
    )
    if not regression and FLAGS.num_labels and label_names is None:
        if len(names) > FLAGS.num_labels:
            raise UserError(
                f"--num_labels={FLAGS.num_labels} but the training data has {len(names)} "
                f"labels: {names}"
            )
        names += [f"unused_{i}" for i in range(len(names), FLAGS.num_labels)]
    read = {"label_names": names, "regression": regression}
    dev = test = None
    if FLAGS.dev_files:
        dev, dev_skipped, _ = read_classification(FLAGS.dev_files, **read)
        _report("dev", dev, dev_skipped, names)
    if FLAGS.test_files:
        test, test_skipped, _ = read_classification(FLAGS.test_files, **read)
        _report("test", test, test_skipped, names)
    return train, dev, test, skipped, names


def main() -> None:
    if bool(FLAGS.checkpoint) == bool(FLAGS.init_config):
        raise UserError("give exactly one of --checkpoint and --init_config")
    import keras

    import albert_tf
    from albert_tf.serving import read_finetune_settings
    from albert_tf.tokenizers import load_tokenizer
    from albert_tf.training.devices import (
        Devices,
        auto_jit_compile,
        missing_gpu_warning,
        setup_line,
    )
    from albert_tf.training.finetuning.classification import ClassificationTrainer
    from albert_tf.training.finetuning.multiple_choice import MultipleChoiceTrainer
    from albert_tf.training.precision import dtype_policy, resolve_precision
    from albert_tf.training.strategies import create_strategy

    if FLAGS.strategy == "multi_worker_mirrored":
        raise UserError(
            "fine-tuning runs in one process: use --strategy=mirrored (all local GPUs) "
            "or --strategy=tpu; multi_worker_mirrored is for pretraining"
        )
    if FLAGS.steps_per_loop > 1 and FLAGS.gradient_accumulation_steps > 1:
        raise UserError(
            "--steps_per_loop > 1 runs one micro-batch a step: drop "
            "--gradient_accumulation_steps, or use --steps_per_loop=1"
        )
    if FLAGS.batch_size % FLAGS.gradient_accumulation_steps:
        raise UserError(
            f"--batch_size={FLAGS.batch_size} must be a multiple of "
            f"--gradient_accumulation_steps={FLAGS.gradient_accumulation_steps}"
        )
    strategy = create_strategy(FLAGS.strategy, FLAGS.tpu)
    devices = Devices.detect(strategy)
    precision = resolve_precision(FLAGS.precision, devices=devices)
    jit_compile = auto_jit_compile(devices) if FLAGS.jit_compile is None else FLAGS.jit_compile
    dtype = dtype_policy(precision)

    keras.utils.set_random_seed(FLAGS.seed)
    classification = FLAGS.task == "classification"
    tokenizer_dir = FLAGS.tokenizer_dir or os.path.join(FLAGS.checkpoint or "", "tokenizer")
    tokenizer = load_tokenizer(tokenizer_dir)

    label_names = None
    if classification:
        # Continuing a classifier: its label map decides the class indexes.
        previous = read_finetune_settings(FLAGS.checkpoint) if FLAGS.checkpoint else {}
        label_names = previous.get("label_names") or None
        train, dev, test, skipped, label_names = _classification_data(label_names)
        num_labels = 1 if FLAGS.num_labels == 1 else len(label_names)
        if not label_names and num_labels != 1:
            raise UserError("no labelled training items (see the counts above)")
    else:
        train, skipped = load_items(FLAGS.train_files, FLAGS.split_seed)
        dev = None
        if FLAGS.dev_files:
            dev, dev_skipped = load_items(FLAGS.dev_files, FLAGS.split_seed)
            _report("dev", dev, dev_skipped)
        test = None
        if FLAGS.test_files:
            test, test_skipped = load_items(FLAGS.test_files, FLAGS.split_seed)
            _report("test", test, test_skipped)
    split_train, split_dev, test = _split(train, test or [])
    train, dev = split_train, dev if dev is not None else split_dev

    # The model's variables live where the strategy puts them, in the run's precision.
    with strategy.scope():
        if FLAGS.checkpoint:
            if classification:
                model = albert_tf.load_text_classifier(FLAGS.checkpoint, num_labels, dtype=dtype)
            else:
                model = albert_tf.load_multiple_choice(FLAGS.checkpoint, dtype=dtype)
        else:
            config = albert_tf.AlbertConfig.from_json(FLAGS.init_config)
            if config.vocab_size != tokenizer.vocabulary_size:
                print(f"vocab_size {config.vocab_size} -> {tokenizer.vocabulary_size} (tokenizer)")
                config = config.replace(vocab_size=tokenizer.vocabulary_size)
            if classification:
                model = albert_tf.AlbertTextClassifier.from_albert_config(
                    config, dtype=dtype, num_labels=num_labels
                )
            else:
                model = albert_tf.AlbertMultipleChoice.from_albert_config(config, dtype=dtype)
    print(setup_line(devices, strategy, precision, jit_compile, FLAGS.fused_kernels))
    warning = missing_gpu_warning(devices)
    if warning:
        print(warning, file=sys.stderr)
    if FLAGS.max_items:
        train = train[: FLAGS.max_items]
    _report("train", train, skipped, label_names)
    if not train or not dev:
        raise UserError("no training or dev items left (see the counts above)")
    languages = sorted({item.lang for item in train if item.lang})
    common = dict(
        output_dir=FLAGS.output_dir,
        max_seq_length=FLAGS.max_seq_length,
        batch_size=FLAGS.batch_size,
        eval_batch_size=FLAGS.eval_batch_size,
        learning_rate=FLAGS.learning_rate,
        num_epochs=FLAGS.num_epochs,
        num_train_steps=FLAGS.num_train_steps,
        warmup_proportion=FLAGS.warmup_proportion,
        optimizer=FLAGS.optimizer,
        eval_every=FLAGS.eval_every,
        patience=FLAGS.patience,
        seed=FLAGS.seed,
        progress=FLAGS.progress,
        fused_kernels=FLAGS.fused_kernels,
        language=",".join(languages),
        strategy=strategy,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        jit_compile=jit_compile,
        steps_per_loop=FLAGS.steps_per_loop,
        max_consecutive_nonfinite_steps=FLAGS.max_consecutive_nonfinite_steps,
    )
    if classification:
        trainer = ClassificationTrainer(
            model,
            tokenizer,
            label_names=label_names if num_labels > 1 else (),
            metric=FLAGS.metric,
            **common,
        )
    else:
        trainer = MultipleChoiceTrainer(
            model,
            tokenizer,
            max_qa_length=FLAGS.max_qa_length,
            context_keep=FLAGS.context_keep,
            **common,
        )
    result = trainer.fit(train, dev)
    summary = {k: v for k, v in result.items() if k != "history"}
    if test:
        with strategy.scope():
            if classification:
                best_model = albert_tf.load_text_classifier(result["best_dir"], dtype=dtype)
            else:
                best_model = albert_tf.load_multiple_choice(result["best_dir"], dtype=dtype)
        if classification:
            best = ClassificationTrainer(
                best_model,
                tokenizer,
                label_names=trainer.label_names,
                metric=trainer.metric,
                **common | {"progress": False},
            )
        else:
            best = MultipleChoiceTrainer(
                best_model,
                tokenizer,
                max_qa_length=FLAGS.max_qa_length,
                context_keep=FLAGS.context_keep,
                **common | {"progress": False},
            )
        summary["test"] = best.evaluate(test)
        if classification:
            unseen = unseen_texts(test, train)
            if len(unseen) < len(test):
                # Copies of a training text measure memory, not classification.
                print(
                    f"test: {len(test) - len(unseen)} of {len(test)} items repeat the text of "
                    "a training item; 'test_unseen_texts' scores the others alone"
                )
                if unseen:
                    summary["test_unseen_texts"] = best.evaluate(unseen)
    print(json.dumps(summary, indent=2))
    from albert_tf.storage import write_json_atomic

    write_json_atomic(os.path.join(FLAGS.output_dir, "summary.json"), summary)
    if FLAGS.export_dir:
        from albert_tf.serving import export_saved_model

        card = None
        if classification:
            card = _classification_card(label_names, num_labels, train, test, summary)
        path = export_saved_model(result["best_dir"], FLAGS.export_dir, model_card=card)
        print(f"exported SavedModel: {path}")


def _classification_card(label_names, num_labels, train, test, summary) -> dict:
    """What the app's sidebar shows about an exported classifier, from this run."""
    import collections

    start = FLAGS.checkpoint or f"random weights ({FLAGS.init_config})"
    card = {
        "name": os.path.basename(os.path.normpath(FLAGS.export_dir)),
        "task": (
            f"text classification: {', '.join(label_names)}"
            if num_labels > 1
            else "regression: one score per text"
        ),
        "trained_on": ", ".join(FLAGS.train_files),
        "finetuning": (
            f"{len(train):,} items, {summary['steps']:,} steps from {start}, "
            f"{summary['train_seconds'] / 60:.0f} min"
        ),
    }
    if test and "test" in summary:
        held = {k: v for k, v in summary["test"].items() if k not in ("loss",)}
        held["items"] = held.pop("count")
        if num_labels > 1:
            counts = collections.Counter(item.label for item in test)
            held["majority"] = max(counts.values()) / len(test)
        if "test_unseen_texts" in summary:
            unseen = summary["test_unseen_texts"]
            key = "accuracy" if num_labels > 1 else "pearson"
            held[f"{key}_on_texts_not_in_training"] = unseen[key]
        card["held_out"] = held
    return card


def run() -> None:
    """The `albert-finetune` console script."""
    runner.run(main, "finetune", required=["output_dir", "train_files"])


if __name__ == "__main__":
    run()
