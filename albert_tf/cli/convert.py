"""Checkpoint conversion, in and out: ``python -m albert_tf.convert``.

``--source`` says what ``--input`` is, ``--target`` (default ``albert_tf``)
what ``--output`` becomes. Examples::

    # Hugging Face folder (config.json + model.safetensors or pytorch_model.bin)
    python -m albert_tf.convert --source=hf --input=albert-base-v2/ --output=models/base

    # Official TF1 checkpoint; albert_config.json beside it, or --config
    python -m albert_tf.convert --source=tf1 \\
        --input=albert_base/model.ckpt-best --output=models/base

    # A model trained or fine-tuned here, out to Hugging Face's layout
    # (transformers' AlbertFor*.from_pretrained, keras-hub's from_preset)
    python -m albert_tf.convert --source=albert_tf --target=hf \\
        --input=runs/sst2/best --output=exported/sst2_hf

Every source variable must map to a weight of the model (optimizer slots
aside); anything unknown or missing is an error that names it. What the
target cannot express (Hugging Face: attention- or FFN-only sharing) is
refused with an error that names it.
"""

from __future__ import annotations

from absl import flags

from albert_tf.cli import runner
from albert_tf.cli.runner import UserError

FLAGS = flags.FLAGS
flags.DEFINE_enum("source", None, ["albert_tf", "hf", "tf1"], "What --input is: a checkpoint kind.")
flags.DEFINE_enum(
    "target",
    "albert_tf",
    ["albert_tf", "hf", "keras_hub"],
    "What --output becomes: this package's format, Hugging Face's layout, or a native "
    "keras-hub preset (AlbertTextClassifier for classifiers, else AlbertBackbone).",
)
flags.DEFINE_string(
    "input", None, "albert_tf model directory, HF model folder, or TF1 checkpoint prefix."
)
flags.DEFINE_string("output", None, "Directory to write the --target format to.")
flags.DEFINE_string(
    "config",
    None,
    "albert_config.json / config.json; default: the one beside --input.",
)


def main() -> None:
    if FLAGS.source == FLAGS.target:
        raise UserError(f"--source and --target are both {FLAGS.source}: nothing to convert")
    if FLAGS.target != "albert_tf":
        if FLAGS.source != "albert_tf":
            raise UserError(
                f"--target={FLAGS.target} reads albert_tf model directories; convert "
                f"--source={FLAGS.source} to albert_tf first"
            )
        from albert_tf.checkpoints.hf_export import export_hf, export_keras_hub
        from albert_tf.checkpoints.saved_format import CheckpointError

        try:
            if FLAGS.target == "hf":
                written = export_hf(FLAGS.input, FLAGS.output)
            else:
                written = export_keras_hub(FLAGS.input, FLAGS.output)
        except (CheckpointError, FileNotFoundError, ValueError) as e:
            raise UserError(str(e)) from None
        if FLAGS.target == "hf":
            print(
                f"wrote {written['tensors']} tensors as {written['architecture']}: "
                f"{', '.join(written['files'])} in {FLAGS.output}"
            )
        else:
            print(
                f"wrote a keras-hub preset ({written['class']}) in {FLAGS.output}: "
                f"keras_hub.models.{written['class']}.from_preset({FLAGS.output!r})"
            )
        return
    if FLAGS.source == "albert_tf":
        raise UserError("--source=albert_tf needs --target=hf or --target=keras_hub")
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
