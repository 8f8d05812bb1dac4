"""Checkpoint conversion: ``python -m albert_tf.convert``.

Examples::

    # Hugging Face folder (config.json + model.safetensors or pytorch_model.bin)
    python -m albert_tf.convert --source=hf --input=albert-base-v2/ --output=models/base

    # Official TF1 checkpoint; albert_config.json beside it, or --config
    python -m albert_tf.convert --source=tf1 \\
        --input=albert_base/model.ckpt-best --output=models/base

Every source variable must map to a weight of the model (optimizer slots
aside); anything unknown or missing is an error that names it.
"""

from __future__ import annotations

from absl import flags

from albert_tf.cli import runner

FLAGS = flags.FLAGS
flags.DEFINE_enum("source", None, ["hf", "tf1"], "Checkpoint kind.")
flags.DEFINE_string("input", None, "HF model folder, or TF1 checkpoint prefix.")
flags.DEFINE_string("output", None, "Directory to write this package's format to.")
flags.DEFINE_string(
    "config",
    None,
    "albert_config.json / config.json; default: the one beside --input.",
)


def main() -> None:
    from albert_tf.checkpoints.convert import convert

    model, converted = convert(FLAGS.source, FLAGS.input, FLAGS.output, FLAGS.config)
    print(f"converted {len(converted.arrays)} arrays from {FLAGS.input}")
    print(f"task model: {type(model).__name__}; heads converted: {converted.heads or 'none'}")
    for component in converted.fresh:
        print(f"note: {component} is not in the source; it keeps a fresh initialisation")
    if converted.tokenizer is not None:
        print(
            f"tokenizer: {converted.tokenizer.kind} ({converted.tokenizer.vocabulary_size} "
            f"entries), saved in {FLAGS.output}/tokenizer"
        )
    else:
        print(
            "note: no spiece.model or vocab.txt beside the checkpoint; pass --tokenizer_dir later"
        )
    print(f"wrote {FLAGS.output}")


def run() -> None:
    """The `albert-convert` console script."""
    runner.run(main, "convert", required=["source", "input", "output"])


if __name__ == "__main__":
    run()
