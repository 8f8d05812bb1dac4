"""Layer-to-layer transitions of saved models: the ALBERT paper's Figure 1.

    python -m albert_tf.analyze_layers --model=runs/share_all/final \\
        --model=runs/share_none/final --corpus=runs/share_all/data/eval_corpus.jsonl \\
        --output=runs/layers

For every applied layer of each model, the mean L2 distance and cosine similarity
between the layer's input and output hidden states over the real tokens of
``--corpus`` (`albert_tf.analysis.layer_transitions`). Writes
``OUTPUT/layer_transitions.json`` and ``OUTPUT/layer_transitions.png`` and prints a
table. Each model is read with its own ``tokenizer/``.
"""

from __future__ import annotations

import os

from absl import flags

from albert_tf import storage
from albert_tf.cli import runner
from albert_tf.cli.runner import UserError
from albert_tf.storage import write_json_atomic

FLAGS = flags.FLAGS
flags.DEFINE_multi_string(
    "model", None, "A model directory with tokenizer/ (e.g. MODEL_DIR/final); repeat to compare."
)
flags.DEFINE_multi_string(
    "label", None, "Legend names, one per --model in order; default: the run's folder name."
)
flags.DEFINE_string(
    "corpus",
    None,
    "Held-out text: files, globs, folders or sample:en (a run holds its out in "
    "MODEL_DIR/data/eval_corpus.jsonl).",
)
flags.DEFINE_string("output", None, "Folder for layer_transitions.json and .png.")
flags.DEFINE_integer("max_sequences", 256, "Sequences of held-out text to average over.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per sequence, [CLS] and [SEP] included.")
flags.DEFINE_integer("batch_size", 32, "Sequences per forward pass.")

JSON_FILE = "layer_transitions.json"
PNG_FILE = "layer_transitions.png"


def main() -> None:
    labels = FLAGS.label or []
    if labels and len(labels) != len(FLAGS.model):
        raise UserError(f"{len(labels)} --label for {len(FLAGS.model)} --model; give one each")
    if FLAGS.max_sequences < 1:
        raise UserError("--max_sequences must be at least 1")
    for model_dir in FLAGS.model:
        if not storage.isdir(model_dir):
            raise UserError(
                f"no model directory at {model_dir}; pass a model saved with its "
                "tokenizer, e.g. MODEL_DIR/final of a pretraining run"
            )

    from albert_tf.analysis.layer_transitions import analyze_model, plot_layer_transitions

    results = []
    for i, model_dir in enumerate(FLAGS.model):
        result = analyze_model(
            model_dir,
            FLAGS.corpus,
            max_seq_length=FLAGS.max_seq_length,
            max_sequences=FLAGS.max_sequences,
            batch_size=FLAGS.batch_size,
            label=labels[i] if labels else None,
        )
        results.append(result)
        print(
            f"{result.label} (share={result.share}): {result.sequences} sequences, "
            f"{result.tokens} tokens"
        )
        print(f"  {'layer':>5} {'L2':>9} {'cosine':>8} {'angle':>7}")
        for layer, (l2, cosine, angle) in enumerate(
            zip(result.l2_distance, result.cosine_similarity, result.angle_degrees, strict=True),
            start=1,
        ):
            print(f"  {layer:>5} {l2:>9.4f} {cosine:>8.4f} {angle:>6.1f}°")
    storage.makedirs(FLAGS.output)
    record = {
        "corpus": FLAGS.corpus,
        "max_seq_length": FLAGS.max_seq_length,
        "max_sequences": FLAGS.max_sequences,
        "models": [result.to_json() for result in results],
    }
    write_json_atomic(os.path.join(FLAGS.output, JSON_FILE), record)
    plot_layer_transitions(results, os.path.join(FLAGS.output, PNG_FILE))
    print(f"wrote {os.path.join(FLAGS.output, JSON_FILE)} and {PNG_FILE}")


def run() -> None:
    """The `albert-analyze-layers` console script."""
    runner.run(main, "analyze_layers", required=["model", "corpus", "output"])


if __name__ == "__main__":
    run()
