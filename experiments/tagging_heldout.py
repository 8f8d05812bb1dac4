"""An exported tagger re-scored on its held-out test sentences, beside the gazetteer.

The question: what does a People's Daily tagger score on test sentences that no
stage of its training saw? Fine-tuning holds out its test split, but the shipped
Chinese encoder was pretrained on raw text of the same month of the newspaper, so
some test sentences were read (never their labels) during pretraining. This
re-splits the tagging file as ``finetune --split=0.8,0.1,0.1`` splits it
(`split_examples`, seed 0), sends the test sentences through the exported
SavedModel's ``serving_default`` (what TF Serving runs) and scores entities
(`entity_scores`, seqeval's definition) on all of them and on those whose text is
not in the pretraining text; the gazetteer of the training entities (longest
match) is scored on the same sentences::

    python -m experiments.tagging_heldout \\
        --export=models/exported/albert_ner_zh/1 \\
        --pretraining_text=runs/demo_models/zh/data/pretrain.jsonl

``--pretraining_text`` is the JSON Lines the demo's ``prepare`` stage writes (one
document per line, ``{"sentences": [...]}``; ``python -m albert_tf.demo_models
--stages=prepare`` rebuilds it). Prints the report; ``--output`` also writes it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from bench.common import SHARED_DATA, machine_info

DATA = os.path.join(SHARED_DATA, "tagging", "zh_peoples_daily_1998_ner.jsonl.gz")
BATCH = 64


def pretraining_sentences(path: str) -> set[str]:
    """Every sentence of a JSON Lines file of ``{"sentences": [...]}`` documents."""
    sentences: set[str] = set()
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                sentences.update(json.loads(line)["sentences"])
            except (ValueError, KeyError, TypeError) as e:
                raise SystemExit(
                    f'{path}:{number}: not a {{"sentences": [...]}} document ({e}); give '
                    "the pretrain.jsonl that demo_models' prepare stage writes"
                ) from None
    return sentences


def exported_entities(export: str, texts: list[str]) -> list[set[tuple[int, int, str]]]:
    """Each text's entities from the SavedModel's ``serving_default``."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    serve = tf.saved_model.load(export).signatures["serving_default"]
    found = []
    for begin in range(0, len(texts), BATCH):
        out = serve(text=tf.constant(texts[begin : begin + BATCH]))
        starts, ends, labels = (out[k].numpy() for k in ("starts", "ends", "labels"))
        for row in range(starts.shape[0]):
            found.append(
                {
                    (int(s), int(e), label.decode())
                    for s, e, label in zip(starts[row], ends[row], labels[row], strict=True)
                    if s >= 0
                }
            )
    return found


def scores(gold: list, predicted: list) -> dict[str, Any]:
    from albert_tf.training.finetuning.metrics import entity_scores

    result = entity_scores(gold, predicted)
    rounded = {k: round(result[k], 4) for k in ("precision", "recall", "f1")}
    per_type = {label: round(s["f1"], 4) for label, s in result["per_label"].items()}
    return rounded | {"f1_per_type": per_type, "sentences": len(gold)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from albert_tf.baselines.gazetteer import Gazetteer
    from albert_tf.data.splits import split_examples
    from albert_tf.tasks.tagging.data import read_tagging

    if not os.path.isfile(os.path.join(args.export, "saved_model.pb")):
        raise SystemExit(
            f"{args.export} holds no saved_model.pb: give an export's version folder (EXPORT_DIR/1)"
        )
    items, _ = read_tagging([args.data])
    items = [item for item in items if item.labelled]
    train, _, test = split_examples(items, [0.8, 0.1, 0.1], seed=0)
    gold = [{(e.start, e.end, e.label) for e in item.entities} for item in test]
    start = time.perf_counter()
    tagger = exported_entities(args.export, [item.text for item in test])
    seconds = time.perf_counter() - start
    gazetteer = Gazetteer.from_examples(train)
    listed = [{(e.start, e.end, e.label) for e in gazetteer.find(x.text)} for x in test]
    parts = {"all": list(range(len(test)))}
    if args.pretraining_text:
        seen = pretraining_sentences(args.pretraining_text)
        parts["unseen_by_pretraining"] = [i for i, x in enumerate(test) if x.text not in seen]
    report: dict[str, Any] = {
        "export": args.export,
        "data": args.data,
        "split": {"train": len(train), "test": len(test)},
        "machine": machine_info(),
        "serving_seconds": round(seconds, 1),
    }
    for name, rows in parts.items():
        report[name] = {
            "entities": sum(len(gold[i]) for i in rows),
            "tagger": scores([gold[i] for i in rows], [tagger[i] for i in rows]),
            "gazetteer": scores([gold[i] for i in rows], [listed[i] for i in rows]),
        }
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export", required=True, help="the SavedModel's version folder")
    parser.add_argument("--data", default=DATA, help="the tagging file fine-tuning split")
    parser.add_argument(
        "--pretraining_text", default="", help="the encoder's pretraining JSON Lines"
    )
    parser.add_argument("--output", default="", help="also write the report here")
    args = parser.parse_args(argv)
    report = run(args)
    text = json.dumps(report, indent=1, ensure_ascii=False)
    print(text)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
