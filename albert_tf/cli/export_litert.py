"""Export a fine-tuned multiple-choice model as one on-device LiteRT (TFLite) file.

    python -m albert_tf.export_litert --checkpoint=runs/mc/best --output=albert_mc.tflite
    python -m albert_tf.export_litert --checkpoint=runs/mc/best --output=albert_mc_int8.tflite \
        --precision=int8

writes a ``.tflite`` file that takes raw text (``context`` [1], ``question`` [1],
``options`` [max_options], empty strings for absent options) and returns
``probabilities`` [1, max_options] and ``prediction``; tokenisation runs inside
it on tensorflow-text's TFLite kernels. See docs/serving.md, "On-device (LiteRT)".
"""

from __future__ import annotations

from absl import flags

from albert_tf import storage
from albert_tf.cli import runner

FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None, "Fine-tuned multiple-choice model directory.")
flags.DEFINE_string("output", None, "The .tflite file to write.")
flags.DEFINE_enum(
    "precision", "float32", ["float32", "int8"], "int8: dynamic-range quantised weights."
)
flags.DEFINE_string("tokenizer_dir", None, "Tokenizer (default: CHECKPOINT/tokenizer).")
flags.DEFINE_integer("max_seq_length", None, "Default: the fine-tuning setting, else 512.")
flags.DEFINE_integer("max_options", 4, "Options per call (a fixed width; pad with '').")


def main() -> None:
    from albert_tf.serving.litert import export_litert

    path = export_litert(
        FLAGS.checkpoint,
        FLAGS.output,
        precision=FLAGS.precision,
        tokenizer_dir=FLAGS.tokenizer_dir,
        max_seq_length=FLAGS.max_seq_length,
        max_options=FLAGS.max_options,
    )
    print(f"exported LiteRT model: {path} ({storage.size(path) / 1e6:.1f} MB)")


def run() -> None:
    """The `albert-export-litert` console script."""
    runner.run(main, "export_litert", required=["checkpoint", "output"])


if __name__ == "__main__":
    run()
