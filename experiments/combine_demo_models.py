"""An exported demo model again, with the options' overlap added to its score.

How Chinese version 7 and English version 3 were made from versions 6 and 2 (issue
50, models/README.md "Both parts of the score"): their fine-tuned checkpoints are
gone, so each model directory is recovered from its export
(`albert_tf.serving.recovery`, the weights unchanged), the demo recipe's ``combine``
stage fits the two weights on the prepared dev items with the prepared pretraining
documents' unit frequencies (`albert_tf.recipes.demo_models.combine`), and the result
is exported with the old card, which ``rescore`` then updates on the prepared test
items (the old version's figures kept as ``previous_model``)::

    python -m albert_tf.demo_models --languages=zh --pretrain_on_finetune_text \\
        --stages=prepare --work_dir=runs/demo_models
    python -m experiments.combine_demo_models --lang=zh --from_version=6 --version=7 \\
        --work_dir=runs/demo_models

A fresh rebuild (``python -m albert_tf.demo_models``) runs the same stage after
fine-tuning; this is for a model whose checkpoint is gone.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

from experiments.reexport_demo_models import recovery_fields

EXPORTS = "models/exported"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", required=True, choices=("zh", "en"))
    parser.add_argument("--from_version", type=int, required=True)
    parser.add_argument("--version", type=int, required=True)
    parser.add_argument("--work_dir", default="runs/demo_models", help="demo_models' prepare")
    parser.add_argument("--export_base", default=EXPORTS)
    args = parser.parse_args(argv)

    from albert_tf.recipes.demo_models.combine import combine, pretraining_documents
    from albert_tf.recipes.demo_models.scoring import rescore
    from albert_tf.serving import export_saved_model
    from albert_tf.serving.recovery import recover_checkpoint

    base = os.path.join(args.export_base, f"albert_demo_{args.lang}")
    old = os.path.join(base, str(args.from_version))
    data = os.path.join(args.work_dir, args.lang, "data")
    for path in (old, os.path.join(data, "dev.jsonl")):
        if not os.path.exists(path):
            raise SystemExit(f"{path} not found (see this module's docstring)")
    model_dir = tempfile.mkdtemp(prefix=f"combine_{args.lang}_")
    recover_checkpoint(old, model_dir, **recovery_fields(old, args.lang))
    record = combine(
        model_dir,
        os.path.join(data, "dev.jsonl"),
        pretraining_documents(os.path.join(data, "pretrain.jsonl")),
    )
    with open(os.path.join(old, "assets.extra", "model_card.json"), encoding="utf-8") as f:
        card = json.load(f)
    card["overlap_combination"] = record | {
        "model": f"version {args.from_version}'s fine-tuned weights (recovered from its "
        "export), unchanged",
        "idf_documents": "the build's pretraining documents (prepare stage, the same split)",
    }
    # The model alone, scored as it was shipped, is what the combination replaces.
    for key in ("held_out", "held_out_one_sentence"):
        if isinstance(card.get(key), dict):
            card[key]["previous_model"] = {"path": old, "accuracy": card[key]["accuracy"]}
    card["reexport"] = (
        f"python -m experiments.combine_demo_models --lang={args.lang} "
        f"--from_version={args.from_version} --version={args.version}"
    )
    path = export_saved_model(model_dir, base, version=args.version, model_card=card)
    print(json.dumps(record), rescore(args.lang, data, path), sep="\n")


if __name__ == "__main__":
    main()
