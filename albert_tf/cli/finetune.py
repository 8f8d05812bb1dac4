"""Fine-tune ALBERT for multiple choice.

    python -m albert_tf.finetune --flagfile=configs/finetune_quickstart.flags

Starts from a model directory in this package's format (``--checkpoint``:
pretrained here or converted with ``python -m albert_tf.convert``), or from
random weights (``--init_config``, a config JSON; with ``--tokenizer_dir``).
Data: JSON Lines / RACE / C3 files, globs or folders (see
docs/finetuning.md), or ``sample:en`` / ``sample:zh`` for a next-sentence
task built from the embedded sample corpora. Without ``--dev_files`` the
training items are split by a hash of their ids (``--split``).
"""

from __future__ import annotations

import json
import os

from absl import flags

from albert_tf.cli import runner
from albert_tf.cli.runner import UserError
from albert_tf.data.multiple_choice import CONTEXT_KEEP

FLAGS = flags.FLAGS
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
flags.DEFINE_integer("max_qa_length", 128, "Question+option pieces kept (the last ones).")
flags.DEFINE_enum(
    "context_keep",
    "start",
    list(CONTEXT_KEEP),
    "Which end of a too-long context is kept: start (a reading passage) or end "
    "(a 'what comes next?' item, whose clue is the text just before the options).",
)
flags.DEFINE_integer("batch_size", 16, "Items per step.")
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
flags.DEFINE_bool(
    "fused_kernels",
    True,
    "On CPU, train with the fused GELU, LayerNorm, masked-softmax and head split/merge "
    "kernels (stock TensorFlow ops if they cannot be built).",
)


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


def _report(name: str, items, skipped) -> None:
    counts: dict[int, int] = {}
    for item in items:
        counts[len(item.options)] = counts.get(len(item.options), 0) + 1
    print(f"{name}: {len(items)} items; options per item {dict(sorted(counts.items()))}")
    if skipped:
        print(f"{name}: skipped {sum(skipped.values())} bad input(s): {dict(skipped)}")


def main() -> None:
    if bool(FLAGS.checkpoint) == bool(FLAGS.init_config):
        raise UserError("give exactly one of --checkpoint and --init_config")
    import keras

    import albert_tf
    from albert_tf.data.multiple_choice import split_examples
    from albert_tf.tokenizers import load_tokenizer
    from albert_tf.training.finetuning import MultipleChoiceTrainer

    keras.utils.set_random_seed(FLAGS.seed)
    tokenizer_dir = FLAGS.tokenizer_dir or os.path.join(FLAGS.checkpoint or "", "tokenizer")
    tokenizer = load_tokenizer(tokenizer_dir)
    if FLAGS.checkpoint:
        model = albert_tf.load_multiple_choice(FLAGS.checkpoint)
    else:
        config = albert_tf.AlbertConfig.from_json(FLAGS.init_config)
        if config.vocab_size != tokenizer.vocabulary_size:
            print(f"vocab_size {config.vocab_size} -> {tokenizer.vocabulary_size} (tokenizer)")
            config = config.replace(vocab_size=tokenizer.vocabulary_size)
        model = albert_tf.AlbertMultipleChoice.from_albert_config(config)
    train, skipped = load_items(FLAGS.train_files, FLAGS.split_seed)
    test = []
    if FLAGS.dev_files:
        dev, dev_skipped = load_items(FLAGS.dev_files, FLAGS.split_seed)
        _report("dev", dev, dev_skipped)
    else:
        fractions = [float(x) for x in FLAGS.split]
        train, dev, *rest = split_examples(train, fractions, seed=FLAGS.split_seed)
        test = rest[0] if rest else []
    if FLAGS.test_files:
        test, test_skipped = load_items(FLAGS.test_files, FLAGS.split_seed)
        _report("test", test, test_skipped)
    if FLAGS.max_items:
        train = train[: FLAGS.max_items]
    _report("train", train, skipped)
    if not train or not dev:
        raise UserError("no training or dev items left (see the counts above)")
    languages = sorted({item.lang for item in train if item.lang})
    trainer = MultipleChoiceTrainer(
        model,
        tokenizer,
        output_dir=FLAGS.output_dir,
        max_seq_length=FLAGS.max_seq_length,
        max_qa_length=FLAGS.max_qa_length,
        context_keep=FLAGS.context_keep,
        batch_size=FLAGS.batch_size,
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
    )
    result = trainer.fit(train, dev)
    summary = {k: v for k, v in result.items() if k != "history"}
    if test:
        best = MultipleChoiceTrainer(
            albert_tf.load_multiple_choice(result["best_dir"]),
            tokenizer,
            output_dir=FLAGS.output_dir,
            max_seq_length=FLAGS.max_seq_length,
            max_qa_length=FLAGS.max_qa_length,
            context_keep=FLAGS.context_keep,
            batch_size=FLAGS.batch_size,
            progress=False,
        )
        summary["test"] = best.evaluate(test)
    print(json.dumps(summary, indent=2))
    with open(os.path.join(FLAGS.output_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    if FLAGS.export_dir:
        from albert_tf.serving import export_saved_model

        path = export_saved_model(result["best_dir"], FLAGS.export_dir)
        print(f"exported SavedModel: {path}")


def run() -> None:
    """The `albert-finetune` console script."""
    runner.run(main, "finetune", required=["output_dir", "train_files"])


if __name__ == "__main__":
    run()
