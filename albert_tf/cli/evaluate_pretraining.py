"""Score a pretrained model on held-out shards: MLM, and SOP or NSP accuracy.

    python -m albert_tf.evaluate_pretraining --model=runs/ablation_en/nsp/final \\
        --eval_files='runs/ablation_en/sop/data/eval_shards/*.tfrecord'

Any model directory in this package's format (``MODEL_DIR/final`` of a
pretraining run, or a converted checkpoint) on any pretraining shards whose
vocabulary it shares. Scoring one task's model on the other task's pairs is the
paper's Table 5 (docs/pretraining.md). Prints the results as JSON and, with
``--output``, writes them to a file.
"""

from __future__ import annotations

import json
import os

from absl import flags

from albert_tf import storage
from albert_tf.cli import runner
from albert_tf.cli.runner import UserError
from albert_tf.storage import write_json_atomic

FLAGS = flags.FLAGS
flags.DEFINE_string("model", None, "Model directory (albert_tf format), e.g. MODEL_DIR/final.")
flags.DEFINE_string("eval_files", None, "Held-out pretraining shards (glob).")
flags.DEFINE_integer(
    "max_seq_length", None, "Tokens per example; default: as the shards' metadata.json records."
)
flags.DEFINE_integer(
    "max_predictions_per_seq",
    None,
    "Masked positions per example; default round(0.15 * max_seq_length).",
)
flags.DEFINE_integer("batch_size", 64, "Examples per forward pass.")
flags.DEFINE_integer("num_batches", 0, "Stop after this many batches (0: all).")
flags.DEFINE_integer(
    "seed", 12345, "Seed of the masks (12345 scores the positions the trainer scored)."
)
flags.DEFINE_string("output", None, "Also write the results to this JSON file.")


def main() -> None:
    if not storage.isdir(FLAGS.model):
        raise UserError(
            f"no model directory at {FLAGS.model}; pass --model=MODEL_DIR/final of a "
            "pretraining run, or a converted checkpoint"
        )
    files = storage.glob(FLAGS.eval_files)
    if not files:
        raise UserError(
            f"--eval_files={FLAGS.eval_files} matches no file; pass a glob of pretraining "
            "shards, e.g. 'MODEL_DIR/data/eval_shards/*.tfrecord'"
        )

    import albert_tf
    from albert_tf.data.shards import read_metadata
    from albert_tf.training.evaluation import evaluate_pretraining

    model = albert_tf.load(FLAGS.model)
    shards_dir = os.path.dirname(files[0])
    meta = read_metadata(shards_dir) or {}
    vocab_size = model.backbone.config.vocab_size
    if meta.get("vocabulary_size", vocab_size) != vocab_size:
        raise UserError(
            f"the shards in {shards_dir} were written with a "
            f"{meta['vocabulary_size']}-piece vocabulary, the model has {vocab_size}; "
            "score shards made with the model's tokenizer."
        )
    max_seq_length = FLAGS.max_seq_length or meta.get("max_seq_length")
    if not max_seq_length:
        raise UserError(f"{shards_dir} has no metadata.json; pass --max_seq_length")
    results = evaluate_pretraining(
        model,
        FLAGS.eval_files,
        max_seq_length=max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        batch_size=FLAGS.batch_size,
        seed=FLAGS.seed,
        max_batches=FLAGS.num_batches,
    )
    results = {
        "model": FLAGS.model,
        "eval_files": FLAGS.eval_files,
        "sentence_task": meta.get("sentence_task"),
        **results,
    }
    print(json.dumps(results, indent=2))
    if FLAGS.output:
        storage.make_parent(FLAGS.output)
        write_json_atomic(FLAGS.output, results)


def run() -> None:
    """The `albert-evaluate-pretraining` console script."""
    runner.run(main, "evaluate_pretraining", required=["model", "eval_files"])


if __name__ == "__main__":
    run()
