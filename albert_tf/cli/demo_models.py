"""Rebuild the Streamlit demo's models from scratch: ``python -m albert_tf.demo_models``.

For each language (``--languages=zh,en``), from the shared corpora only:

1. split the documents by a stable hash: 10% test, 30% fine-tuning, 60% pretraining
   (`albert_tf.data.next_sentence.document_split`);
2. start from the language's shipped pretrained encoder (``--zh_encoder``,
   ``--en_encoder``: ``models/pretrained/``, pretrained on this split's pretraining
   documents, never on its dev or test documents), or, with the flag empty, pretrain
   a small ALBERT on the pretraining documents (``configs/demo_<lang>_pretrain.flags``,
   through ``albert_tf.pretrain``);
3. fine-tune it for "which option continues the context?" on items built from the
   fine-tuning and pretraining documents (dev items from fine-tuning documents
   that no training item comes from) (``configs/demo_<lang>_finetune.flags``, through
   ``albert_tf.finetune``): 4 options, the true next sentence and three sentences
   of other documents of the same corpus; each context is the previous sentence
   and, within a budget drawn per item from 0 to ``CONTEXT_CHARS``, earlier ones;
4. score it on the test documents' items, with the full context budget and with one
   sentence of context (the same questions), against chance, the counted and
   IDF-weighted overlap baselines and the previously exported model, and on the
   shared multiple-choice sets (no tuning to them);
5. export ``<export_base>/albert_demo_<lang>/<version>/`` with a model card in
   ``assets.extra/model_card.json``, which the app shows.

Each stage's output stays in ``--work_dir``; a stage whose output exists is not
redone, so an interrupted rebuild continues (pretraining also resumes from its
last checkpoint). ``--stages`` runs a subset; ``--stages=prepare,rescore`` scores an
already exported model on today's test items and rewrites its card's figures.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
import time

from absl import flags

from albert_tf import storage
from albert_tf.cli import runner
from albert_tf.cli.runner import UserError
from albert_tf.data.inputs import resolve_inputs
from albert_tf.storage import write_json_atomic

SHARED = "../shared/data"
CORPORA = {
    "zh": [f"{SHARED}/corpus/zh_peoples_daily_1998.jsonl.gz"],
    "en": [
        f"{SHARED}/corpus/en_sotu.jsonl.gz",
        f"{SHARED}/corpus/en_austen.jsonl.gz",
        f"{SHARED}/corpus/en_web_bible.jsonl.gz",
    ],
}
SHARED_SETS = {
    "zh": [f"{SHARED}/multiple_choice/parable_zh.jsonl.gz"],
    "en": [
        f"{SHARED}/multiple_choice/parable_en.jsonl.gz",
        f"{SHARED}/multiple_choice/socialiqa_evals.jsonl.gz",
        f"{SHARED}/multiple_choice/quartz.jsonl.gz",
    ],
}
STAGES = ("prepare", "pretrain", "finetune", "evaluate", "export", "rescore")
#: Stages a plain run does; ``rescore`` is asked for by name.
DEFAULT_STAGES = STAGES[:-1]
# The context of an item: the previous sentence and earlier ones within this budget.
CONTEXT_CHARS = {"zh": 150, "en": 300}
MAX_TEST_ITEMS, MAX_DEV_ITEMS = 2000, 600
#: The test items again with only the sentence before the options as context.
ONE_SENTENCE = "test_one_sentence"
#: What prepare.json records of how items are made: 2 = training contexts of varying
#: length and the one-sentence test items (and, for pretraining, folding tokenizers).
ITEMS_VERSION = 2

#: The shipped encoders (models/README.md), pretrained on the pretraining documents of
#: these corpora's splits (Chinese: with --pretrain_on_finetune_text's extra text).
ENCODERS = {
    "zh": "models/pretrained/albert_tiny_zh_peoples_daily",
    "en": "models/pretrained/albert_tiny_en_books_pubmed",
}

FLAGS = flags.FLAGS
flags.DEFINE_list("languages", ["zh", "en"], "Which demo models to build.")
flags.DEFINE_list(
    "stages",
    list(DEFAULT_STAGES),
    f"Stages to run, of {', '.join(STAGES)}. rescore scores the exported "
    "albert_demo_<lang>/<version> on the prepared test items and rewrites its card's "
    "held-out figures (for a model exported before a figure existed).",
)
flags.DEFINE_string("work_dir", "runs/demo_models", "Splits, pretraining and fine-tuning runs.")
flags.DEFINE_string("export_base", "models/exported", "Where albert_demo_<lang>/ go.")
flags.DEFINE_string("configs_dir", "configs", "Where demo_<lang>_{pretrain,finetune}.flags are.")
flags.DEFINE_string("zh_corpora", None, "Override the Chinese corpora (files, globs, folders).")
flags.DEFINE_string("en_corpora", None, "Override the English corpora (files, globs, folders).")
for _lang, _name in (("zh", "Chinese"), ("en", "English")):
    flags.DEFINE_string(
        f"{_lang}_encoder",
        ENCODERS[_lang],
        f"Pretrained model directory the {_name} demo fine-tunes from, with its tokenizer "
        "(the shipped one by default: it never saw the default corpora's dev and test "
        "documents; the English one has a WordPiece vocabulary); empty: pretrain one first "
        f"(the pretrain stage, configs/demo_{_lang}_pretrain.flags).",
    )
flags.DEFINE_integer("version", 1, "SavedModel version to write.")
flags.DEFINE_string(
    "previous_model",
    None,
    "A SavedModel to score beside the new one on the same held-out items; default: the "
    "newest albert_demo_<lang> version under --export_base other than --version.",
)
flags.DEFINE_integer("seed", 0, "Seed of the items (distractors, answer positions).")
flags.DEFINE_bool(
    "pretrain_on_finetune_text",
    False,
    "Also pretrain on the fine-tuning documents no dev item comes from: more text, while "
    "dev and test documents stay unseen until fine-tuning and scoring.",
)


def _source(path: str) -> str:
    name = os.path.basename(path)
    return name.split(".", 1)[0]


def prepare(lang: str, corpora: list[str], out: str) -> dict:
    """Splits documents and writes pretraining text and next-sentence items."""
    import collections
    import random

    from albert_tf.data import read_documents
    from albert_tf.data.next_sentence import document_split, next_sentence_items

    parts: dict[str, list[list[str]]] = {"pretrain": [], "finetune": [], "test": []}
    groups: dict[str, list[str]] = {"pretrain": [], "finetune": [], "test": []}
    for path in corpora:
        source = _source(path)
        for index, doc in enumerate(read_documents(path)):
            part = document_split(f"{source}/{index}")
            parts[part].append(doc)
            groups[part].append(source)
    os.makedirs(out, exist_ok=True)
    common = dict(lang=lang, context_chars=CONTEXT_CHARS[lang])
    # Training contexts run from the previous sentence alone (what people type into
    # the demo) up to the full budget; test items come twice, with the same options
    # and answers: one-sentence contexts, and contexts filling the budget.
    items = {
        part: next_sentence_items(
            parts[part],
            groups=groups[part],
            seed=FLAGS.seed + k,
            prefix=part,
            vary_context=part != "test",
            **common,
        )
        for k, part in enumerate(("finetune", "test", "pretrain"))
    }
    one_sentence = next_sentence_items(
        parts["test"], groups=groups["test"], seed=FLAGS.seed + 1, prefix="test", lang=lang
    )
    # Dev items come from fine-tuning documents that no training item comes
    # from; training items from the other fine-tuning documents and from the
    # pretraining documents (the task is new to the model, the text is not).
    # Test documents are never seen.
    rng = random.Random(FLAGS.seed)
    order = list(range(len(parts["finetune"])))
    rng.shuffle(order)
    per_doc = collections.Counter(_document_of(i) for i in items["finetune"])
    dev_docs: set[int] = set()
    for d in order[: len(order) // 2]:  # at most half: a small corpus trains too
        if sum(per_doc[x] for x in dev_docs) >= MAX_DEV_ITEMS:
            break
        dev_docs.add(d)
    pretraining_text = list(parts["pretrain"])
    if FLAGS.pretrain_on_finetune_text:
        pretraining_text += [d for k, d in enumerate(parts["finetune"]) if k not in dev_docs]
    with open(os.path.join(out, "pretrain.jsonl"), "w", encoding="utf-8") as f:
        for doc in pretraining_text:
            f.write(json.dumps({"sentences": doc}, ensure_ascii=False) + "\n")
    dev = [i for i in items["finetune"] if _document_of(i) in dev_docs]
    train = [i for i in items["finetune"] if _document_of(i) not in dev_docs]
    train += items["pretrain"]
    for split in (dev, train):
        rng.shuffle(split)
    order = list(range(len(items["test"])))
    rng.shuffle(order)
    order = order[:MAX_TEST_ITEMS]
    splits = {
        "dev": dev[:MAX_DEV_ITEMS],
        "train": train,
        "test": [items["test"][i] for i in order],
        ONE_SENTENCE: [one_sentence[i] for i in order],
    }
    for name, split in splits.items():
        with open(os.path.join(out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            for item in split:  # the JSON Lines layout read_multiple_choice reads
                f.write(json.dumps(dataclasses.asdict(item), ensure_ascii=False) + "\n")
    summary = {
        "items_version": ITEMS_VERSION,
        "corpora": [os.path.basename(p) for p in corpora],
        "documents": {k: len(v) for k, v in parts.items()},
        "pretrain_on_finetune_text": FLAGS.pretrain_on_finetune_text,
        "pretraining_documents": len(pretraining_text),
        "pretraining_sentences": sum(len(d) for d in pretraining_text),
        "items": {k: len(v) for k, v in splits.items()},
    }
    write_json_atomic(os.path.join(out, "prepare.json"), summary)
    return summary


def _document_of(item) -> int:
    """The document index in an item id ``{prefix}-{document}-{sentence}``."""
    return int(item.id.split("-")[-2])


def _run(args: list[str], log_path: str) -> float:
    """Runs a command of this package in a subprocess, teeing to a log; returns seconds."""
    start = time.time()
    print("$ " + " ".join(args), flush=True)
    with open(log_path, "a", encoding="utf-8") as log:
        process = subprocess.run(
            [sys.executable, "-m", *args], stdout=log, stderr=subprocess.STDOUT, check=False
        )
    if process.returncode != 0:
        raise UserError(f"{args[0]} failed (exit {process.returncode}); see {log_path}")
    return time.time() - start


def main() -> None:
    unknown = set(FLAGS.stages) - set(STAGES)
    if unknown:
        raise UserError(f"unknown stages {sorted(unknown)}; choose from {', '.join(STAGES)}")
    for lang in FLAGS.languages:
        if lang not in CORPORA:
            raise UserError(f"no demo model for language {lang!r}; choose from zh, en")
    # Checked before any work starts; the messages name the flag that overrides.
    corpora = {
        lang: resolve_inputs(
            FLAGS[f"{lang}_corpora"].value or CORPORA[lang], what=f"--{lang}_corpora"
        )
        for lang in FLAGS.languages
    }
    for lang in FLAGS.languages:
        _check_encoder(lang)
    for lang in FLAGS.languages:
        build(lang, corpora[lang])


def _check_encoder(lang: str) -> None:
    """Refuses an encoder that is not a model directory, or pretraining asked for by name
    beside one; warns where the shipped encoder may have read dev documents."""
    encoder = FLAGS[f"{lang}_encoder"].value
    if not encoder or not {"pretrain", "finetune"} & set(FLAGS.stages):
        return
    if not storage.isfile(os.path.join(encoder, "config.json")):  # a local path or a URL
        raise UserError(
            f"--{lang}_encoder={encoder} is not a model directory (no config.json); "
            f"give one, or --{lang}_encoder= (empty) to pretrain one"
        )
    if FLAGS["stages"].present and "pretrain" in FLAGS.stages:
        raise UserError(
            f"--stages asks for pretraining, and --{lang}_encoder={encoder} is fine-tuned "
            f"from instead: add --{lang}_encoder= (empty) to pretrain"
        )
    overridden = FLAGS[f"{lang}_corpora"].present or FLAGS.seed != 0
    if encoder == ENCODERS[lang] and overridden:
        # Its pretraining text is the default corpora's split with seed 0.
        print(
            f"[{lang}] warning: {encoder} was pretrained on the default corpora's split "
            "(--seed=0); with other corpora or seeds it may have read dev or test documents",
            file=sys.stderr,
        )


def build(lang: str, corpora: list[str]) -> None:
    work = os.path.join(FLAGS.work_dir, lang)
    os.makedirs(work, exist_ok=True)
    times_path = os.path.join(work, "times.json")
    times = {}
    if os.path.exists(times_path):
        with open(times_path, encoding="utf-8") as f:
            times = json.load(f)
    data, pre, fine = (os.path.join(work, d) for d in ("data", "pretrain", "finetune"))
    configs = FLAGS.configs_dir
    encoder = FLAGS[f"{lang}_encoder"].value
    if encoder and "finetune" in FLAGS.stages:
        print(f"[{lang}] fine-tuning from {encoder}: no pretraining stage")
        if os.path.isdir(os.path.join(pre, "final")):
            print(
                f"[{lang}] warning: {pre}/final (this work dir's own pretraining) is not "
                f"used; --{lang}_encoder= (empty) fine-tunes from it",
                file=sys.stderr,
            )
    # With an encoder, there is nothing to pretrain.
    stages = [s for s in FLAGS.stages if not (encoder and s == "pretrain")]

    prepared_path = os.path.join(data, "prepare.json")
    if os.path.exists(prepared_path):
        with open(prepared_path, encoding="utf-8") as f:
            cached_items = json.load(f).get("items_version", 1)
        if cached_items != ITEMS_VERSION and {"pretrain", "finetune", "evaluate"} & set(stages):
            # Older work dirs train on full-budget contexts only, lack the one-sentence
            # test items, and their tokenizer does not fold full-width text.
            raise UserError(
                f"{data} was prepared by an older demo_models (items version "
                f"{cached_items}, now {ITEMS_VERSION}); use a new --work_dir"
            )
    pretrain_pending = "pretrain" in stages and not os.path.isdir(os.path.join(pre, "final"))
    if os.path.exists(prepared_path) and pretrain_pending:
        # A cached split must hold the pretraining text this command asks for.
        with open(prepared_path, encoding="utf-8") as f:
            cached = json.load(f).get("pretrain_on_finetune_text", False)
        if cached != FLAGS.pretrain_on_finetune_text:
            raise UserError(
                f"{data} was prepared {'with' if cached else 'without'} "
                "--pretrain_on_finetune_text; pass the same, or use another --work_dir"
            )
    if "prepare" in stages and not os.path.exists(prepared_path):
        start = time.time()
        summary = prepare(lang, corpora, data)
        times["prepare"] = time.time() - start
        print(f"[{lang}] prepared: {json.dumps(summary)}")
    if "pretrain" in stages and not os.path.isdir(os.path.join(pre, "final")):
        times["pretrain"] = times.get("pretrain", 0.0) + _run(
            [
                "albert_tf.pretrain",
                f"--flagfile={configs}/demo_{lang}_pretrain.flags",
                f"--corpus={data}/pretrain.jsonl",
                f"--model_dir={pre}",
                "--progress_bar=false",
            ],
            os.path.join(work, "pretrain.log"),
        )
    if "finetune" in stages and not os.path.exists(os.path.join(fine, "summary.json")):
        # The card says where fine-tuning started (model_card reads it).
        write_json_atomic(os.path.join(work, "start.json"), {"encoder": encoder or None})
        times["finetune"] = _run(
            [
                "albert_tf.finetune",
                f"--flagfile={configs}/demo_{lang}_finetune.flags",
                f"--checkpoint={encoder or pre + '/final'}",
                f"--train_files={data}/train.jsonl",
                f"--dev_files={data}/dev.jsonl",
                f"--test_files={data}/test.jsonl",
                f"--output_dir={fine}",
                "--progress=false",
            ],
            os.path.join(work, "finetune.log"),
        )
    write_json_atomic(times_path, times)
    if "evaluate" in stages:
        previous = FLAGS.previous_model or _previous_export(lang)
        report = evaluate(os.path.join(fine, "best"), data, SHARED_SETS[lang], previous)
        write_json_atomic(os.path.join(work, "evaluation.json"), report)
        print(f"[{lang}] {json.dumps(report, ensure_ascii=False)}")
    if "export" in stages:
        from albert_tf.serving import export_saved_model

        card = model_card(lang, work)
        path = export_saved_model(
            os.path.join(fine, "best"),
            os.path.join(FLAGS.export_base, f"albert_demo_{lang}"),
            version=FLAGS.version,
            model_card=card,
        )
        print(f"[{lang}] exported {path}")
    if "rescore" in stages:
        print(f"[{lang}] rescored {rescore(lang, data)}")


def _scored(result: dict, chance: float) -> dict:
    from albert_tf.training.evaluation import binomial_stderr

    p, n = result["accuracy"], result["count"]
    return {
        "accuracy": round(p, 4),
        "accuracy_stderr": round(binomial_stderr(p, n), 4),
        "items": n,
        "chance": round(chance, 4),
    }


def _previous_export(lang: str) -> str | None:
    """The newest exported demo model of ``lang`` below the version being built."""
    base = os.path.join(FLAGS.export_base, f"albert_demo_{lang}")
    if not os.path.isdir(base):
        return None
    versions = [int(v) for v in os.listdir(base) if v.isdigit() and int(v) < FLAGS.version]
    return os.path.join(base, str(max(versions))) if versions else None


@functools.lru_cache(maxsize=2)
def _serving_default(path: str):
    """A SavedModel's ``serving_default``, loaded once per path (each model scores
    the full-context and the one-sentence items)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the tokenizer ops the SavedModel calls)

    return tf.saved_model.load(path).signatures["serving_default"]


def saved_model_accuracy(path: str, items, batch_size: int = 32) -> float:
    """Accuracy of an exported multiple-choice SavedModel through its
    ``serving_default`` signature (options padded per batch with "")."""
    import tensorflow as tf

    serve = _serving_default(path)
    correct = 0
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        width = max(len(i.options) for i in batch)
        if any(len(i.options) != width for i in batch):
            raise ValueError("saved_model_accuracy needs the same option count in a batch")
        result = serve(
            context=tf.constant([i.context for i in batch]),
            question=tf.constant([i.question for i in batch]),
            options=tf.constant([list(i.options) for i in batch]),
        )
        predictions = result["prediction"].numpy()
        correct += sum(int(p) == i.label for p, i in zip(predictions, batch, strict=True))
    return correct / len(items)


def _chance(items) -> float:
    return sum(1 / len(i.options) for i in items) / len(items)


def held_out_scores(data_dir: str, score, previous_model: str | None = None) -> dict:
    """``held_out`` (test items) and ``held_out_one_sentence`` (the same items with one
    sentence of context): ``score(items)``'s accuracy (a dict with ``accuracy`` and
    ``count``) beside chance, counted and IDF overlap, and the previous model."""
    from albert_tf.baselines.overlap import overlap_accuracy
    from albert_tf.tasks.multiple_choice.data import read_multiple_choice

    def held_out(name: str) -> dict:
        path = os.path.join(data_dir, f"{name}.jsonl")
        if not os.path.isfile(path):
            raise UserError(f"{path} is missing; run --stages=prepare in a new --work_dir")
        items, _ = read_multiple_choice(path)
        scores = _scored(score(items), _chance(items))
        for weighting in ("count", "idf"):
            baseline = overlap_accuracy(items, weighting)
            scores[f"overlap_{weighting}_baseline"] = round(baseline["accuracy"], 4)
        if previous_model:
            scores["previous_model"] = {
                "path": os.path.normpath(previous_model),
                "accuracy": round(saved_model_accuracy(previous_model, items), 4),
            }
        return scores

    return {"held_out": held_out("test"), "held_out_one_sentence": held_out(ONE_SENTENCE)}


def rescore(lang: str, data_dir: str) -> str:
    """Scores the exported ``albert_demo_<lang>/<--version>`` on the prepared test items
    and rewrites its card's held-out figures and its "good at" line; returns the card's
    path. The test items are the ones the model was first scored on when the
    documents and ``--seed`` are the same; the card keeps the figure it had as
    ``held_out_when_exported`` when the new one differs."""
    path = os.path.join(FLAGS.export_base, f"albert_demo_{lang}", str(FLAGS.version))
    card_path = os.path.join(path, "assets.extra", "model_card.json")
    if not os.path.isfile(card_path):
        raise UserError(f"{card_path} not found: pass the --export_base and --version to rescore")
    with open(card_path, encoding="utf-8") as f:
        card = json.load(f)
    report = held_out_scores(
        data_dir, lambda items: {"accuracy": saved_model_accuracy(path, items), "count": len(items)}
    )
    for key, scores in report.items():
        before = card.get(key)
        if isinstance(before, dict):
            if "previous_model" in before:  # what it replaced is not rescored here
                scores["previous_model"] = before["previous_model"]
            if before.get("accuracy") != scores["accuracy"]:
                card[f"{key}_when_exported"] = before
        card[key] = scores
    card["good_at"] = good_at(lang, report["held_out"], report["held_out_one_sentence"])
    write_json_atomic(card_path, card)
    return card_path


def good_at(lang: str, held: dict, short: dict | None) -> str:
    """The card's "good at" line from its held-out figures."""
    language = {"zh": "a Chinese", "en": "an English"}[lang]
    unit = "characters" if lang == "zh" else "words"
    text = (
        f"Telling the sentence that continues {language} passage from sentences of "
        f"other documents: {held['accuracy']:.0%} of held-out questions, against "
        f"{held['chance']:.0%} by chance and {held['overlap_idf_baseline']:.0%} for "
        f"picking the option sharing the most {unit} with the context, weighted by "
        "rarity (IDF)."
    )
    if short:
        text += (
            f" With only the sentence before the options as context (how people use "
            f"the demo): {short['accuracy']:.0%}, against "
            f"{short['overlap_count_baseline']:.0%} for counting shared {unit} and "
            f"{short['overlap_idf_baseline']:.0%} weighted by rarity."
        )
    return text


def evaluate(
    model_dir: str, data_dir: str, shared_sets: list[str], previous_model: str | None = None
) -> dict:
    """Held-out next-sentence accuracy beside chance, the overlap baselines and the
    previous model, on one-sentence contexts and on contexts of up to the full
    budget (the same items), and accuracy on the shared multiple-choice sets (up to
    1,000 items each)."""
    import tempfile

    import albert_tf
    from albert_tf.checkpoints.saved_format import read_finetune_settings
    from albert_tf.tasks.multiple_choice.data import read_multiple_choice
    from albert_tf.tasks.multiple_choice.trainer import MultipleChoiceTrainer
    from albert_tf.tokenizers import load_tokenizer

    settings = read_finetune_settings(model_dir)
    scorer = MultipleChoiceTrainer(
        albert_tf.load_multiple_choice(model_dir),
        load_tokenizer(os.path.join(model_dir, "tokenizer")),
        output_dir=tempfile.mkdtemp(prefix="demo_eval_"),
        max_seq_length=settings.get("max_seq_length", 128),
        max_qa_length=settings.get("max_qa_length", 64),
        context_keep=settings.get("context_keep", "start"),
        progress=False,
    )

    report = held_out_scores(data_dir, scorer.evaluate, previous_model)
    shared = {}
    for path in shared_sets:
        if not os.path.isfile(path):
            print(f"note: {path} not found; its score is left out")
            continue
        items, _ = read_multiple_choice(path)
        items = items[:1000]
        shared[_source(path)] = _scored(scorer.evaluate(items), _chance(items))
    return {**report, "shared_sets": shared}


def model_card(lang: str, work: str) -> dict:
    """What the app's sidebar shows: data, time, skill and held-out accuracy."""

    def read(name: str) -> dict:
        path = os.path.join(work, name)
        if not os.path.exists(path):
            raise UserError(f"{path} is missing; run the earlier stages first")
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    prepared, times = read("data/prepare.json"), read("times.json")
    evaluation = read("evaluation.json")
    finetune = read("finetune/summary.json")
    # Work dirs of before --<lang>_encoder lack start.json: they pretrained.
    encoder = read("start.json")["encoder"] if os.path.exists(f"{work}/start.json") else None
    held = evaluation["held_out"]
    # Work dirs of before the one-sentence test items lack this report.
    short = evaluation.get("held_out_one_sentence")
    # Work dirs of before --pretrain_on_finetune_text lack these two keys; the first of
    # them pretrained on the pretraining documents alone, later ones say how many.
    documents = prepared.get("pretraining_documents", prepared["documents"]["pretrain"])
    extra_text = prepared.get(
        "pretrain_on_finetune_text", documents > prepared["documents"]["pretrain"]
    )
    if encoder:
        pretraining = _encoder_record(encoder)
        rebuild = f"python -m albert_tf.demo_models --languages={lang}"
        if encoder != ENCODERS[lang]:
            rebuild += f" --{lang}_encoder={encoder}"
    else:
        pretrain_run = read("pretrain/pretraining_run.json")
        pretrain_results = read("pretrain/eval_results.json")  # its step: the steps trained
        pretraining = {
            "corpora": prepared["corpora"],
            "documents": documents,
            "sentences": prepared["pretraining_sentences"],
            "steps": pretrain_results["step"],
            "batch_size": pretrain_run["options"]["train_batch_size"],
            "sentence_task": pretrain_run["options"]["sentence_task"],
            "model": _card_model(pretrain_run["albert_config"]),
            "seconds": round(times.get("pretrain", 0.0)),
        }
        rebuild = (
            f"python -m albert_tf.demo_models --languages={lang}"
            + (" --pretrain_on_finetune_text" if extra_text else "")
            + f" --{lang}_encoder="
        )
    return {
        "name": f"albert_demo_{lang}",
        "language": lang,
        "task": "Which option continues the context? (multiple choice, any number of options)",
        "good_at": good_at(lang, held, short),
        "not_good_at": (
            "Reasoning, world knowledge, reading comprehension questions, and text unlike "
            "its training corpora; it is a small model trained on two CPU cores."
        ),
        "pretraining": pretraining,
        "finetuning": {
            "items": prepared["items"]["train"],
            # Items come from the fine-tuning and the pretraining documents (dev
            # items from fine-tuning documents no training item comes from).
            "documents": prepared["documents"]["finetune"] + prepared["documents"]["pretrain"],
            "steps": finetune.get("steps"),
            "seconds": round(times.get("finetune", 0.0)),
        },
        "held_out": evaluation["held_out"],
        **({"held_out_one_sentence": short} if short else {}),
        "shared_sets": evaluation["shared_sets"],
        "rebuild": rebuild,
    }


def _encoder_record(encoder: str) -> dict:
    """The card's pretraining entry for a shipped encoder: its name, model, steps and
    held-out MLM accuracy, from its ``card.json`` and ``config.json`` (a local path or
    a URL, as ``finetune --checkpoint`` takes)."""
    config = json.loads(storage.read_text(os.path.join(encoder, "config.json")))
    card_path = os.path.join(encoder, "card.json")
    card = json.loads(storage.read_text(card_path)) if storage.isfile(card_path) else {}
    return {
        "encoder": os.path.basename(os.path.normpath(encoder)),
        "data": card.get("data", ""),
        "steps": card.get("steps"),
        "mlm_accuracy": card.get("held_out", {}).get("mlm_accuracy"),
        "model": _card_model(config),
    }


def _card_model(config: dict) -> dict:
    """The model shape a card shows, from a config's (Hugging Face dialect) keys."""
    keys = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "share")
    return {k: config[k] for k in keys if k in config}


def run() -> None:
    """The `albert-demo-models` console script."""
    runner.run(main, "demo_models")


if __name__ == "__main__":
    run()
