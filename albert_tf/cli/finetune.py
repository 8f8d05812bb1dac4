"""Fine-tune ALBERT for one of the registered tasks (``--task``).

    python -m albert_tf.finetune --flagfile=configs/finetune_quickstart.flags
    python -m albert_tf.finetune --task=classification --flagfile=configs/classify_zh_reviews.flags

Starts from a model directory in this package's format (``--checkpoint``:
pretrained here or converted with ``python -m albert_tf.convert``), or from
random weights (``--init_config``, a config JSON; with ``--tokenizer_dir``).
Each task reads its own data formats (docs/finetuning.md; ``sample:en`` /
``sample:zh`` give multiple choice a next-sentence task built from the
embedded sample corpora). Without ``--dev_files`` the training items are split
by a hash of their ids (``--split``), each group in one part: the questions about one
context, the copies of one text. Data may be named relative to ``--data_dir``, or as a
public dataset: ``tfds:NAME[/CONFIG][:SPLIT]`` or a Hugging Face ``datasets`` folder.

The flags every task shares fill `FineTuningOptions`, whose defaults they show;
each task's own flags are declared by its settings module
(`albert_tf.tasks.settings`; ``--helpfull`` lists them under it) and fill its
settings object. The run itself is `albert_tf.tasks.run.run_finetuning`, which
Python code may call directly.
"""

from __future__ import annotations

import dataclasses

from absl import flags

from albert_tf.cli import runner, scale_flags
from albert_tf.tasks import TASKS, get_task
from albert_tf.tasks.settings import define_flags, settings_class, settings_from_flags
from albert_tf.training.finetuning.options import OPTIMIZERS, FineTuningOptions

FLAGS = flags.FLAGS
# --strategy, --precision, --jit_compile, --gradient_accumulation_steps, --steps_per_loop,
# --fused_kernels: the same flags and defaults as pretraining.
flags.adopt_module_key_flags(scale_flags)
# The shared options' defaults have one home, FineTuningOptions; the flags read them from it.
_DEFAULTS = {field.name: field.default for field in dataclasses.fields(FineTuningOptions)}
flags.DEFINE_enum(
    "task",
    _DEFAULTS["task"],
    list(TASKS),
    "What to fine-tune for: "
    + "; ".join(f"{name}: {spec.description}" for name, spec in TASKS.items())
    + ".",
)
flags.DEFINE_string("checkpoint", None, "Model directory to start from (albert_tf format).")
flags.DEFINE_string("init_config", None, "Instead of --checkpoint: config JSON, random init.")
flags.DEFINE_string("tokenizer_dir", None, "Tokenizer (default: CHECKPOINT/tokenizer).")
flags.DEFINE_list(
    "train_files",
    None,
    "Training data: files, globs, folders, sample:en|zh, tfds:NAME[/CONFIG][:SPLIT] "
    "(tensorflow-datasets) or a folder / .parquet file written by Hugging Face datasets.",
)
flags.DEFINE_string(
    "data_dir",
    None,
    "Where relative --train_files/--dev_files/--test_files are found (default: the "
    "working directory); the recipes in configs/ name their data relative to it.",
)
flags.DEFINE_list("dev_files", None, "Dev data (default: a split of --train_files).")
flags.DEFINE_list("test_files", None, "Test data, scored with the best checkpoint at the end.")
flags.DEFINE_list(
    "split",
    [str(fraction) for fraction in _DEFAULTS["split"]],
    "train,dev,test fractions without --dev_files.",
)
flags.DEFINE_integer("split_seed", _DEFAULTS["split_seed"], "Seed of the hash split.")
flags.DEFINE_string("output_dir", None, "Where best/ and metrics.jsonl go.")
flags.DEFINE_integer("max_seq_length", _DEFAULTS["max_seq_length"], "Packed sequence length limit.")
flags.DEFINE_integer(
    "batch_size",
    _DEFAULTS["batch_size"],
    "Items per optimizer step (all replicas, all accumulation steps).",
)
flags.DEFINE_integer(
    "eval_batch_size",
    _DEFAULTS["eval_batch_size"],
    "Items per dev/test batch (default: twice a micro-batch, batch_size / "
    "gradient_accumulation_steps).",
    lower_bound=1,
)
flags.DEFINE_float("learning_rate", _DEFAULTS["learning_rate"], "Peak learning rate.")
flags.DEFINE_float("num_epochs", _DEFAULTS["num_epochs"], "Epochs (unless --num_train_steps).")
flags.DEFINE_integer("num_train_steps", _DEFAULTS["num_train_steps"], "Total steps.")
flags.DEFINE_float(
    "warmup_proportion", _DEFAULTS["warmup_proportion"], "Warm-up fraction of the steps."
)
flags.DEFINE_enum("optimizer", _DEFAULTS["optimizer"], list(OPTIMIZERS), "Optimizer.")
flags.DEFINE_bool(
    "adam_bias_correction",
    _DEFAULTS["adam_bias_correction"],
    "Correct Adam's moment estimates for their zero start, as Hugging Face's and Model "
    "Garden's AdamW do (off: the official optimizer's larger early steps).",
)
flags.DEFINE_integer("eval_every", _DEFAULTS["eval_every"], "Steps between dev evaluations.")
flags.DEFINE_integer(
    "patience", _DEFAULTS["patience"], "Evaluations without improvement before stopping; 0 = off."
)
flags.DEFINE_integer("seed", _DEFAULTS["seed"], "Random seed (weights of a fresh head, shuffling).")
flags.DEFINE_integer(
    "max_items", _DEFAULTS["max_items"], "Use at most this many training items (quick runs)."
)
flags.DEFINE_string("export_dir", None, "Also export the best checkpoint as a SavedModel here.")
flags.DEFINE_bool("progress", _DEFAULTS["progress"], "Show a progress bar.")
# Each task's own flags, declared from its settings class; key flags of this command,
# so --helpshort lists them with the shared ones.
for _spec in TASKS.values():
    for _name in define_flags(settings_class(_spec), FLAGS):
        flags.declare_key_flag(_name)

# Fields of FineTuningOptions that are not read from a flag of the same name as is.
_NOT_PLAIN = ("task", "settings", "split", "gradient_accumulation_steps")


def _options() -> FineTuningOptions:
    """The parsed flags as the run's options, the task's own in its settings object."""
    values = {name: FLAGS[name].value for name in _DEFAULTS if name not in _NOT_PLAIN}
    return FineTuningOptions(
        task=FLAGS.task,
        settings=settings_from_flags(settings_class(get_task(FLAGS.task)), FLAGS),
        split=[float(x) for x in FLAGS.split],
        # None for auto: run_finetuning plans it on the accelerators found (1 on CPU).
        gradient_accumulation_steps=scale_flags.accumulation_steps(),
        **values,
    )


def main() -> None:
    from albert_tf.tasks.run import run_finetuning

    run_finetuning(_options())


def run() -> None:
    """The `albert-finetune` console script."""
    runner.run(main, "finetune", required=["output_dir", "train_files"])


if __name__ == "__main__":
    run()
