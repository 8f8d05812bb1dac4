"""The command-line layer: every entry point of the package, and nothing else.

Each command is a module here with a ``main()`` that reads its absl flags and calls
the library, and a ``run()`` that `albert_tf.cli.runner` wraps with the quiet
start-up, the shared argv check and one-line error exits. Each is reachable three
ways::

    albert-pretrain --flagfile=configs/quickstart_en.flags       # console script
    python -m albert_tf.pretrain --flagfile=...                  # module
    python -m albert_tf.cli.pretrain --flagfile=...              # its source

``albert_tf/<command>.py`` is a three-line file that `launch`-es the command here.
Flags are read only in these modules; the library below takes arguments. The
modules import only absl and TensorFlow-free parts of the package at the top, so
``--help`` answers without loading TensorFlow.
"""

from __future__ import annotations

import runpy

# command -> one line for `albert-<command> --help` listings and docs/architecture.md.
COMMANDS: dict[str, str] = {
    "train_tokenizer": "train a SentencePiece or WordPiece tokenizer on raw text",
    "create_pretraining_data": "write unmasked MLM + SOP/NSP pretraining shards",
    "build_corpus": "build the offline `albert_corpus` tensorflow-datasets dataset",
    "pretrain": "pretrain ALBERT with MLM + SOP (corpus to final model)",
    "data_service": "run a tf.data service dispatcher or worker that feeds pretrain",
    "evaluate_pretraining": "score a pretrained model on held-out shards",
    "plot_metrics": "plot pretraining runs' learning curves from their metrics.jsonl",
    "analyze_layers": "per-layer input/output L2 distance and cosine (the paper's Figure 1)",
    "finetune": "fine-tune for multiple choice, classification, tagging or span QA",
    "predict": "run a fine-tuned model or its SavedModel over a file: one JSON line per item",
    "export": "export a fine-tuned model as a raw-text SavedModel for TF Serving",
    "export_litert": "export a multiple-choice model as one raw-text on-device .tflite file",
    "convert": "convert a Hugging Face or TF1 checkpoint in, or a model out to HF / keras-hub",
    "params": "count parameters (the paper's Table 1 and the E x sharing grid)",
    "demo": "a 15-second look at ALBERT-base's parameters and one forward pass",
    "demo_models": "rebuild the Streamlit demo's Chinese and English models from scratch",
}

#: ``python -m`` name -> the module that holds the command.
COMMAND_MODULES: dict[str, str] = {
    f"albert_tf.{name}": f"albert_tf.cli.{name}" for name in COMMANDS
}


def launch(command: str) -> None:
    """Runs a command as ``python -m albert_tf.<command>`` does: its module here as
    ``__main__``, so absl finds its flags as the main module's (``--helpshort``)."""
    runpy.run_module(f"albert_tf.cli.{command}", run_name="__main__", alter_sys=True)
