"""The shipped demo models exported again with today's exporter, from their own exports.

The question: do ``models/exported/albert_demo_{zh,en}`` give the same answers once
re-exported by today's `albert_tf.serving.export_saved_model` (the encoder once per
scoring signature, no machine path in the export), and how much smaller are they?
Their fine-tuned checkpoints are gone, so each is recovered from its export
(`albert_tf.serving.recovery.recover_checkpoint`: the exported weights, the frozen
LayerNorms' constants, the tokenizer and fine-tuning's settings), with the
config fields no weight's shape gives taken from the model card (layers, share
mode) and from the demo's pretraining flags (the preset's activation). The
English SentencePiece model also loses its trainer's input paths (`clean_spiece`),
checked to tokenize a few hundred sentences as before. Then::

    python -m albert_tf.export --checkpoint=WORK/<lang>/best \\
        --export_dir=models/exported/albert_demo_<lang> --model_card=<old card>

writes the next version, and a fresh process compares the two versions'
probabilities on next-sentence items from the embedded samples and the shared
parable items (both sizes of request: one batch, and length buckets)::

    python -m experiments.reexport_demo_models --work_dir=/tmp/reexport   # ~5 min on 2 cores

It prints the report (sizes before and after, the largest probability difference,
the answers that changed) and ``--output`` also writes it; removing the old version
is left to the person shipping the new one.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys

from bench.common import MULTIPLE_CHOICE_DATA, REPO

EXPORTS = os.path.join(REPO, "models", "exported")
#: Next-sentence items from each embedded sample, and parable items, compared.
SAMPLE_ITEMS, PARABLE_ITEMS = 200, 100
#: Items per request: 16 (4-5 options each) run in length buckets, 4 in one batch.
BATCHES = (16, 4)
#: Sentences tokenized with the SentencePiece model before and after `clean_spiece`.
SPIECE_SENTENCES = 500


def latest_version(export_dir: str) -> str:
    versions = [int(n) for n in os.listdir(export_dir) if n.isdigit()]
    return os.path.join(export_dir, str(max(versions)))


def recovery_fields(saved_model: str, lang: str) -> dict:
    """`AlbertConfig` fields the weights' shapes do not give: the model card's
    layers and share mode, and the activation and LayerNorm epsilon of the preset
    the demo's pretraining flags name (``configs/demo_<lang>_pretrain.flags``)."""
    from albert_tf.presets import get_preset

    with open(os.path.join(saved_model, "assets.extra", "model_card.json"), encoding="utf-8") as f:
        shape = json.load(f)["pretraining"]["model"]
    flags = os.path.join(REPO, "configs", f"demo_{lang}_pretrain.flags")
    with open(flags, encoding="utf-8") as f:
        preset = next(line.split("=", 1)[1].strip() for line in f if line.startswith("--preset="))
    base = get_preset(preset)
    return {
        "num_hidden_layers": shape["num_hidden_layers"],
        "share": shape["share"],
        "hidden_act": base.hidden_act,
        "layer_norm_eps": base.layer_norm_eps,
    }


def clean_spiece(model_proto: bytes) -> bytes:
    """``model_proto`` without its ``trainer_spec.input`` and ``model_prefix`` (the
    paths of the machine that trained it); pieces, scores and normaliser untouched."""
    from albert_tf.tokenizers.sentencepiece_proto import (
        field_payload,
        length_delimited,
        proto_fields,
    )

    out = b""
    for number, raw in proto_fields(model_proto):
        if number == 2:  # ModelProto.trainer_spec: drop input (1) and model_prefix (2)
            kept = [r for n, r in proto_fields(field_payload(raw)) if n not in (1, 2)]
            raw = length_delimited(2, b"".join(kept))
        out += raw
    return out


def check_same_tokenization(before: bytes, after: bytes, sentences: list[str]) -> int:
    """How many ``sentences`` both models split alike (an error unless all)."""
    import sentencepiece as spm

    old = spm.SentencePieceProcessor(model_proto=before)
    new = spm.SentencePieceProcessor(model_proto=after)
    differ = [s for s in sentences if old.encode(s) != new.encode(s)]
    if differ:
        raise SystemExit(f"clean_spiece changed the tokenization of {differ[:3]}")
    return len(sentences)


def items(lang: str) -> list[dict]:
    """Next-sentence items from the embedded sample (4 options, contexts of one
    sentence to 300 characters) and the first parable items (5 options)."""
    from albert_tf.data.corpus import read_documents
    from albert_tf.data.inputs import sample_path
    from albert_tf.tasks.multiple_choice.data import read_multiple_choice
    from albert_tf.tasks.multiple_choice.next_sentence import next_sentence_items

    documents = [d for d in read_documents(sample_path(lang)) if len(d) >= 2]
    made = next_sentence_items(documents, lang=lang, context_chars=300, vary_context=True)
    parables, _ = read_multiple_choice(
        os.path.join(MULTIPLE_CHOICE_DATA, f"parable_{lang}.jsonl.gz")
    )
    chosen = made[:: max(1, len(made) // SAMPLE_ITEMS)][:SAMPLE_ITEMS] + parables[:PARABLE_ITEMS]
    return [
        {"context": i.context, "question": i.question, "options": list(i.options)} for i in chosen
    ]


def compare(old: str, new: str, items_file: str) -> dict:
    """Both SavedModels' probabilities on the items, requests of each `BATCHES` size."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the tokenizer ops the graphs call)

    with open(items_file, encoding="utf-8") as f:
        rows = json.load(f)
    serve = {p: tf.saved_model.load(p).signatures["serving_default"] for p in (old, new)}
    report = {"items": len(rows), "max_abs_difference": 0.0, "changed_answers": 0}
    for size in BATCHES:
        for start in range(0, len(rows), size):
            batch = rows[start : start + size]
            width = max(len(r["options"]) for r in batch)
            inputs = {
                "context": tf.constant([r["context"] for r in batch]),
                "question": tf.constant([r["question"] for r in batch]),
                "options": tf.constant(
                    [r["options"] + [""] * (width - len(r["options"])) for r in batch]
                ),
            }
            a, b = (serve[p](**inputs) for p in (old, new))
            gap = float(np.max(np.abs(a["probabilities"].numpy() - b["probabilities"].numpy())))
            report["max_abs_difference"] = max(report["max_abs_difference"], gap)
            report["changed_answers"] += int(
                np.sum(a["prediction"].numpy() != b["prediction"].numpy())
            )
    return report


def sizes(saved_model: str) -> dict:
    total = sum(
        os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(saved_model) for n in names
    )
    return {
        "saved_model_pb": os.path.getsize(os.path.join(saved_model, "saved_model.pb")),
        "total": total,
    }


def reexport(lang: str, work_dir: str) -> dict:
    from albert_tf.serving.recovery import recover_checkpoint

    export_dir = os.path.join(EXPORTS, f"albert_demo_{lang}")
    old = latest_version(export_dir)
    version = int(os.path.basename(old)) + 1
    best = os.path.join(work_dir, lang, "best")
    fields = recovery_fields(old, lang)
    recover_checkpoint(old, best, **fields)
    report: dict = {"old": os.path.relpath(old, REPO), "recovered_with": fields}
    spiece = os.path.join(best, "tokenizer", "spiece.model")
    if os.path.exists(spiece):
        from albert_tf.data.corpus import iter_sentences
        from albert_tf.data.inputs import sample_path

        with open(spiece, "rb") as f:
            before = f.read()
        after = clean_spiece(before)
        sentences = list(itertools.islice(iter_sentences([sample_path(lang)]), SPIECE_SENTENCES))
        report["spiece_sentences_alike"] = check_same_tokenization(before, after, sentences)
        with open(spiece, "wb") as f:
            f.write(after)
    card = os.path.join(old, "assets.extra", "model_card.json")
    subprocess.run(
        [sys.executable, "-m", "albert_tf.export", f"--checkpoint={best}",
         f"--export_dir={export_dir}", f"--version={version}", f"--model_card={card}"],
        check=True, cwd=REPO,
    )  # fmt: skip
    new = os.path.join(export_dir, str(version))
    items_file = os.path.join(work_dir, lang, "items.json")
    with open(items_file, "w", encoding="utf-8") as f:
        json.dump(items(lang), f, ensure_ascii=False)
    # A fresh process, as a server loads them: nothing of this one's traced state.
    command = ["-m", "experiments.reexport_demo_models", "--compare", old, new, items_file]
    fresh = subprocess.run(
        [sys.executable, *command], check=True, cwd=REPO, capture_output=True, text=True
    )
    report["new"] = os.path.relpath(new, REPO)
    report["agreement"] = json.loads(fresh.stdout.strip().splitlines()[-1])
    report["sizes"] = {"old": sizes(old), "new": sizes(new)}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--languages", default="zh,en")
    parser.add_argument("--work_dir", default="/tmp/reexport_demo_models")
    parser.add_argument("--output", help="also write the report (JSON) here")
    parser.add_argument(
        "--compare", nargs=3, metavar=("OLD", "NEW", "ITEMS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.compare:
        print(json.dumps(compare(*args.compare)))
        return
    report = {lang: reexport(lang, args.work_dir) for lang in args.languages.split(",")}
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
