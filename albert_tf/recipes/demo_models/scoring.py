"""Scoring a demo model: held-out next-sentence accuracy beside chance, the four
overlap baselines (the strongest of them is "the baseline") and a previous export,
accuracy on shared multiple-choice sets, and the model card's "good at" line made
from those figures."""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Callable, Sequence

from albert_tf.recipes.demo_models.items import ONE_SENTENCE, source_name
from albert_tf.storage import write_json_atomic

#: Items scored of each shared multiple-choice set.
SHARED_SET_ITEMS = 1000


def _scored(result: dict, chance: float) -> dict:
    from albert_tf.training.evaluation import binomial_stderr

    p, n = result["accuracy"], result["count"]
    return {
        "accuracy": round(p, 4),
        "accuracy_stderr": round(binomial_stderr(p, n), 4),
        "items": n,
        "chance": round(chance, 4),
    }


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


def training_frequencies(data_dir: str):
    """The unit document frequencies of the prepared pretraining documents
    (``pretrain.jsonl``, each document's sentences joined by spaces), which the
    ``idf_normalized`` baseline weights by."""
    from albert_tf.baselines.overlap import document_frequencies

    path = os.path.join(data_dir, "pretrain.jsonl")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is missing; run --stages=prepare in a new --work_dir")
    with open(path, encoding="utf-8") as f:
        return document_frequencies(" ".join(json.loads(line)["sentences"]) for line in f)


def held_out_scores(
    data_dir: str, score: Callable[[list], dict], previous_model: str | None = None
) -> dict:
    """``held_out`` (test items) and ``held_out_one_sentence`` (the same items with one
    sentence of context): ``score(items)``'s accuracy (a dict with ``accuracy`` and
    ``count``) beside chance, the four overlap baselines (``overlap_<weighting>_baseline``,
    IDF from the prepared pretraining documents), ``baseline``: the strongest of them
    (``{"weighting": ..., "accuracy": ...}``), and the previous model."""
    from albert_tf.baselines.overlap import WEIGHTINGS, overlap_accuracy, strongest_baseline
    from albert_tf.tasks.multiple_choice.data import read_multiple_choice

    frequencies = training_frequencies(data_dir)

    def held_out(name: str) -> dict:
        path = os.path.join(data_dir, f"{name}.jsonl")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} is missing; run --stages=prepare in a new --work_dir")
        items, _ = read_multiple_choice(path)
        scores = _scored(score(items), _chance(items))
        baselines = {
            w: round(overlap_accuracy(items, w, frequencies)["accuracy"], 4) for w in WEIGHTINGS
        }
        for weighting, accuracy in baselines.items():
            scores[f"overlap_{weighting}_baseline"] = accuracy
        weighting, accuracy = strongest_baseline(baselines)
        scores["baseline"] = {"weighting": weighting, "accuracy": accuracy}
        if previous_model:
            scores["previous_model"] = {
                "path": os.path.normpath(previous_model),
                "accuracy": round(saved_model_accuracy(previous_model, items), 4),
            }
        return scores

    return {"held_out": held_out("test"), "held_out_one_sentence": held_out(ONE_SENTENCE)}


def named_baseline(lang: str, scores: dict) -> dict:
    """A held-out set's figures with its ``baseline`` named for the card, in the
    language's units (e.g. "shared characters, length-normalised, weighted by
    rarity"); figures without a ``baseline`` (scored before the four baselines)
    unchanged."""
    from albert_tf.baselines.overlap import baseline_name

    baseline = scores.get("baseline")
    if not isinstance(baseline, dict):
        return scores
    name = baseline_name(baseline["weighting"], _UNITS[lang])
    return {**scores, "baseline": {"name": name, **baseline}}


def evaluate(
    model_dir: str,
    data_dir: str,
    shared_sets: Sequence[str],
    previous_model: str | None = None,
) -> dict:
    """Held-out next-sentence accuracy beside chance, the overlap baselines and the
    previous model, on one-sentence contexts and on contexts of up to the full
    budget (the same items), and accuracy on the shared multiple-choice sets (up to
    `SHARED_SET_ITEMS` items each; a set that is not there is left out). A model
    combined with the overlap (the ``combine`` stage) is scored with both parts."""
    from albert_tf.checkpoints.saved_format import load_task_model, read_finetune_settings
    from albert_tf.tasks.multiple_choice.data import read_multiple_choice
    from albert_tf.tasks.multiple_choice.trainer import MultipleChoiceTrainer
    from albert_tf.tokenizers import load_tokenizer

    settings = read_finetune_settings(model_dir)
    scorer = MultipleChoiceTrainer(
        load_task_model(model_dir, "multiple_choice"),
        load_tokenizer(os.path.join(model_dir, "tokenizer")),
        output_dir=tempfile.mkdtemp(prefix="demo_eval_"),
        max_seq_length=settings.get("max_seq_length", 128),
        max_qa_length=settings.get("max_qa_length", 64),
        context_keep=settings.get("context_keep", "start"),
        progress=False,
    )

    score = scorer.evaluate
    if "overlap_combination" in settings:  # score as the export will answer: both parts
        from albert_tf.recipes.demo_models.combine import combined_accuracy, serving_module

        module = serving_module(model_dir, settings)
        score = functools.partial(combined_accuracy, module)
    report = held_out_scores(data_dir, score, previous_model)
    shared = {}
    for path in shared_sets:
        if not os.path.isfile(path):
            print(f"note: {path} not found; its score is left out")
            continue
        items, _ = read_multiple_choice(path)
        items = items[:SHARED_SET_ITEMS]
        shared[source_name(path)] = _scored(score(items), _chance(items))
    return {**report, "shared_sets": shared}


def rescore(lang: str, data_dir: str, saved_model: str) -> str:
    """Scores the exported demo model ``saved_model`` on the prepared test items and
    rewrites its card's held-out figures and its "good at" line; returns the card's
    path. The test items are the ones the model was first scored on when the
    documents and the seed are the same; the card keeps the figure it had as
    ``held_out_when_exported`` when the new one differs."""
    card_path = os.path.join(saved_model, "assets.extra", "model_card.json")
    if not os.path.isfile(card_path):
        raise FileNotFoundError(
            f"{card_path} not found: pass the --export_base and --version to rescore"
        )
    with open(card_path, encoding="utf-8") as f:
        card = json.load(f)
    report = held_out_scores(
        data_dir,
        lambda items: {"accuracy": saved_model_accuracy(saved_model, items), "count": len(items)},
    )
    for key, scores in report.items():
        before = card.get(key)
        if isinstance(before, dict):
            if "previous_model" in before:  # what it replaced is not rescored here
                scores["previous_model"] = before["previous_model"]
            if before.get("accuracy") != scores["accuracy"]:
                card[f"{key}_when_exported"] = before
        card[key] = named_baseline(lang, scores)
    combined = "overlap_combination" in card
    card["good_at"] = good_at(lang, card["held_out"], card["held_out_one_sentence"], combined)
    write_json_atomic(card_path, card)
    return card_path


#: What the baselines count, per language.
_UNITS = {"zh": "characters", "en": "words"}


def good_at(lang: str, held: dict, short: dict | None, combined: bool = False) -> str:
    """The card's "good at" line from its held-out figures: beside the strongest
    overlap baseline when they name one (``baseline``), else beside the counted and
    IDF overlap (cards of before the four baselines). ``combined``: the model's score
    is added to the overlap (the ``combine`` stage), which the line says first."""
    language = {"zh": "a Chinese", "en": "an English"}[lang]
    unit = _UNITS[lang]
    text = (
        f"Telling the sentence that continues {language} passage from sentences of "
        f"other documents: "
    )
    if combined:
        text += (
            "its model's score plus how much each option shares with the context "
            "(length-normalised, weighted by rarity; two weights fitted on dev) answers "
        )
    baseline = held.get("baseline")
    if isinstance(baseline, dict):
        name = baseline.get("name") or baseline["weighting"]
        text += (
            f"{held['accuracy']:.1%} of held-out questions, against {held['chance']:.0%} by "
            f"chance and {baseline['accuracy']:.1%} for the baseline (the strongest of "
            f"four rules picking the option that shares the most {unit} with the "
            f"context: {name})."
        )
        if short and isinstance(short.get("baseline"), dict):
            best = short["baseline"]
            text += (
                " With only the sentence before the options as context (how people use "
                f"the demo): {short['accuracy']:.1%}, against {best['accuracy']:.1%} for "
                f"the baseline ({best.get('name') or best['weighting']})."
            )
        return text
    text += (
        f"{held['accuracy']:.0%} of held-out questions, against "
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
