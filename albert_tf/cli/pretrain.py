"""Pretrain ALBERT with MLM + SOP: ``python -m albert_tf.pretrain --flagfile=...``.

Starts from raw text (``--corpus``: files, relative ones found in ``--data_dir``,
or ``sample:en`` / ``sample:zh`` for the embedded samples) or from shards written by
``albert_tf.create_pretraining_data`` (``--train_files``). Restarting the
same command resumes from the last checkpoint in ``--model_dir``. At the
end it evaluates on held-out data, writes ``eval_results.json`` and saves
the model (with its tokenizer) in this package's format to
``MODEL_DIR/final``, loadable with ``albert_tf.load``.

Exit status: 0 done; 2 a mistake in the flags or inputs (one line says which);
42 preempted: SIGTERM made every worker save at the next step, and the same
command resumes there; 3 a worker of a multi-worker run was lost: restart them
all (docs/pretraining.md, "When things go wrong").

Every flag: ``python -m albert_tf.pretrain --helpfull``.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from absl import flags

from albert_tf.cli import runner, scale_flags
from albert_tf.cli.runner import UserError
from albert_tf.config import RECOMPUTE_MODES, SHARE_MODES
from albert_tf.data.choices import DATA_SERVICE_MODES
from albert_tf.data.examples import SENTENCE_TASKS
from albert_tf.training.pretraining.options import OPTIMIZERS, PretrainingOptions

#: The exit status when a worker of a multi-worker run was lost (restart them all).
WORKER_LOST_EXIT_CODE = 3

FLAGS = flags.FLAGS
flags.adopt_module_key_flags(scale_flags)
# The recipe's defaults have one home, PretrainingOptions; the flags read them from it.
_DEFAULTS = {field.name: field.default for field in dataclasses.fields(PretrainingOptions)}
# --- where
flags.DEFINE_string("model_dir", None, "Checkpoints, logs, prepared data and the final model.")
# --- data
flags.DEFINE_string(
    "corpus",
    None,
    "Raw text to pretrain on: comma-separated files/globs (text or JSON "
    "Lines, gzip or not), or sample:en / sample:zh. Prepared once into "
    "MODEL_DIR/data.",
)
flags.DEFINE_string(
    "data_dir",
    None,
    "Where relative --corpus files are found (default: the working directory); the "
    "recipes in configs/ name their corpora relative to it.",
)
flags.DEFINE_string("train_files", None, "Existing pretraining shards (glob), instead of --corpus.")
flags.DEFINE_string("eval_files", None, "Held-out shards (glob) for --train_files runs.")
flags.DEFINE_string(
    "tokenizer_dir",
    None,
    "An existing tokenizer; default: train one on --corpus (or the one beside --train_files).",
)
flags.DEFINE_enum(
    "tokenizer_kind",
    "sentencepiece",
    ["sentencepiece", "wordpiece"],
    "Tokenizer to train from --corpus: sentencepiece (English) or wordpiece (Chinese).",
)
flags.DEFINE_integer(
    "vocab_size",
    30000,
    "Pieces of a tokenizer trained from --corpus (shrunk to what the corpus supports).",
)
flags.DEFINE_boolean(
    "nfkc",
    True,
    "wordpiece trained from --corpus: fold text with Unicode NFKC (full-width → ASCII), "
    "in training and in every later tokenisation.",
)
flags.DEFINE_boolean(
    "fold_punctuation",
    True,
    "sentencepiece trained from --corpus: fold curly quotes, dashes and no-break spaces "
    "to keyboard characters, in training and in every later tokenisation.",
)
flags.DEFINE_integer("dupe_factor", 10, "Passes over --corpus when making pairs.")
flags.DEFINE_integer("eval_every_document", 20, "Hold out one document in N of --corpus.")
flags.DEFINE_integer("max_seq_length", _DEFAULTS["max_seq_length"], "Tokens per example.")
flags.DEFINE_integer(
    "max_predictions_per_seq",
    _DEFAULTS["max_predictions_per_seq"],
    "Masked positions per example; default round(0.15 * max_seq_length).",
)
flags.DEFINE_enum(
    "sentence_task",
    _DEFAULTS["sentence_task"],
    list(SENTENCE_TASKS),
    "sop (the paper), nsp (BERT's) or none, for the Table 5 ablation.",
)
# --- model
flags.DEFINE_string("preset", "albert_base_v2", "Model shape (albert_tf.presets).")
flags.DEFINE_string("albert_config", None, "albert_config.json / config.json; overrides --preset.")
flags.DEFINE_integer("embedding_size", None, "Override E.")
flags.DEFINE_integer("hidden_size", None, "Override H.")
flags.DEFINE_integer("num_hidden_layers", None, "Override L.")
flags.DEFINE_integer("num_attention_heads", None, "Override the head count.")
flags.DEFINE_integer("intermediate_size", None, "Override the FFN width.")
flags.DEFINE_enum(
    "share",
    None,
    list(SHARE_MODES),
    "Override cross-layer sharing (the paper's Table 4 ablation).",
)
# --- optimisation
flags.DEFINE_integer(
    "train_batch_size",
    _DEFAULTS["train_batch_size"],
    "Global batch size (all replicas, all accumulation steps).",
)
flags.DEFINE_integer(
    "tokens_per_batch",
    _DEFAULTS["tokens_per_batch"],
    "Token budget per optimizer step, instead of --train_batch_size: examples are "
    "grouped by length and shorter ones come in larger batches (RoBERTa). At least "
    "max_seq_length x replicas x accumulation steps.",
)
flags.DEFINE_integer("num_train_steps", _DEFAULTS["num_train_steps"], "Optimizer steps.")
flags.DEFINE_integer("num_warmup_steps", _DEFAULTS["num_warmup_steps"], "Linear warm-up steps.")
flags.DEFINE_float("learning_rate", _DEFAULTS["learning_rate"], "Peak learning rate.")
flags.DEFINE_enum("optimizer", _DEFAULTS["optimizer"], list(OPTIMIZERS), "Optimizer.")
flags.DEFINE_float(
    "weight_decay_rate",
    _DEFAULTS["weight_decay_rate"],
    "Weight decay (not on LayerNorm or biases).",
)
flags.DEFINE_float("clip_norm", _DEFAULTS["clip_norm"], "Global-norm gradient clipping.")
# --- memory
flags.DEFINE_enum(
    "recompute",
    _DEFAULTS["recompute"],
    list(RECOMPUTE_MODES),
    "layer: keep only each transformer layer's input for the backward pass and run the "
    "layer again there (a fraction of the activation memory, about a third more "
    "compute; needs a model without dropout, as ALBERT v2).",
)
flags.DEFINE_string(
    "assume_devices",
    None,
    "Plan memory for hardware that is not here: COUNTxMEMORY (8x80GB, 8x40GiB) or a "
    "TPU slice (v4-8, v3-32). With --gradient_accumulation_steps=auto it also sets the "
    "run's accumulation.",
)
flags.DEFINE_bool(
    "plan_only",
    False,
    "Print the memory plan (micro-batch x accumulation steps x devices, and the bytes "
    "the compiled step needs) and exit without data or training.",
)
flags.DEFINE_integer("seed", _DEFAULTS["seed"], "Seed of data order, masks and initialisation.")
# --- distribution
flags.DEFINE_float(
    "collective_timeout_seconds",
    600.0,
    "Multi-worker runs: the longest one all-reduce may wait for the other workers "
    "before the run stops with an error naming it (0: wait forever). A dead worker "
    "is noticed sooner, by the coordination service's ~10 s heartbeat.",
    lower_bound=0.0,
)
flags.DEFINE_string(
    "data_service",
    _DEFAULTS["data_service"],
    "A tf.data service dispatcher (grpc://HOST:PORT, started with python -m "
    "albert_tf.data_service) whose workers read and mask the training batches.",
)
flags.DEFINE_enum(
    "data_service_mode",
    _DEFAULTS["data_service_mode"],
    list(DATA_SERVICE_MODES),
    "parallel_epochs: every service worker reads all files in its own order; "
    "distributed_epoch: the workers share out each epoch's files.",
)
# --- bookkeeping
flags.DEFINE_integer(
    "save_checkpoints_steps",
    _DEFAULTS["save_checkpoints_steps"],
    "Save a checkpoint every N steps (and see --save_checkpoints_seconds).",
    lower_bound=1,
)
flags.DEFINE_float(
    "save_checkpoints_seconds",
    _DEFAULTS["save_checkpoints_seconds"],
    "Also save about this often, in seconds of training, so a crash loses at most "
    "about this much (0: steps only). The seconds become a step interval timed on the "
    "first steps after each start, the same on every worker.",
    lower_bound=0.0,
)
flags.DEFINE_integer("keep_checkpoint_max", _DEFAULTS["keep_checkpoint_max"], "Checkpoints kept.")
flags.DEFINE_integer(
    "log_every_steps", _DEFAULTS["log_every_steps"], "TensorBoard/progress-bar interval."
)
flags.DEFINE_integer(
    "eval_every_steps",
    _DEFAULTS["eval_every_steps"],
    "Evaluate during training every N steps (0: only at the end).",
)
flags.DEFINE_integer("eval_batch_size", _DEFAULTS["eval_batch_size"], "Held-out batch size.")
flags.DEFINE_integer(
    "num_eval_steps", _DEFAULTS["num_eval_steps"], "Held-out batches per evaluation (0: all)."
)
flags.DEFINE_bool("progress_bar", _DEFAULTS["progress_bar"], "Show a progress bar.")


def build_config(vocab_size: int):
    from albert_tf.config import AlbertConfig
    from albert_tf.presets import get_preset

    config = (
        AlbertConfig.from_json(FLAGS.albert_config)
        if FLAGS.albert_config
        else get_preset(FLAGS.preset)
    )
    overrides = {
        name: FLAGS[name].value
        for name in (
            "embedding_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "share",
        )
        if FLAGS[name].value is not None
    }
    if config.vocab_size != vocab_size:
        overrides["vocab_size"] = vocab_size  # the model follows its tokenizer
    if FLAGS.max_seq_length > config.max_position_embeddings:
        raise UserError(
            f"--max_seq_length={FLAGS.max_seq_length} exceeds the model's "
            f"max_position_embeddings={config.max_position_embeddings}."
        )
    return config.replace(**overrides)


def _options(**paths) -> PretrainingOptions:
    from albert_tf.training.pretraining.faults import ENV_VAR

    values = {
        name: FLAGS[name].value
        for name in _DEFAULTS
        if name in FLAGS and name not in ("model_dir", "train_files", "eval_files")
    }
    values["gradient_accumulation_steps"] = scale_flags.accumulation_steps() or 1
    return PretrainingOptions(faults=os.environ.get(ENV_VAR) or None, **paths, **values)


def _memory_plan(config, options: PretrainingOptions, strategy=None):
    """The plan for --assume_devices or the accelerators found; None on CPU alone."""
    from albert_tf.training.devices import Devices, auto_precision
    from albert_tf.training.memory_plan import device_budget, parse_devices
    from albert_tf.training.pretraining.memory import plan_pretraining

    devices = Devices.detect(strategy)
    platform = "TPU" if devices.tpu else "GPU" if devices.gpus else "CPU"
    if options.precision == "auto":
        # Hardware named by --assume_devices is taken as having bfloat16 (TPUs,
        # A100/H100 and later); found devices decide as the run itself will.
        precision = "bfloat16" if FLAGS.assume_devices else auto_precision(devices)
        options = dataclasses.replace(options, precision=precision)
    if FLAGS.assume_devices:
        try:
            budget = parse_devices(FLAGS.assume_devices)
        except ValueError as e:
            raise UserError(str(e)) from None
        if strategy is not None and budget.count != strategy.num_replicas_in_sync:
            raise UserError(
                f"--assume_devices={FLAGS.assume_devices} names {budget.count} devices but "
                f"this run has {strategy.num_replicas_in_sync} replicas; drop "
                "--assume_devices to plan for the devices found"
            )
    else:
        replicas = strategy.num_replicas_in_sync if strategy is not None else None
        budget = device_budget(devices, replicas)
        if budget is None:
            return None
    try:
        plan = plan_pretraining(config, options, budget, platform=platform)
        return dataclasses.replace(plan, precision=options.precision)
    except ValueError as e:
        raise UserError(str(e)) from None


def plan_only() -> None:
    """--plan_only: the memory plan of the flags' model and batch, no data needed."""
    from albert_tf.presets import get_preset

    config = build_config(get_preset(FLAGS.preset).vocab_size)
    options = _options(model_dir=FLAGS.model_dir or "", train_files="")
    plan = _memory_plan(config, options)
    if plan is None:  # CPU alone, and no --assume_devices
        raise UserError(
            "no GPU or TPU found to plan for: give --assume_devices (e.g. 8x80GB or v4-8)"
        )
    print(
        f"model: E={config.embedding_size} H={config.hidden_size} "
        f"L={config.num_hidden_layers} V={config.vocab_size}; batch {options.train_batch_size} "
        f"x {options.max_seq_length} tokens; precision {plan.precision}; "
        f"recompute {options.recompute}"
    )
    print(plan.describe())
    explicit = scale_flags.accumulation_steps()
    if explicit is not None and explicit != plan.accumulation_steps:
        print(
            f"note: --gradient_accumulation_steps={explicit} is kept as given; the plan "
            f"would use {plan.accumulation_steps}"
        )


def main() -> None:
    if FLAGS.plan_only:
        plan_only()
        return
    if not FLAGS.model_dir:  # checked here: --plan_only needs none
        raise UserError("--model_dir is required (see --helpshort)")
    if bool(FLAGS.corpus) == bool(FLAGS.train_files):
        raise UserError("Give exactly one of --corpus or --train_files.")

    from albert_tf.checkpoints.saved_format import save_model
    from albert_tf.data.inputs import in_data_dir
    from albert_tf.data.preparation import prepare_pretraining_data
    from albert_tf.data.shards import read_metadata
    from albert_tf.tokenizers import load_tokenizer
    from albert_tf.training.devices import missing_gpu_warning
    from albert_tf.training.pretraining.trainer import PretrainingTrainer
    from albert_tf.training.strategies import create_strategy

    strategy = create_strategy(FLAGS.strategy, FLAGS.tpu, FLAGS.collective_timeout_seconds)
    model_dir = FLAGS.model_dir
    if FLAGS.corpus:
        prepared = prepare_pretraining_data(
            ",".join(in_data_dir(p.strip(), FLAGS.data_dir) for p in FLAGS.corpus.split(",")),
            os.path.join(model_dir, "data"),
            tokenizer_dir=FLAGS.tokenizer_dir,
            tokenizer_kind=FLAGS.tokenizer_kind,
            vocab_size=FLAGS.vocab_size,
            nfkc=FLAGS.nfkc,
            fold_punctuation=FLAGS.fold_punctuation,
            max_seq_length=FLAGS.max_seq_length,
            sentence_task=FLAGS.sentence_task,
            dupe_factor=FLAGS.dupe_factor,
            eval_every=FLAGS.eval_every_document,
            seed=FLAGS.seed,
        )
        train_files, eval_files = prepared.train_files, prepared.eval_files
        tokenizer_dir = prepared.tokenizer_dir
    else:
        train_files, eval_files = FLAGS.train_files, FLAGS.eval_files
        tokenizer_dir = FLAGS.tokenizer_dir
        if tokenizer_dir is None:
            from albert_tf import storage

            first = storage.glob(train_files)
            meta = read_metadata(os.path.dirname(first[0])) if first else None
            tokenizer_dir = (meta or {}).get("tokenizer_dir")
        if tokenizer_dir is None:
            raise UserError("--train_files runs need --tokenizer_dir.")
    tokenizer = load_tokenizer(tokenizer_dir)
    config = build_config(tokenizer.vocabulary_size)
    options = _options(model_dir=model_dir, train_files=train_files, eval_files=eval_files)
    if scale_flags.accumulation_steps() is None and options.tokens_per_batch is None:
        plan = _memory_plan(config, options, strategy)
        if plan is not None:
            print(plan.describe())
            options = dataclasses.replace(
                options, gradient_accumulation_steps=plan.accumulation_steps
            )

    print(
        f"model: E={config.embedding_size} H={config.hidden_size} "
        f"L={config.num_hidden_layers} share={config.share} V={config.vocab_size}"
    )
    trainer = PretrainingTrainer(config, options, strategy)
    print(trainer.describe())
    warning = missing_gpu_warning(trainer.devices)
    if warning:
        print(warning, file=sys.stderr)
    from albert_tf.training.strategies import WorkerLostError

    try:
        trainer.train()
    except WorkerLostError as e:
        # Not the user's mistake, but theirs to act on: one line, no traceback.
        print(f"pretrain: error: {e}", file=sys.stderr)
        sys.exit(WORKER_LOST_EXIT_CODE)
    results = {}
    if eval_files:
        # Collective in a multi-worker run: every worker takes part.
        results = trainer.evaluate()
    if not trainer.chief:
        return
    if eval_files:
        from albert_tf.baselines.unigram import unigram_baseline

        results.update(
            unigram_baseline(
                train_files,
                eval_files,
                vocab_size=config.vocab_size,
                special_ids=tokenizer.special_ids,
                max_seq_length=options.max_seq_length,
                max_predictions_per_seq=options.max_predictions_per_seq,
                seed=options.seed,
                max_batches=options.num_eval_steps,
                batch_size=options.eval_batch_size,
            )
        )
        print(
            f"unigram baseline: MLM accuracy {results['unigram_mlm_accuracy']:.4f}, "
            f"loss {results['unigram_mlm_loss']:.4f}"
        )
        from albert_tf.storage import write_json_atomic

        write_json_atomic(os.path.join(model_dir, "eval_results.json"), results)
    final = os.path.join(model_dir, "final")
    save_model(trainer.model, final, tokenizer=tokenizer)
    print(f"saved {final} (load it with albert_tf.load)")


def run() -> None:
    """The `albert-pretrain` console script."""
    runner.run(main, "pretrain")


if __name__ == "__main__":
    run()
