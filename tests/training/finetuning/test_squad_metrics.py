"""SQuAD exact match and F1 against transformers' copy of the official scripts
(``transformers.data.metrics.squad_metrics``) on the same predictions: real PICO
answers with predictions that overlap them more or less, SQuAD 2.0 questions without
answers, and the best no-answer threshold."""

from __future__ import annotations

import gzip
import json
import random

import numpy as np
import pytest
from helpers.paths import SHARED_DATA
from transformers.data.metrics import squad_metrics
from transformers.data.processors.squad import SquadExample

from albert_tf.training.finetuning.metrics import (
    answer_tokens,
    best_no_answer_threshold,
    normalize_answer,
    squad_scores,
)

PICO = SHARED_DATA / "qa" / "en_pico_population.jsonl.gz"


def _pico_questions() -> list[dict]:
    if not PICO.exists():
        pytest.skip(f"{PICO} is not here")
    with gzip.open(PICO, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _predictions(rows: list[dict], seed: int) -> tuple[list[list[str]], list[str]]:
    """Per question its gold texts and a prediction: the answer, a window around or
    inside it, a neighbouring stretch, punctuation and articles changed, or nothing."""
    rng = random.Random(seed)
    golds, predicted = [], []
    for row in rows:
        golds.append([a["text"] for a in row["answers"]])
        answer = rng.choice(row["answers"])
        context, start = row["context"], answer["answer_start"]
        end = start + len(answer["text"])
        kind = rng.randrange(6)
        if kind == 0:
            text = answer["text"]
        elif kind == 1:
            text = context[max(0, start - rng.randrange(40)) : end + rng.randrange(40)]
        elif kind == 2:
            text = context[start + rng.randrange(max(1, end - start)) : end]
        elif kind == 3:
            text = context[end : end + rng.randrange(1, 60)]
        elif kind == 4:
            text = "The " + answer["text"].upper() + " ,."
        else:
            text = ""
        predicted.append(text)
    return golds, predicted


def test_scores_equal_the_official_script_on_pico():
    rows = _pico_questions()
    golds, predicted = _predictions(rows, seed=0)
    ours = squad_scores(golds, predicted)
    exact = [
        max(squad_metrics.compute_exact(g, p) for g in gold)
        for gold, p in zip(golds, predicted, strict=True)
    ]
    f1 = [
        max(squad_metrics.compute_f1(g, p) for g in gold)
        for gold, p in zip(golds, predicted, strict=True)
    ]
    assert ours["count"] == len(rows) == 397
    assert ours["exact_match"] == pytest.approx(np.mean(exact), abs=1e-12)
    assert ours["f1"] == pytest.approx(np.mean(f1), abs=1e-12)
    assert 0.1 < ours["exact_match"] < ours["f1"] < 0.9  # the mix is neither all right nor wrong


def test_no_answer_questions_and_threshold_equal_squad_v2():
    rows = _pico_questions()[:200]
    golds, predicted = _predictions(rows, seed=1)
    rng = np.random.RandomState(2)
    # A third of the questions lose their answers (SQuAD 2.0's unanswerable ones).
    for i in rng.choice(len(rows), len(rows) // 3, replace=False):
        golds[i] = [""]
    margins = rng.normal(size=len(rows))
    ours = squad_scores(golds, predicted)
    # The official script's inputs: a SQuAD-layout dataset, predictions and no-answer
    # probabilities (here the margins: it only compares them with each other).
    qas = [
        {"id": str(i), "answers": [{"text": g} for g in gold if g]} for i, gold in enumerate(golds)
    ]
    examples = [
        SquadExample(
            qas_id=q["id"], question_text="q", context_text="c", answer_text=None,
            start_position_character=None, title="t",
            answers=q["answers"], is_impossible=not q["answers"],
        )
        for q in qas
    ]  # fmt: skip
    preds = {str(i): p for i, p in enumerate(predicted)}
    official = squad_metrics.squad_evaluate(examples, preds)
    assert ours["exact_match"] * 100 == pytest.approx(official["exact"], abs=1e-9)
    assert ours["f1"] * 100 == pytest.approx(official["f1"], abs=1e-9)
    assert ours["has_answer_f1"] * 100 == pytest.approx(official["HasAns_f1"], abs=1e-9)
    assert ours["no_answer_exact_match"] * 100 == pytest.approx(official["NoAns_exact"], abs=1e-9)

    exact_raw, f1_raw = squad_metrics.get_raw_scores(examples, preds)
    has_answer = {q["id"]: bool(q["answers"]) for q in qas}
    no_answer_probs = {str(i): float(m) for i, m in enumerate(margins)}
    best_f1, best_threshold, _ = squad_metrics.find_best_thresh_v2(
        preds, f1_raw, no_answer_probs, has_answer
    )
    threshold, f1 = best_no_answer_threshold(golds, predicted, margins)
    assert f1 * 100 == pytest.approx(best_f1, abs=1e-9)
    assert threshold == best_threshold and np.isfinite(threshold)
    assert f1 > ours["f1"]  # leaving the likeliest unanswerable ones unanswered pays


def test_chinese_answers_count_characters():
    # SQuAD's whitespace words would make a Chinese answer one token; CMRC 2018 counts
    # characters (English words and numbers inside stay whole), punctuation dropped.
    assert answer_tokens("北京大学，2008年 ALBERT") == [
        "北",
        "京",
        "大",
        "学",
        "2008",
        "年",
        "albert",
    ]
    scores = squad_scores([["北京大学"]], ["北京"])
    assert scores["exact_match"] == 0.0 and scores["f1"] == pytest.approx(2 / 3)
    assert normalize_answer("An  answer, the END.") == "answer end"
