"""The command-line layer: every entry point of the package, and nothing else.

Each command is a module here with a ``main()`` that reads its absl flags and calls
the library, and a ``run()`` that `albert_tf.cli.runner` wraps with the shared
argv check and one-line error exits. Each is reachable three ways::

    albert-pretrain --flagfile=configs/quickstart_en.flags       # console script
    python -m albert_tf.cli.pretrain --flagfile=...              # module
    python -m albert_tf.pretrain --flagfile=...                  # the historical name

The historical names (``albert_tf.<command>`` and ``albert_tf.data.build_corpus``)
are not files: `install_module_aliases` lets ``python -m`` find them here, so the
package folder shows the architecture rather than the commands. Flags are read only
in these modules; the library below takes arguments.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys

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
    "finetune": "fine-tune for multiple choice or text classification",
    "export": "export a fine-tuned model as a raw-text SavedModel for TF Serving",
    "export_litert": "export a multiple-choice model as one raw-text on-device .tflite file",
    "convert": "convert a Hugging Face or TF1 checkpoint in, or a model out to HF / keras-hub",
    "params": "count parameters (the paper's Table 1 and the E x sharing grid)",
    "demo": "a 15-second look at ALBERT-base's parameters and one forward pass",
    "demo_models": "rebuild the Streamlit demo's Chinese and English models from scratch",
}

# Historical module names kept working for `python -m`.
LEGACY_MODULES: dict[str, str] = {f"albert_tf.{name}": f"albert_tf.cli.{name}" for name in COMMANDS}
LEGACY_MODULES["albert_tf.data.build_corpus"] = LEGACY_MODULES.pop("albert_tf.build_corpus")


class _LegacyModuleFinder(importlib.abc.MetaPathFinder):
    """Finds ``albert_tf.pretrain`` & co. as the source files of ``albert_tf.cli.*``."""

    def find_spec(self, fullname, path=None, target=None):
        real = LEGACY_MODULES.get(fullname)
        if real is None:
            return None
        spec = importlib.util.find_spec(real)
        if spec is None or spec.origin is None:
            return None
        # The loader carries the legacy name so that runpy can execute it as __main__.
        loader = importlib.machinery.SourceFileLoader(fullname, spec.origin)
        return importlib.util.spec_from_file_location(fullname, spec.origin, loader=loader)


def install_module_aliases() -> None:
    """Makes the historical ``python -m albert_tf.<command>`` names resolvable."""
    if not any(isinstance(finder, _LegacyModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(_LegacyModuleFinder())
