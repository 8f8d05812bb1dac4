"""`python -m albert_tf.demo_models`: the stages a test can afford (the real rebuild
takes about an hour per language; models/README.md records it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO

from albert_tf.baselines.overlap import WEIGHTINGS
from albert_tf.data import read_documents, sample_path
from albert_tf.recipes.demo_models import ENCODERS, document_split
from albert_tf.tasks.multiple_choice.data import read_multiple_choice


def _demo_models(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "albert_tf.demo_models", *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )


def test_prepare_splits_by_document_and_builds_next_sentence_items(tmp_path):
    corpus = sample_path("en")
    result = _demo_models(
        "--languages=en", "--stages=prepare", f"--en_corpora={corpus}", f"--work_dir={tmp_path}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data = tmp_path / "en" / "data"
    documents = list(read_documents(corpus))
    parts = [document_split(f"en_sample/{i}") for i in range(len(documents))]
    summary = json.loads((data / "prepare.json").read_text())
    assert summary["documents"] == {p: parts.count(p) for p in ("pretrain", "finetune", "test")}

    # The pretraining text is exactly the pretraining documents, in order.
    lines = (data / "pretrain.jsonl").read_text(encoding="utf-8").splitlines()
    pretrain = [json.loads(line)["sentences"] for line in lines]
    assert pretrain == [d for d, p in zip(documents, parts, strict=True) if p == "pretrain"]

    # Test items come only from test documents: context and answer are consecutive
    # there; no distractor is a sentence of the item's own document.
    test_docs = [d for d, p in zip(documents, parts, strict=True) if p == "test"]
    items, skipped = read_multiple_choice(str(data / "test.jsonl"))
    assert not skipped and len(items) == summary["items"]["test"] > 0
    for item in items[:200]:
        _, d, i = item.id.split("-")
        doc = test_docs[int(d)]
        assert item.options[item.label] == doc[int(i) + 1]
        assert item.context.endswith(doc[int(i)]) and len(item.options) == 4
        assert not set(item.options) - {item.options[item.label]} & set(doc)
    # The same questions with only the sentence before the options as context.
    short, _ = read_multiple_choice(str(data / "test_one_sentence.jsonl"))
    assert [(i.id, i.options, i.label) for i in short] == [
        (i.id, i.options, i.label) for i in items
    ]
    for item in short:
        _, d, i = item.id.split("-")
        assert item.context == test_docs[int(d)][int(i)]
    assert sum(s.context != i.context for s, i in zip(short, items, strict=True)) > 0
    train, _ = read_multiple_choice(str(data / "train.jsonl"))
    assert {i.context for i in train}.isdisjoint({i.context for i in items})
    # Training contexts run from the previous sentence alone up to the full budget
    # (300 characters): where the full budget holds earlier sentences, most items
    # get fewer of them, and some get the previous sentence alone.
    from albert_tf.tasks.multiple_choice.next_sentence import _context

    docs_of = {p: [d for d, q in zip(documents, parts, strict=True) if q == p] for p in parts}
    shorter = alone = could_be_longer = 0
    for item in train:
        part, d, i = item.id.split("-")
        doc = docs_of[part][int(d)]
        full = _context(doc, int(i) + 1, 300, " ")
        assert full.endswith(item.context) and item.context.endswith(doc[int(i)])
        if full != doc[int(i)]:
            could_be_longer += 1
            shorter += item.context != full
            alone += item.context == doc[int(i)]
    assert could_be_longer > 100
    assert shorter > 0.5 * could_be_longer and alone > 0.1 * could_be_longer
    # Training items: fine-tuning and pretraining documents; dev items: other
    # fine-tuning documents than any training item's.
    dev, _ = read_multiple_choice(str(data / "dev.jsonl"))
    documents_of = lambda split, part: {  # noqa: E731
        i.id.split("-")[1] for i in split if i.id.startswith(part + "-")
    }
    assert {i.id.split("-")[0] for i in train} == {"finetune", "pretrain"}
    assert {i.id.split("-")[0] for i in dev} == {"finetune"}
    assert documents_of(dev, "finetune").isdisjoint(documents_of(train, "finetune"))


def _fine_tuned_zh(tmp_path, mc_models, stages: str, *flags: str):
    """The demo's later ``stages`` on the sample, with the tiny Chinese model as the
    work dir's fine-tuned best checkpoint; returns the finished command and the work dir."""
    work = tmp_path / "zh"
    (work / "finetune").mkdir(parents=True)
    shutil.copytree(mc_models["zh"]["model"], work / "finetune" / "best")
    result = _demo_models(
        "--languages=zh",
        f"--stages={stages}",
        f"--zh_corpora={sample_path('zh')}",
        f"--work_dir={tmp_path}",
        *flags,
    )
    return result, work


def test_evaluate_scores_a_model_against_chance_and_the_overlap_baseline(tmp_path, mc_models):
    result, work = _fine_tuned_zh(
        tmp_path,
        mc_models,
        "prepare,evaluate",
        # The "previous model" it is compared with: the same weights, exported.
        f"--previous_model={mc_models['zh']['saved_model']}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((work / "evaluation.json").read_text())
    held = report["held_out"]
    assert (
        held["chance"] == 0.25
        and held["items"]
        == json.loads((work / "data" / "prepare.json").read_text())["items"]["test"]
    )
    # Random weights: near chance; the overlap baselines see shared characters.
    assert abs(held["accuracy"] - 0.25) < 5 * held["accuracy_stderr"] + 0.02
    assert held["overlap_idf_baseline"] > 0.4 and held["overlap_count_baseline"] > 0.3
    # The length-normalised two, IDF from the prepared pretraining documents, and the
    # strongest of the four as "the baseline".
    for scores in (held, report["held_out_one_sentence"]):
        four = {w: scores[f"overlap_{w}_baseline"] for w in WEIGHTINGS}
        assert min(four.values()) > 0.3
        assert scores["baseline"] == {
            "weighting": max(four, key=four.get),
            "accuracy": max(four.values()),
        }
    short = report["held_out_one_sentence"]
    assert short["items"] == held["items"] and short["chance"] == 0.25
    assert short["overlap_count_baseline"] > 0.3
    assert short["overlap_count_baseline"] != held["overlap_count_baseline"]
    # The exported copy of the same weights scores as the trainer does: the
    # SavedModel's own tokenizer and packing, on the same items.
    for scores in (held, short):
        assert scores["previous_model"]["accuracy"] == pytest.approx(scores["accuracy"], abs=0.011)
        assert scores["previous_model"]["path"].endswith("tiny_zh/1")


def test_combine_adds_the_overlap_and_evaluate_scores_both_parts(tmp_path, mc_models):
    # A model of random weights is at chance alone; fitted on dev, the combination
    # leans on the overlap, and the evaluate stage scores what the export answers.
    result, work = _fine_tuned_zh(tmp_path, mc_models, "prepare,combine,evaluate")
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((work / "combination.json").read_text())
    settings = json.loads((work / "finetune" / "best" / "finetune.json").read_text())
    assert settings["overlap_combination"]["overlap_weight"] == record["overlap_weight"] > 0
    documents = len((work / "data" / "pretrain.jsonl").read_text(encoding="utf-8").splitlines())
    assert record["documents"] == documents
    dev = record["dev_accuracy"]
    assert dev["combined"] >= dev["model"] and dev["overlap"] > dev["model"]
    held = json.loads((work / "evaluation.json").read_text())["held_out"]
    assert held["accuracy"] > 0.25 + 5 * held["accuracy_stderr"]


def test_rescore_adds_the_one_sentence_figures_to_an_exported_card(tmp_path, mc_models):
    export = tmp_path / "exported" / "albert_demo_zh" / "3"
    shutil.copytree(mc_models["zh"]["saved_model"], export)
    result = _demo_models(
        "--languages=zh",
        "--stages=prepare,rescore",
        f"--zh_corpora={sample_path('zh')}",
        f"--work_dir={tmp_path / 'work'}",
        f"--export_base={tmp_path / 'exported'}",
        "--version=3",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    card = json.loads((export / "assets.extra" / "model_card.json").read_text())
    items, _ = read_multiple_choice(str(tmp_path / "work" / "zh" / "data" / "test.jsonl"))
    for key in ("held_out", "held_out_one_sentence"):
        assert card[key]["items"] == len(items) and "overlap_count_baseline" in card[key]
    # The figure it was exported with (the helper's made-up 0.31) is kept apart.
    assert card["held_out_when_exported"]["accuracy"] == 0.31
    assert "(how people use the demo)" in card["good_at"]
    assert card["name"] == "tiny_zh"  # the rest of the card is left alone
    # The strongest of the four overlap baselines, named in characters.
    best = card["held_out_one_sentence"]["baseline"]
    assert best["name"].startswith("shared characters")
    assert (
        best["accuracy"] == card["held_out_one_sentence"][f"overlap_{best['weighting']}_baseline"]
    )
    assert f"{best['accuracy']:.1%} for the baseline ({best['name']})." in card["good_at"]


def test_a_work_dir_from_an_older_demo_models_is_refused_before_training(tmp_path):
    data = tmp_path / "zh" / "data"
    data.mkdir(parents=True)
    (data / "prepare.json").write_text(json.dumps({"items": {"test": 10}}))  # no version
    # The embedded sample stands in for the shared corpora, which a clone lacks: the
    # check under test comes after the corpora are found.
    result = _demo_models(
        "--languages=zh",
        "--stages=prepare,finetune",
        "--zh_corpora=sample:zh",
        f"--work_dir={tmp_path}",
    )
    assert result.returncode == 2
    assert "prepared by an older demo_models (items version 1, now 2)" in result.stderr
    assert not (tmp_path / "zh" / "finetune").exists()


def test_a_missing_encoder_is_named_before_any_work(tmp_path):
    result = _demo_models(
        "--languages=zh",
        "--stages=prepare,finetune",
        "--zh_encoder=/nowhere",
        "--zh_corpora=sample:zh",
        "--en_corpora=sample:en",
        f"--work_dir={tmp_path}",
    )
    assert result.returncode == 2
    assert "--zh_encoder=/nowhere is not a model directory" in result.stderr
    assert not (tmp_path / "zh" / "data").exists()
    # Every language's encoder is checked before the first language's work starts.
    both = _demo_models(
        "--languages=zh,en", "--stages=prepare,finetune", "--en_encoder=/nowhere",
        "--zh_corpora=sample:zh", "--en_corpora=sample:en", f"--work_dir={tmp_path}",
    )  # fmt: skip
    assert both.returncode == 2 and "--en_encoder=/nowhere" in both.stderr
    assert not (tmp_path / "zh" / "data").exists()
    # Pretraining asked for by name beside an encoder is a contradiction, not a no-op.
    pretrain = _demo_models(
        "--languages=zh", "--stages=prepare,pretrain", "--zh_corpora=sample:zh",
        f"--work_dir={tmp_path}",
    )  # fmt: skip
    assert pretrain.returncode == 2
    assert "add --zh_encoder= (empty) to pretrain" in pretrain.stderr


def test_unknown_stage_and_language_are_user_errors(tmp_path):
    for flag in ("--stages=prepare,train", "--languages=fr"):
        result = _demo_models(flag, f"--work_dir={tmp_path}")
        assert result.returncode == 2
        assert result.stderr.strip().splitlines()[-1].startswith("demo_models: error: ")


def _write_stage_files(work: Path, accuracy: float) -> None:
    files = {
        "data/prepare.json": {
            "corpora": ["a.jsonl"],
            "documents": {"pretrain": 60, "finetune": 30, "test": 10},
            "pretraining_sentences": 900,
            "items": {"train": 400, "dev": 50, "test": 40},
        },
        "times.json": {"pretrain": 100.4, "finetune": 50.6},
        "evaluation.json": {
            "held_out": {"accuracy": accuracy, "chance": 0.25, "overlap_idf_baseline": 0.5135},
            "held_out_one_sentence": {
                "accuracy": 0.4861,
                "chance": 0.25,
                "overlap_count_baseline": 0.4012,
                "overlap_idf_baseline": 0.4420,
            },
            "shared_sets": {},
        },
        "pretrain/pretraining_run.json": {
            "options": {"train_batch_size": 64, "sentence_task": "nsp"},
            "albert_config": {"vocab_size": 8000, "hidden_size": 128, "share": "all"},
        },
        "pretrain/eval_results.json": {"step": 6000},
        "finetune/summary.json": {"steps": 3000},
    }
    for name, content in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(json.dumps(content))


def test_model_card_reads_the_stages_records(tmp_path):
    from albert_tf.recipes.demo_models import model_card

    _write_stage_files(tmp_path, accuracy=0.5695)
    card = model_card("en", str(tmp_path))
    assert card["good_at"].startswith("Telling the sentence that continues an English passage")
    assert "57% of held-out questions, against 25% by chance and 51% for" in card["good_at"]
    assert "most words" in card["good_at"]
    assert card["good_at"].endswith(
        "(how people use the demo): 49%, against 40% for counting shared words and 44% "
        "weighted by rarity."
    )
    assert card["held_out_one_sentence"]["overlap_count_baseline"] == 0.4012
    assert card["pretraining"]["steps"] == 6000 and card["pretraining"]["seconds"] == 100
    assert card["pretraining"]["model"] == {"vocab_size": 8000, "hidden_size": 128, "share": "all"}
    assert card["finetuning"] == {"items": 400, "documents": 90, "steps": 3000, "seconds": 51}
    # This build pretrained: rebuilding it needs the encoder flag emptied.
    assert card["rebuild"] == "python -m albert_tf.demo_models --languages=en --en_encoder="
    assert card["pretraining"]["documents"] == 60
    zh = model_card("zh", str(tmp_path))
    assert zh["good_at"].startswith("Telling the sentence that continues a Chinese passage")
    assert "most characters" in zh["good_at"]
    # A build that also pretrained on fine-tuning text says so, and how to redo it.
    prepare = json.loads((tmp_path / "data/prepare.json").read_text())
    prepare["pretraining_documents"] = 85
    (tmp_path / "data/prepare.json").write_text(json.dumps(prepare))
    card = model_card("zh", str(tmp_path))
    assert card["pretraining"]["documents"] == 85
    assert card["rebuild"].endswith("--languages=zh --pretrain_on_finetune_text --zh_encoder=")
    # A build that started from the shipped encoder takes its record from the encoder's card.
    (tmp_path / "start.json").write_text(json.dumps({"encoder": ENCODERS["zh"]}))
    card = model_card("zh", str(tmp_path))
    shipped = json.loads((REPO / ENCODERS["zh"] / "card.json").read_text())
    assert card["pretraining"]["encoder"] == "albert_tiny_zh_peoples_daily"
    assert card["pretraining"]["steps"] == shipped["steps"]
    assert card["pretraining"]["mlm_accuracy"] == shipped["held_out"]["mlm_accuracy"]
    assert card["pretraining"]["model"]["hidden_size"] == 128
    assert card["rebuild"] == "python -m albert_tf.demo_models --languages=zh"
    (tmp_path / "start.json").unlink()
    (tmp_path / "finetune/summary.json").unlink()
    with pytest.raises(
        FileNotFoundError, match=r"finetune/summary.json is missing; run the earlier"
    ):
        model_card("en", str(tmp_path))


def test_a_card_of_a_combined_build_records_the_combination(tmp_path):
    from albert_tf.recipes.demo_models import model_card

    _write_stage_files(tmp_path, accuracy=0.5695)
    assert "overlap_combination" not in model_card("en", str(tmp_path))
    record = {"model_weight": 0.7, "overlap_weight": 1.9, "documents": 60}
    # A log of a fit whose checkpoint is gone (fine-tuning ran again) says nothing.
    (tmp_path / "combination.json").write_text(json.dumps(record))
    assert "overlap_combination" not in model_card("en", str(tmp_path))
    best = tmp_path / "finetune" / "best"
    best.mkdir(parents=True)
    fitted = record | {"document_frequency": {"the": 60}}
    (best / "finetune.json").write_text(json.dumps({"overlap_combination": fitted}))
    card = model_card("en", str(tmp_path))
    assert card["overlap_combination"] == record  # the frequencies stay in the export
    assert card["good_at"].startswith(
        "Telling the sentence that continues an English passage from sentences of other "
        "documents: its model's score plus how much each option shares with the context"
    )
    assert "answers 57% of held-out questions" in card["good_at"]


def test_a_card_names_the_strongest_overlap_baseline_as_the_baseline(tmp_path):
    from albert_tf.recipes.demo_models import model_card

    _write_stage_files(tmp_path, accuracy=0.8311)
    # What evaluate writes now: four baselines and the strongest of them.
    path = tmp_path / "evaluation.json"
    evaluation = json.loads(path.read_text())
    evaluation["held_out"] |= {
        "overlap_count_baseline": 0.685,
        "overlap_idf_baseline": 0.755,
        "overlap_normalized_baseline": 0.7705,
        "overlap_idf_normalized_baseline": 0.8295,
        "baseline": {"weighting": "idf_normalized", "accuracy": 0.8295},
    }
    evaluation["held_out_one_sentence"] |= {
        "accuracy": 0.8102,
        "overlap_normalized_baseline": 0.729,
        "overlap_idf_normalized_baseline": 0.7755,
        "baseline": {"weighting": "idf_normalized", "accuracy": 0.7755},
    }
    path.write_text(json.dumps(evaluation))
    card = model_card("zh", str(tmp_path))
    name = "shared characters, length-normalised, weighted by rarity"
    assert card["held_out_one_sentence"]["baseline"] == {
        "name": name,
        "weighting": "idf_normalized",
        "accuracy": 0.7755,
    }
    assert card["held_out"]["baseline"]["name"] == name
    assert card["held_out_one_sentence"]["overlap_count_baseline"] == 0.4012  # kept
    assert card["good_at"] == (
        "Telling the sentence that continues a Chinese passage from sentences of other "
        "documents: 83.1% of held-out questions, against 25% by chance and 83.0% for the "
        "baseline (the strongest of four rules picking the option that shares the most "
        f"characters with the context: {name}). With only the sentence before the options "
        "as context (how people use the demo): 81.0%, against 77.5% for the baseline "
        f"({name})."
    )
    english = model_card("en", str(tmp_path))
    assert (
        "shares the most words with the context: shared words, length-normalised"
        in (english["good_at"])
    )


def test_held_out_scores_weigh_by_the_prepared_pretraining_documents(tmp_path):
    from albert_tf.recipes.demo_models.scoring import held_out_scores

    # One question: "the cat" (2 units, both shared) against a 12-unit option sharing
    # the, sat and on. Counted, the long one wins (3 > 2); length-normalised, the short
    # one (2 / (√2 + 1) = 0.83 > 3 / (√12 + 1) = 0.67); weighted by rarity in the
    # pretraining documents (the common, cat rarer, sat and on never seen), the long
    # one again (1.29 > 1.12; tests/baselines/test_overlap.py has the sums).
    item = {
        "id": "test-0-1",
        "context": "The cat sat on the mat.",
        "question": "Where?",
        "options": ["the cat", "The dog sat by an old fence on a hill near farms."],
        "label": 0,
    }
    for name in ("test", "test_one_sentence"):
        (tmp_path / f"{name}.jsonl").write_text(json.dumps(item) + "\n")
    documents = [["the", "cat"], ["the dog"], ["the end"]]
    (tmp_path / "pretrain.jsonl").write_text(
        "".join(json.dumps({"sentences": d}) + "\n" for d in documents)
    )
    report = held_out_scores(str(tmp_path), lambda items: {"accuracy": 1.0, "count": len(items)})
    for scores in report.values():
        assert {k: v for k, v in scores.items() if "baseline" in k} == {
            "overlap_count_baseline": 0.0,
            "overlap_idf_baseline": 0.0,
            "overlap_normalized_baseline": 1.0,
            "overlap_idf_normalized_baseline": 0.0,
            "baseline": {"weighting": "normalized", "accuracy": 1.0},
        }
        assert scores["accuracy"] == 1.0 and scores["chance"] == 0.5
    (tmp_path / "pretrain.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match="pretrain.jsonl is missing"):
        held_out_scores(str(tmp_path), lambda items: {"accuracy": 1.0, "count": len(items)})


def test_pretraining_on_finetune_text_leaves_dev_and_test_documents_out(tmp_path):
    corpus = sample_path("en")
    result = _demo_models(
        "--languages=en",
        "--stages=prepare",
        "--pretrain_on_finetune_text",
        f"--en_corpora={corpus}",
        f"--work_dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data = tmp_path / "en" / "data"
    documents = list(read_documents(corpus))
    parts = [document_split(f"en_sample/{i}") for i in range(len(documents))]
    finetune_docs = [d for d, p in zip(documents, parts, strict=True) if p == "finetune"]
    dev, _ = read_multiple_choice(str(data / "dev.jsonl"))
    dev_docs = {int(i.id.split("-")[1]) for i in dev}
    assert dev_docs  # the sample has dev documents, so the exclusion is exercised
    expected = [d for d, p in zip(documents, parts, strict=True) if p == "pretrain"]
    expected += [d for k, d in enumerate(finetune_docs) if k not in dev_docs]
    lines = (data / "pretrain.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["sentences"] for line in lines] == expected
    summary = json.loads((data / "prepare.json").read_text())
    assert summary["pretraining_documents"] == len(expected) > summary["documents"]["pretrain"]
    assert summary["pretrain_on_finetune_text"] is True
    # The cached split cannot feed a pretraining run without that text (a missing
    # configs folder makes a run that slipped past the check fail fast).
    again = _demo_models(
        "--languages=en",
        "--stages=prepare,pretrain",
        "--en_encoder=",  # pretrain, rather than start from the shipped encoder
        "--configs_dir=/nonexistent",
        f"--en_corpora={corpus}",
        f"--work_dir={tmp_path}",
    )
    assert again.returncode == 2, again.stderr[-2000:]
    assert "was prepared with --pretrain_on_finetune_text; pass the same" in again.stderr
    # No dev or test document is pretraining text.
    test_docs = [d for d, p in zip(documents, parts, strict=True) if p == "test"]
    held_back = [finetune_docs[k] for k in dev_docs] + test_docs
    assert held_back and not [d for d in held_back if d in expected]
