"""CMRC 2018's exact match and F1 (`cmrc_scores`) against a re-implementation of the
official ``cmrc2018_evaluate.py`` written here from the script's definition: its
punctuation list, its mixed segmentation (each character of U+4E00–U+9FA5 alone, the
runs between them word-tokenised), F1 on the longest common *contiguous* run of
segments, exact match on the texts without punctuation. People's Daily entities are the
gold answers; the predictions overlap them more or less, with punctuation, numbers and
Latin words around. The script calls ``nltk.word_tokenize`` on the runs; nltk is not
installed, so the runs here hold only what splits alike by whitespace and by peeling
punctuation off a word's ends (numbers such as 3.5, words, %, brackets, full stops)."""

from __future__ import annotations

import gzip
import json
import random
import re

import pytest
from helpers.paths import SHARED_DATA

from albert_tf.training.finetuning.metrics import (
    cmrc_answer_scores,
    cmrc_scores,
    cmrc_segments,
    squad_scores,
)

PEOPLES_DAILY = SHARED_DATA / "tagging" / "zh_peoples_daily_1998_ner.jsonl.gz"

# -- the official script, from its definition -------------------------------------------------

SP_CHAR = [
    "-", ":", "_", "*", "^", "/", "\\", "~", "`", "+", "=",
    "，", "。", "：", "？", "！", "“", "”", "；", "’", "《", "》", "……", "·", "、",
    "「", "」", "（", "）", "－", "～", "『", "』",
]  # fmt: skip


def _word_tokenize(text: str) -> list[str]:
    """What ``nltk.word_tokenize`` gives for the runs these tests hold."""
    out = []
    for word in text.split():
        head, tail = [], []
        while word and not word[0].isalnum():
            head.append(word[0])
            word = word[1:]
        while word and not word[-1].isalnum():
            tail.insert(0, word[-1])
            word = word[:-1]
        out += head + ([word] if word else []) + tail
    return out


def _mixed_segmentation(in_str: str, rm_punc: bool = False) -> list[str]:
    in_str = str(in_str).lower().strip()
    segs_out = []
    temp_str = ""
    for char in in_str:
        if rm_punc and char in SP_CHAR:
            continue
        if re.search(r"[\u4e00-\u9fa5]", char) or char in SP_CHAR:
            if temp_str != "":
                segs_out.extend(_word_tokenize(temp_str))
                temp_str = ""
            segs_out.append(char)
        else:
            temp_str += char
    if temp_str != "":
        segs_out.extend(_word_tokenize(temp_str))
    return segs_out


def _remove_punctuation(in_str: str) -> str:
    in_str = str(in_str).lower().strip()
    return "".join(char for char in in_str if char not in SP_CHAR)


def _find_lcs(s1: list[str], s2: list[str]) -> tuple[list[str], int]:
    m = [[0 for _ in range(len(s2) + 1)] for _ in range(len(s1) + 1)]
    mmax = 0
    p = 0
    for i in range(len(s1)):
        for j in range(len(s2)):
            if s1[i] == s2[j]:
                m[i + 1][j + 1] = m[i][j] + 1
                if m[i + 1][j + 1] > mmax:
                    mmax = m[i + 1][j + 1]
                    p = i + 1
    return s1[p - mmax : p], mmax


def _calc_f1_score(answers: list[str], prediction: str) -> float:
    f1_scores = []
    for ans in answers:
        ans_segs = _mixed_segmentation(ans, rm_punc=True)
        prediction_segs = _mixed_segmentation(prediction, rm_punc=True)
        _, lcs_len = _find_lcs(ans_segs, prediction_segs)
        if lcs_len == 0:
            f1_scores.append(0)
            continue
        precision = 1.0 * lcs_len / len(prediction_segs)
        recall = 1.0 * lcs_len / len(ans_segs)
        f1_scores.append((2 * precision * recall) / (precision + recall))
    return max(f1_scores)


def _calc_em_score(answers: list[str], prediction: str) -> int:
    return int(any(_remove_punctuation(a) == _remove_punctuation(prediction) for a in answers))


def _official(golds: list[list[str]], predictions: list[str]) -> dict[str, float]:
    f1 = sum(_calc_f1_score(g, p) for g, p in zip(golds, predictions, strict=True))
    em = sum(_calc_em_score(g, p) for g, p in zip(golds, predictions, strict=True))
    return {"f1": 100.0 * f1 / len(golds), "em": 100.0 * em / len(golds)}


# -- the cases ---------------------------------------------------------------------------------

DECORATIONS = ["，", "。", "（", "）", "《", "》", "、", "“", "”", " 3.5% ", " 2008 ", " Beijing. ",
               "·", "…", "(", ")", "－", "1998年", " A1 "]  # fmt: skip


def _texts() -> list[tuple[str, list[tuple[int, int]]]]:
    """Chinese texts and their entities' spans: People's Daily when it is here, else
    a few sentences written here."""
    if PEOPLES_DAILY.exists():
        rows = []
        with gzip.open(PEOPLES_DAILY, "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                if row["entities"]:
                    rows.append((row["text"], [(e["start"], e["end"]) for e in row["entities"]]))
                if len(rows) == 400:
                    break
        return rows
    written = [
        (
            "中共中央总书记、国家主席江泽民在北京发表1998年新年讲话。",
            ["中共中央", "江泽民", "北京"],
        ),
        ("上海浦东新区的GDP增长了3.5%，《人民日报》报道。", ["上海浦东新区", "人民日报"]),
        ("李鹏总理昨天在人民大会堂会见了日本客人。", ["李鹏", "人民大会堂", "日本"]),
        ("新华社记者从广州报道，广东省今年出口增长很快。", ["新华社", "广州", "广东省"]),
        ("香港特别行政区行政长官董建华出席了会议。", ["香港特别行政区", "董建华"]),
        ("中国科学院的研究人员在南京召开了学术会议。", ["中国科学院", "南京"]),
        ("国务院副总理朱镕基在天津考察了国有企业。", ["国务院", "朱镕基", "天津"]),
        ("联合国秘书长安南表示，伊拉克问题应和平解决。", ["联合国", "安南", "伊拉克"]),
        (
            "北京大学和清华大学的学生参加了长江水利委员会的活动。",
            ["北京大学", "清华大学", "长江水利委员会"],
        ),
        ("西藏自治区拉萨市的群众欢度新春佳节。", ["西藏自治区", "拉萨市"]),
    ]
    return [
        (text, [(text.index(e), text.index(e) + len(e)) for e in names]) for text, names in written
    ]


def _cases(seed: int) -> tuple[list[list[str]], list[str]]:
    rng = random.Random(seed)
    golds, predictions = [], []
    for text, spans in _texts():
        start, end = rng.choice(spans)
        gold = [text[start:end]]
        if rng.random() < 0.3:  # a second answer, as CMRC's dev set has three
            other = rng.choice(spans)
            gold.append(text[max(0, other[0] - 1) : other[1]])
        kind = rng.randrange(7)
        if kind == 0:
            prediction = gold[0]
        elif kind == 1:  # a window around the answer
            prediction = text[max(0, start - rng.randrange(6)) : end + rng.randrange(6)]
        elif kind == 2:  # inside it
            prediction = text[start + rng.randrange(max(1, end - start)) : end]
        elif kind == 3:  # next to it
            prediction = text[end : end + rng.randrange(1, 8)]
        elif kind == 4:  # punctuation, numbers and Latin words around it, upper case
            prediction = rng.choice(DECORATIONS) + gold[0].upper() + rng.choice(DECORATIONS)
        elif kind == 5:  # the gold answer decorated instead
            gold[0] = rng.choice(DECORATIONS) + gold[0] + rng.choice(DECORATIONS)
            prediction = text[start:end]
        else:
            prediction = ""
        golds.append(gold)
        predictions.append(prediction)
    return golds, predictions


def test_decorations_tokenise_alike_here_and_in_the_official_script():
    for text in DECORATIONS + ["在北京，2008年 Beijing Games（3.5%）。"]:
        assert cmrc_segments(text) == _mixed_segmentation(text, rm_punc=True), text


@pytest.mark.parametrize("seed", [0, 1])
def test_cmrc_scores_equal_the_official_script(seed):
    golds, predictions = _cases(seed)
    ours = cmrc_scores(golds, predictions)
    official = _official(golds, predictions)
    assert ours["count"] == len(golds) >= 2
    assert ours["f1"] * 100 == pytest.approx(official["f1"], abs=1e-9)
    assert ours["exact_match"] * 100 == pytest.approx(official["em"], abs=1e-9)
    for gold, prediction in zip(golds, predictions, strict=True):
        exact, f1 = cmrc_answer_scores(gold, prediction)
        assert exact == _calc_em_score(gold, prediction), (gold, prediction)
        assert f1 == pytest.approx(_calc_f1_score(gold, prediction), abs=1e-12), (gold, prediction)
    # The longest common run, not SQuAD's bag of tokens: the two differ on these cases.
    assert ours["f1"] != pytest.approx(squad_scores(golds, predictions)["f1"], abs=1e-6)


def test_where_cmrc_differs_from_squad():
    # Reordered characters: SQuAD's bag of tokens finds them all, CMRC's run only two.
    assert cmrc_answer_scores(["北京上海"], "上海北京")[1] == 0.5
    assert squad_scores([["北京上海"]], ["上海北京"])["f1"] == 1.0
    # "……" in the script's list is two characters: a single "…" is not punctuation.
    assert cmrc_answer_scores(["北京"], "北京…") == (0.0, pytest.approx(0.8))
    assert cmrc_answer_scores(["北京"], "《北京》。") == (1.0, 1.0)
    # No answer (not in CMRC 2018): right only for an empty prediction, as SQuAD 2.0.
    assert cmrc_answer_scores([""], "") == (1.0, 1.0)
    assert cmrc_answer_scores([], "北京") == (0.0, 0.0)
    with pytest.raises(ValueError, match="one prediction per question"):
        cmrc_scores([["北京"]], [])
