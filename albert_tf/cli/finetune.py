"""Fine-tune ALBERT for multiple choice, text classification, tagging or span QA.

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
(`albert_tf.tasks.classification.data`); ``--num_labels=1`` fine-tunes a
regression model (STS-B). ``--task=tagging`` reads named entities as character
spans or CoNLL columns (`albert_tf.tasks.tagging.data`); ``--task=span_qa``
reads SQuAD-layout JSON (SQuAD 1.1/2.0, CMRC 2018, DRCD) or JSON Lines
questions with answers (`albert_tf.tasks.span_qa.data`). Without
``--dev_files`` the training items are split by a hash of their ids (``--split``).
"""

from __future__ import annotations

import json
import os
import sys

from absl import flags

from albert_tf.cli import runner, scale_flags
from albert_tf.cli.runner import UserError
from albert_tf.data.choices import CONTEXT_KEEP
from albert_tf.tasks import DEFAULT_TASK, TASKS, get_task

FLAGS = flags.FLAGS
# --strategy, --precision, --jit_compile, --gradient_accumulation_steps, --steps_per_loop,
# --fused_kernels: the same flags and defaults as pretraining.
flags.adopt_module_key_flags(scale_flags)
flags.DEFINE_enum(
    "task",
    DEFAULT_TASK,
    list(TASKS),
    "What to fine-tune for: "
    + "; ".join(f"{name}: {spec.description}" for name, spec in TASKS.items())
    + ".",
)
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
    "max_query_length", 64, "span_qa: question pieces kept (the first ones).", lower_bound=1
)
flags.DEFINE_integer(
    "doc_stride",
    128,
    "span_qa: pieces between the starts of a long context's windows (each window holds "
    "as many context pieces as fit after the question).",
    lower_bound=1,
)
flags.DEFINE_integer("max_answer_length", 30, "span_qa: longest answer, in pieces.", lower_bound=1)
flags.DEFINE_integer(
    "n_best_size", 20, "span_qa: candidate spans kept per window and question.", lower_bound=1
)
flags.DEFINE_integer(
    "tagger_lstm_units",
    None,
    "tagging: a bidirectional LSTM of this many units each way between the encoder and "
    "the tag layer of a fresh head (default and 0: none, Hugging Face's head; a head with "
    "one does not convert to Hugging Face). Unset, a tagger being continued keeps its own.",
    lower_bound=0,
)
flags.DEFINE_bool(
    "tagger_crf",
    None,
    "tagging: a linear-chain CRF over a fresh head's tags (learned tag-to-tag scores; "
    "trained on the chain's likelihood, decoded by Viterbi; does not convert to Hugging "
    "Face). Unset, a tagger being continued keeps its own, a fresh head has none.",
)
flags.DEFINE_float(
    "tagger_crf_learning_rate",
    None,
    "tagging: the peak learning rate of a CRF head's scores (default: --learning_rate). "
    "They start at zero: at a base-size model's 1e-5 they barely move, and NER recipes "
    "give a CRF about 1e-3. Follows the same warm-up and decay.",
    lower_bound=0.0,
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
flags.DEFINE_bool(
    "adam_bias_correction",
    False,
    "Correct Adam's moment estimates for their zero start, as Hugging Face's and Model "
    "Garden's AdamW do (off: the official optimizer's larger early steps).",
)
flags.DEFINE_integer("eval_every", 500, "Steps between dev evaluations.")
flags.DEFINE_integer("patience", 5, "Evaluations without improvement before stopping; 0 = off.")
flags.DEFINE_integer("seed", 0, "Random seed (weights of a fresh head, shuffling).")
flags.DEFINE_integer("max_items", None, "Use at most this many training items (quick runs).")
flags.DEFINE_string("export_dir", None, "Also export the best checkpoint as a SavedModel here.")
flags.DEFINE_bool("progress", True, "Show a progress bar.")


def _report(task, name: str, items, skipped, label_names=None) -> None:
    for line in task.describe(name, items, skipped, label_names):
        print(line)


def _split(train, test):
    from albert_tf.data.splits import split_examples

    if FLAGS.dev_files:
        return train, None, test
    fractions = [float(x) for x in FLAGS.split]
    train, dev, *rest = split_examples(train, fractions, seed=FLAGS.split_seed)
    return train, dev, (test or (rest[0] if rest else []))


def main() -> None:
    if bool(FLAGS.checkpoint) == bool(FLAGS.init_config):
        raise UserError("give exactly one of --checkpoint and --init_config")
    import keras

    import albert_tf
    from albert_tf.tasks.task import FineTuningSettings
    from albert_tf.tokenizers import load_tokenizer
    from albert_tf.training.devices import (
        Devices,
        auto_jit_compile,
        cluster_workers,
        missing_gpu_warning,
        setup_line,
    )
    from albert_tf.training.precision import dtype_policy, resolve_precision
    from albert_tf.training.strategies import create_strategy

    if FLAGS.strategy == "multi_worker_mirrored":
        raise UserError(
            "fine-tuning runs in one process: use --strategy=mirrored (all local GPUs) "
            "or --strategy=tpu; multi_worker_mirrored is for pretraining"
        )
    if FLAGS.strategy == "auto" and cluster_workers(os.environ.get("TF_CONFIG")) > 1:
        # --strategy=auto would make them one multi-worker job, which fine-tuning
        # is not; each alone would write the same output directory.
        raise UserError(
            "fine-tuning runs in one process, but TF_CONFIG lists several workers: "
            "launch one fine-tuning process (unset TF_CONFIG), with --strategy=mirrored "
            "for all local GPUs"
        )
    # auto: fine-tuning has no memory plan yet; its batches are small.
    accumulation = scale_flags.accumulation_steps() or 1
    if FLAGS.steps_per_loop > 1 and accumulation > 1:
        raise UserError(
            "--steps_per_loop > 1 runs one micro-batch a step: drop "
            "--gradient_accumulation_steps, or use --steps_per_loop=1"
        )
    if FLAGS.batch_size % accumulation:
        raise UserError(
            f"--batch_size={FLAGS.batch_size} must be a multiple of "
            f"--gradient_accumulation_steps={accumulation}"
        )
    strategy = create_strategy(FLAGS.strategy, FLAGS.tpu)
    devices = Devices.detect(strategy)
    precision = resolve_precision(FLAGS.precision, devices=devices)
    jit_compile = auto_jit_compile(devices) if FLAGS.jit_compile is None else FLAGS.jit_compile
    dtype = dtype_policy(precision)

    keras.utils.set_random_seed(FLAGS.seed)
    task = get_task(FLAGS.task).load("task")()
    settings = FineTuningSettings(
        train_files=FLAGS.train_files,
        dev_files=FLAGS.dev_files,
        test_files=FLAGS.test_files,
        split_seed=FLAGS.split_seed,
        checkpoint=FLAGS.checkpoint,
        init_config=FLAGS.init_config,
        export_dir=FLAGS.export_dir,
        num_labels=FLAGS.num_labels,
        metric=FLAGS.metric,
        max_qa_length=FLAGS.max_qa_length,
        context_keep=FLAGS.context_keep,
        max_query_length=FLAGS.max_query_length,
        doc_stride=FLAGS.doc_stride,
        max_answer_length=FLAGS.max_answer_length,
        n_best_size=FLAGS.n_best_size,
        tagger_lstm_units=FLAGS.tagger_lstm_units,
        tagger_crf=FLAGS.tagger_crf,
        tagger_crf_learning_rate=FLAGS.tagger_crf_learning_rate,
    )
    tokenizer_dir = FLAGS.tokenizer_dir or os.path.join(FLAGS.checkpoint or "", "tokenizer")
    tokenizer = load_tokenizer(tokenizer_dir)

    data = task.read(settings, lambda *args: _report(task, *args))
    data.train, split_dev, data.test = _split(data.train, data.test or [])
    data.dev = data.dev if data.dev is not None else split_dev

    # The model's variables live where the strategy puts them, in the run's precision.
    with strategy.scope():
        if FLAGS.checkpoint:
            model = task.load_model(FLAGS.checkpoint, dtype, data)
        else:
            config = albert_tf.AlbertConfig.from_json(FLAGS.init_config)
            if config.vocab_size != tokenizer.vocabulary_size:
                print(f"vocab_size {config.vocab_size} -> {tokenizer.vocabulary_size} (tokenizer)")
                config = config.replace(vocab_size=tokenizer.vocabulary_size)
            model = task.build_model(config, dtype, data)
    print(setup_line(devices, strategy, precision, jit_compile, FLAGS.fused_kernels))
    warning = missing_gpu_warning(devices)
    if warning:
        print(warning, file=sys.stderr)
    if FLAGS.max_items:
        data.train = data.train[: FLAGS.max_items]
    _report(task, "train", data.train, data.skipped, data.label_names)
    if not data.train or not data.dev:
        raise UserError("no training or dev items left (see the counts above)")
    languages = sorted({item.lang for item in data.train if item.lang})
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
        adam_bias_correction=FLAGS.adam_bias_correction,
        eval_every=FLAGS.eval_every,
        patience=FLAGS.patience,
        seed=FLAGS.seed,
        progress=FLAGS.progress,
        fused_kernels=FLAGS.fused_kernels,
        language=",".join(languages),
        strategy=strategy,
        gradient_accumulation_steps=accumulation,
        jit_compile=jit_compile,
        steps_per_loop=FLAGS.steps_per_loop,
        max_consecutive_nonfinite_steps=FLAGS.max_consecutive_nonfinite_steps,
    )
    trainer = task.trainer(model, tokenizer, data, settings, **common)
    result = trainer.fit(data.train, data.dev)
    summary = {k: v for k, v in result.items() if k != "history"}
    if data.test:
        with strategy.scope():
            best_model = task.load_model(result["best_dir"], dtype, data)
        best = task.trainer(best_model, tokenizer, data, settings, **common | {"progress": False})
        summary["test"] = best.evaluate(data.test)
        summary.update(task.extra_scores(best, data.test, data.train, print))
    print(json.dumps(summary, indent=2))
    from albert_tf.storage import write_json_atomic

    write_json_atomic(os.path.join(FLAGS.output_dir, "summary.json"), summary)
    if FLAGS.export_dir:
        from albert_tf.serving import export_saved_model

        card = task.model_card(settings, data, summary)
        path = export_saved_model(result["best_dir"], FLAGS.export_dir, model_card=card)
        print(f"exported SavedModel: {path}")


def run() -> None:
    """The `albert-finetune` console script."""
    runner.run(main, "finetune", required=["output_dir", "train_files"])


if __name__ == "__main__":
    run()
