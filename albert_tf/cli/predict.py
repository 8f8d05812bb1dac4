"""Predictions over a file: ``python -m albert_tf.predict``.

    python -m albert_tf.predict --model=models/exported/albert_ner_zh \\
        --input=sentences.jsonl --output=runs/ner_predictions.jsonl

``--model`` is an export (a SavedModel version or base folder: the answers are those
TF Serving gives) or a fine-tuning run's ``output_dir`` / a fine-tuned model folder
(exported to a temporary SavedModel first). ``--input`` is whatever the model's task
reads (`python -m albert_tf.finetune --helpfull`), with labels or without. One JSON line
per item goes to ``--output``; with labels, the scores are printed and written to
``scores.json`` beside it. Span QA also writes SQuAD's ``predictions.json`` there.
"""

from __future__ import annotations

import json

from absl import flags

from albert_tf.cli import runner

FLAGS = flags.FLAGS
flags.DEFINE_string("model", None, "A SavedModel export, or a finetune output_dir / model folder.")
flags.DEFINE_list("input", None, "Files, globs or folders the model's task reads.")
flags.DEFINE_string("output", None, "The JSON Lines file of predictions (one line per item).")
flags.DEFINE_integer("batch_size", 32, "Items per request.", lower_bound=1)
flags.DEFINE_integer(
    "n_best",
    0,
    "span_qa: also write nbest_predictions.json with this many answers per question "
    "and null_odds.json (SQuAD 2.0's script reads both).",
    lower_bound=0,
)
flags.DEFINE_bool("progress", True, "Show a progress bar.")


def main() -> None:
    from albert_tf.tasks.predictions import predict_file

    summary = predict_file(
        FLAGS.model,
        FLAGS.input,
        FLAGS.output,
        batch_size=FLAGS.batch_size,
        n_best=FLAGS.n_best,
        progress=FLAGS.progress,
    )
    if "scores" in summary:
        print(json.dumps(summary["scores"], indent=2))


def run() -> None:
    """The `albert-predict` console script."""
    runner.run(main, "predict", required=["model", "input", "output"])


if __name__ == "__main__":
    run()
