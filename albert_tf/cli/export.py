"""Export a fine-tuned model as a versioned SavedModel for TF Serving.

    python -m albert_tf.export --checkpoint=runs/mc/best --export_dir=exported/albert_mc

writes ``exported/albert_mc/<version>/`` (next free version unless
``--version``) with signatures ``serving_default`` (raw text),
``score_ids`` (token ids; not for tagging) and ``tokenize``. The checkpoint's
``finetune.json`` says the task: multiple choice, text classification (inputs
``text`` and ``text_pair``) or tagging (input ``text``, entities out). See
docs/serving.md.

    python -m albert_tf.export --kind=encoder --checkpoint=runs/base/final \
        --export_dir=exported/albert_base_hub

writes ``encoder/`` and ``preprocessor/`` instead: the TF Hub style pair that people
build their own Keras models on (docs/moving_models.md).
"""

from __future__ import annotations

import json

from absl import flags

from albert_tf.cli import runner

FLAGS = flags.FLAGS
flags.DEFINE_enum(
    "kind",
    "serving",
    ["serving", "encoder"],
    "serving: a versioned raw-text SavedModel of a fine-tuned task for TF Serving; "
    "encoder: an encoder and a preprocessor SavedModel, as TF Hub's BERT pairs.",
)
flags.DEFINE_string("checkpoint", None, "Model directory (this package's format).")
flags.DEFINE_string("export_dir", None, "BASE/NAME; the version folder goes inside.")
flags.DEFINE_string("tokenizer_dir", None, "Tokenizer (default: CHECKPOINT/tokenizer).")
flags.DEFINE_integer("version", None, "Version number (default: next free one).")
flags.DEFINE_integer("max_seq_length", None, "Default: the fine-tuning setting, else 512.")
flags.DEFINE_integer(
    "seq_length",
    None,
    "--kind=encoder: the preprocessor's default packing length (default 128, at most "
    "the model's max_position_embeddings).",
)
flags.DEFINE_integer(
    "max_qa_length", None, "Multiple choice: default the fine-tuning setting, else 128."
)
flags.DEFINE_enum(
    "serving_precision",
    "float32",
    ["float32", "bfloat16", "int8"],
    "Numeric precision of the served model, same signatures: bfloat16 pays on CPUs with "
    "AVX512-BF16 or AMX, int8 on CPUs with VNNI or AMX (docs/serving.md, 'Precision').",
)
flags.DEFINE_bool(
    "jit_compile",
    False,
    "Run the model's forward pass XLA-compiled (float32 and bfloat16; tokenisation and "
    "decoding stay TensorFlow ops): faster on small requests, slower on large ones on CPU; "
    "TF Serving needs --xla_cpu_compilation_enabled (docs/serving.md, 'XLA').",
)
flags.DEFINE_string(
    "model_card", None, "A JSON file to ship as assets.extra/model_card.json (the app shows it)."
)


def main() -> None:
    if FLAGS.kind == "encoder":
        from albert_tf.serving.encoder_export import export_encoder

        serving_only = {
            "version": FLAGS.version is not None,
            "max_seq_length": FLAGS.max_seq_length is not None,
            "max_qa_length": FLAGS.max_qa_length is not None,
            "serving_precision": FLAGS.serving_precision != "float32",
            "model_card": FLAGS.model_card is not None,
            "jit_compile": FLAGS.jit_compile,
        }
        given = [f"--{name}" for name, set_ in serving_only.items() if set_]
        if given:
            raise runner.UserError(
                f"{', '.join(given)}: for --kind=serving exports only; --kind=encoder "
                "takes --seq_length and --tokenizer_dir"
            )

        written = export_encoder(
            FLAGS.checkpoint,
            FLAGS.export_dir,
            tokenizer_dir=FLAGS.tokenizer_dir,
            seq_length=FLAGS.seq_length,
        )
        for name, value in written.items():
            print(f"{name}: {value}")
        return
    from albert_tf.serving import export_saved_model

    card = None
    if FLAGS.model_card:
        with open(FLAGS.model_card, encoding="utf-8") as f:
            card = json.load(f)
    path = export_saved_model(
        FLAGS.checkpoint,
        FLAGS.export_dir,
        tokenizer_dir=FLAGS.tokenizer_dir,
        version=FLAGS.version,
        max_seq_length=FLAGS.max_seq_length,
        max_qa_length=FLAGS.max_qa_length,
        model_card=card,
        serving_precision=FLAGS.serving_precision,
        jit_compile=FLAGS.jit_compile,
    )
    compiled = ", XLA-compiled" if FLAGS.jit_compile else ""
    print(f"exported SavedModel ({FLAGS.serving_precision}{compiled}): {path}")
    print(f"inspect: saved_model_cli show --dir {path} --all")


def run() -> None:
    """The `albert-export` console script."""
    runner.run(main, "export", required=["checkpoint", "export_dir"])


if __name__ == "__main__":
    run()
