"""An exported tagger re-scored on its held-out test sentences, beside the gazetteer.

The question: what does a People's Daily tagger score on test sentences that no
stage of its training read? Fine-tuning holds out its test split by id, but the file
repeats some sentences under other ids, and the shipped Chinese encoder was
pretrained on raw text of the same month of the newspaper: some test sentences were
read (never their labels) in fine-tuning or in pretraining. This re-splits the
tagging file as ``finetune --split=0.8,0.1,0.1`` splits it (labelled items,
`split_examples`, ``--split_seed``), sends the test sentences through the exported
SavedModel's ``serving_default`` (what TF Serving runs) and scores entities
(`entity_scores`, seqeval's definition) on all of them, on those whose text is not in
the pretraining text, and on those whose text is neither there nor a training
sentence; the gazetteer of the training entities (longest match) is scored on the
same sentences::

    python -m experiments.tagging_heldout \\
        --export=models/exported/albert_ner_zh/2 \\
        --pretraining_text=runs/demo_models/zh/data/pretrain.jsonl --join=8

``--join=N`` also sends the same test sentences, in file order, joined N at a time
into one text each (`pack_sentences`: no separator in Chinese), as people paste
paragraphs, and scores their entities (offsets shifted) with the same scorer: the
report's ``joined`` beside ``all``, the sentences alone. ``--max_test=K`` scores the
first K test sentences only (a smoke run).

``--pretraining_text`` is the JSON Lines the demo's ``prepare`` stage wrote for the
encoder (one document per line, ``{"sentences": [...]}``); the encoder's
``card.json`` gives the command (``python -m albert_tf.demo_models --languages=zh
--pretrain_on_finetune_text --stages=prepare --work_dir=runs/demo_models``).
Unlike the other experiments it has no ``--smoke`` and writes no results file of its
own: it prints the report, and ``--output`` also writes it.
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
#: Longest joined text: the export's limit on one text.
MAX_JOINED_CHARS = 20_000


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


def export_stride(export: str) -> int | None:
    """The stride the export reads long texts with (None: made before strides, windows
    that do not overlap)."""
    path = os.path.join(export, "assets.extra", "albert_tf.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("tagging_stride")


def scores(gold: list, predicted: list) -> dict[str, Any]:
    from albert_tf.training.finetuning.metrics import entity_scores

    result = entity_scores(gold, predicted)
    rounded = {k: round(result[k], 4) for k in ("precision", "recall", "f1")}
    per_type = {label: round(s["f1"], 4) for label, s in result["per_label"].items()}
    return rounded | {"f1_per_type": per_type, "sentences": len(gold)}


def joined_scores(export: str, test: list, n: int) -> dict[str, Any]:
    """The tagger's scores on ``test`` joined ``n`` sentences a text, in order."""
    from albert_tf.tasks.tagging.data import pack_sentences

    texts = pack_sentences(test, MAX_JOINED_CHARS, max_items=n)
    gold = [{(e.start, e.end, e.label) for e in item.entities} for item in texts]
    start = time.perf_counter()
    found = exported_entities(export, [item.text for item in texts])
    seconds = time.perf_counter() - start
    lengths = [len(item.text) for item in texts]
    return {
        "sentences_per_text": n,
        "texts": len(texts),
        "mean_chars": round(sum(lengths) / max(len(lengths), 1), 1),
        "serving_seconds": round(seconds, 1),
        "tagger": scores(gold, found) | {"sentences": len(test), "texts": len(texts)},
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from albert_tf.baselines.gazetteer import Gazetteer
    from albert_tf.data.splits import split_examples
    from albert_tf.tasks.tagging.data import read_tagging

    if not os.path.isfile(os.path.join(args.export, "saved_model.pb")):
        raise SystemExit(
            f"{args.export} holds no saved_model.pb: give an export's version folder (EXPORT_DIR/1)"
        )
    for flag, path in (("--data", args.data), ("--pretraining_text", args.pretraining_text)):
        if path and not os.path.isfile(path):
            raise SystemExit(f"{flag}: no file {path}")
    try:
        fractions = [float(x) for x in args.split.split(",")]
    except ValueError:
        fractions = []
    if len(fractions) != 3:
        raise SystemExit(f"--split: train, dev and test fractions (0.8,0.1,0.1), got {args.split}")
    seen = pretraining_sentences(args.pretraining_text) if args.pretraining_text else None
    items, _ = read_tagging([args.data])
    items = [item for item in items if item.labelled]
    train, _, test = split_examples(items, fractions, seed=args.split_seed)
    if args.max_test:
        test = test[: args.max_test]
    gold = [{(e.start, e.end, e.label) for e in item.entities} for item in test]
    start = time.perf_counter()
    tagger = exported_entities(args.export, [item.text for item in test])
    seconds = time.perf_counter() - start
    gazetteer = Gazetteer.from_examples(train)
    listed = [{(e.start, e.end, e.label) for e in gazetteer.find(x.text)} for x in test]
    trained = {item.text for item in train}
    parts = {"all": list(range(len(test)))}
    if seen is not None:
        parts["unseen_by_pretraining"] = [i for i, x in enumerate(test) if x.text not in seen]
        parts["unread"] = [
            i for i, x in enumerate(test) if x.text not in seen and x.text not in trained
        ]
    report: dict[str, Any] = {
        "export": args.export,
        "tagging_stride": export_stride(args.export),
        "data": args.data,
        "pretraining_text": args.pretraining_text or None,
        "pretraining_sentences": None if seen is None else len(seen),
        "split": {"fractions": fractions, "seed": args.split_seed},
        "train": len(train),
        "test": len(test),
        "test_texts_in_train": sum(x.text in trained for x in test),
        "machine": machine_info(),
        "serving_seconds": round(seconds, 1),
    }
    for name, rows in parts.items():
        report[name] = {
            "entities": sum(len(gold[i]) for i in rows),
            "tagger": scores([gold[i] for i in rows], [tagger[i] for i in rows]),
            "gazetteer": scores([gold[i] for i in rows], [listed[i] for i in rows]),
        }
    if args.join > 1:
        report["joined"] = joined_scores(args.export, test, args.join)
        report["f1_alone_joined"] = [
            report["all"]["tagger"]["f1"],
            report["joined"]["tagger"]["f1"],
        ]
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export", required=True, help="the SavedModel's version folder")
    parser.add_argument("--data", default=DATA, help="the tagging file fine-tuning split")
    parser.add_argument("--split", default="0.8,0.1,0.1", help="finetune's --split")
    parser.add_argument("--split_seed", type=int, default=0, help="finetune's --split_seed")
    parser.add_argument(
        "--pretraining_text", default="", help="the encoder's pretraining JSON Lines"
    )
    parser.add_argument(
        "--join",
        type=int,
        default=0,
        help="also score the test sentences joined this many at a time into one text",
    )
    parser.add_argument(
        "--max_test", type=int, default=0, help="score the first K test sentences (0: all)"
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
