"""`python -m albert_tf.predict` (`albert_tf.tasks.predictions`): every shipped model over a
file of its task, through its SavedModel; SQuAD's official v1.1 scoring of the QA
model's ``predictions.json``, re-implemented here from the script's definition; span QA's
``--n_best`` through the export's ``answers`` signature (a tiny SQuAD 2.0-style export:
ranked answers, null scores a client can threshold, ``nbest_predictions.json`` and
``null_odds.json``)."""

from __future__ import annotations

import collections
import json
import re
import string
from pathlib import Path

import pytest
from helpers.commands import run_command
from helpers.testing_utils import build_lock

from albert_tf.tasks.predictions import predict_file

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p for p in (REPO / "models" / "exported").iterdir() if p.is_dir())

PICO = (
    "BACKGROUND: Metformin is widely used. METHODS: We randomly assigned 120 adults with "
    "type 2 diabetes to metformin or placebo for 12 weeks. RESULTS: HbA1c fell."
)
PICO_2 = (
    "Forty-two children aged 6 to 12 years with asthma were enrolled in this trial of "
    "inhaled budesonide. Lung function improved."
)
#: Labelled items per (task, language), in the formats the task readers read.
EXAMPLES = {
    ("multiple_choice", "en"): [
        {
            "id": "mc-en-1",
            "context": "It started to rain hard, so she opened her umbrella.",
            "question": "What did she open?",
            "options": ["her umbrella", "a window", "the door", "a book"],
            "label": 0,
        }
    ],
    ("multiple_choice", "zh"): [
        {
            "id": "mc-zh-1",
            "context": "外面下起了大雨。",
            "question": "接下来最可能发生什么？",
            "options": ["他打开了雨伞。", "他去游泳了。", "太阳很晒。", "他买了冰淇淋。"],
            "label": 0,
        }
    ],
    ("classification", "zh"): [
        {"id": "r1", "text": "质量很好，非常满意，下次还会再买。", "label": 1},
        {"id": "r2", "text": "太差了，用了两天就坏了，退货。", "label": 0},
    ],
    ("tagging", "zh"): [
        {
            "id": "n1",
            "text": "江泽民主席在北京会见了美国客人。",
            "entities": [
                {"start": 0, "end": 3, "label": "PER"},
                {"start": 6, "end": 8, "label": "LOC"},
                {"start": 11, "end": 13, "label": "LOC"},
            ],
        }
    ],
    ("span_qa", "en"): [
        {
            "id": "q1",
            "question": "Who were the participants?",
            "context": PICO,
            "answers": [
                {"text": "120 adults with type 2 diabetes", "answer_start": PICO.index("120")}
            ],
        },
        {
            "id": "q2",
            "question": "Who took part in this study?",
            "context": PICO_2,
            "answers": [
                {"text": "Forty-two children aged 6 to 12 years with asthma", "answer_start": 0}
            ],
        },
    ],
}


def _metadata(model: Path) -> dict:
    return json.loads(next(model.glob("*/assets.extra/albert_tf.json")).read_text())


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def test_examples_are_what_they_say():
    assert PICO[PICO.index("120") :].startswith("120 adults with type 2 diabetes to")
    (ner,) = EXAMPLES[("tagging", "zh")]
    assert [ner["text"][e["start"] : e["end"]] for e in ner["entities"]] == [
        "江泽民",
        "北京",
        "美国",
    ]


@pytest.mark.parametrize("model", SHIPPED, ids=[p.name for p in SHIPPED])
def test_predict_runs_on_each_shipped_model(model, tmp_path):
    metadata = _metadata(model)
    key = (metadata["task"], metadata["language"])
    assert key in EXAMPLES, f"add example items for a shipped {key} model"
    items = EXAMPLES[key]
    output = tmp_path / "out" / "predictions.jsonl"
    summary = predict_file(
        str(model), [str(_write(tmp_path / "in.jsonl", items))], str(output), progress=False
    )
    rows = [json.loads(line) for line in output.read_text("utf-8").splitlines()]
    assert [row["id"] for row in rows] == [item["id"] for item in items]
    assert summary["items"] == len(items) and summary["items_per_second"] > 0
    scores = json.loads((output.parent / "scores.json").read_text())
    assert scores == summary["scores"] and scores["count"] == len(items)
    metric = {"span_qa": "f1", "tagging": "f1"}.get(metadata["task"], "accuracy")
    assert 0.0 <= scores[metric] <= 1.0


def test_unlabelled_items_are_predicted_and_not_scored(tmp_path):
    model = next(m for m in SHIPPED if _metadata(m)["task"] == "multiple_choice")
    items = [
        {k: v for k, v in item.items() if k != "label"}
        for item in EXAMPLES[("multiple_choice", _metadata(model)["language"])]
    ]
    output = tmp_path / "p.jsonl"
    summary = predict_file(
        str(model), [str(_write(tmp_path / "in.jsonl", items))], str(output), progress=False
    )
    assert "scores" not in summary and not (tmp_path / "scores.json").exists()
    (row,) = [json.loads(line) for line in output.read_text("utf-8").splitlines()]
    assert row["answer"] in items[0]["options"] and abs(sum(row["probabilities"]) - 1) < 1e-5


def test_a_folder_that_is_no_model_is_refused(tmp_path):
    (tmp_path / "in.jsonl").write_text("{}\n")
    with pytest.raises(FileNotFoundError, match="neither a SavedModel"):
        predict_file(str(tmp_path), [str(tmp_path / "in.jsonl")], str(tmp_path / "o.jsonl"))


# -- SQuAD v1.1's official evaluation, from the script's definition --------------------------


def _official_normalize(s: str) -> str:
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _official_f1(prediction: str, truth: str) -> float:
    p, t = _official_normalize(prediction).split(), _official_normalize(truth).split()
    common = collections.Counter(p) & collections.Counter(t)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


def _official_v11(dataset: list, predictions: dict) -> dict:
    f1 = exact = total = 0.0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                truths = [a["text"] for a in qa["answers"]]
                prediction = predictions[qa["id"]]
                exact += max(
                    float(_official_normalize(prediction) == _official_normalize(t)) for t in truths
                )
                f1 += max(_official_f1(prediction, t) for t in truths)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def test_qa_predictions_json_scores_as_squads_official_script(tmp_path):
    model = next((m for m in SHIPPED if _metadata(m)["task"] == "span_qa"), None)
    if model is None:
        pytest.skip("no shipped span QA model")
    paragraphs = [
        {
            "context": item["context"],
            "qas": [{"id": item["id"], "question": item["question"], "answers": item["answers"]}],
        }
        for item in EXAMPLES[("span_qa", "en")]
    ]
    dataset = [{"title": "pico", "paragraphs": paragraphs}]
    dev = tmp_path / "dev-v1.1.json"
    dev.write_text(json.dumps({"version": "1.1", "data": dataset}))
    output = tmp_path / "out" / "answers.jsonl"
    result = run_command(
        "predict", f"--model={model}", f"--input={dev}", f"--output={output}", "--noprogress"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "items/s" in result.stdout
    predictions = json.loads((output.parent / "predictions.json").read_text())
    assert sorted(predictions) == ["q1", "q2"]
    official = _official_v11(dataset, predictions)
    ours = json.loads((output.parent / "scores.json").read_text())
    assert ours["exact_match"] * 100 == pytest.approx(official["exact_match"], abs=1e-9)
    assert ours["f1"] * 100 == pytest.approx(official["f1"], abs=1e-9)


# -- span QA's n best answers and "no answer" per request ------------------------------------

QA_ZH = [
    ("王明住哪？", "王明住在北京。李华住在上海。张国平和刘伟是朋友。"),
    ("谁喜欢广州？", "今天上海下雨。陈芳喜欢广州。"),
    ("刘伟住哪？", "北京很大。王明和李华是朋友。刘伟住在成都。"),
    ("谁住在南京？", "成都下雨。"),
]


@pytest.fixture(scope="module")
def squad2_reader(shared_builds):
    from helpers.span_task_helpers import squad2_reader_models

    with build_lock(shared_builds, "squad2_reader_models"):
        return squad2_reader_models(shared_builds)


def test_qa_n_best_answers_and_a_client_side_no_answer_threshold(squad2_reader, tmp_path):
    items = [{"id": f"q{i}", "question": q, "context": c} for i, (q, c) in enumerate(QA_ZH)]
    source = _write(tmp_path / "in.jsonl", items)
    model = str(squad2_reader["export"])
    one = tmp_path / "one" / "answers.jsonl"
    predict_file(model, [str(source)], str(one), progress=False)
    ranked = tmp_path / "ranked" / "answers.jsonl"
    summary = predict_file(model, [str(source)], str(ranked), n_best=3, progress=False)
    rows = [json.loads(line) for line in ranked.read_text("utf-8").splitlines()]
    threshold = _metadata(squad2_reader["export"])["no_answer_threshold"]
    assert threshold == -4.5
    for row, item in zip(rows, items, strict=True):
        spans = row["n_best"]
        # Asked for 3, got 3 different spans, best first, each its context's characters.
        assert len(spans) == 3 and len({(s["start"], s["end"]) for s in spans}) == 3
        assert [s["score"] for s in spans] == sorted((s["score"] for s in spans), reverse=True)
        assert all(s["text"] == item["context"][s["start"] : s["end"]] for s in spans)
        # The export's threshold, applied by the client, gives serving_default's answer.
        margin = row["null_score"] - spans[0]["score"]
        assert (row["start"] >= 0) == (margin <= threshold + 1e-6)
    # The same rows (answer, offsets, score) as serving_default's, to the bit.
    single = [json.loads(line) for line in one.read_text("utf-8").splitlines()]
    assert [{k: r[k] for k in single[0]} for r in rows] == single
    answered = [row for row in rows if row["start"] >= 0]
    assert 0 < len(answered) < len(rows)  # the threshold decides, both ways

    def client(row: dict, threshold: float) -> str:  # what a client of the signature does
        best = row["n_best"][0]
        return best["text"] if row["null_score"] - best["score"] <= threshold else ""

    # A client's own threshold, just below an answered question's margin, leaves it
    # unanswered; at the margin it is answered as the server answered it.
    for row in answered:
        margin = row["null_score"] - row["n_best"][0]["score"]
        assert client(row, margin) == row["answer"] != ""
        assert client(row, margin - 0.01) == ""
    # The files SQuAD 2.0's tooling reads: run_squad's n-best lists (its null entry
    # "" included) and the null odds evaluate-v2.0.py's --na-prob-file takes.
    folder = ranked.parent
    assert summary["files"] == [
        str(ranked),
        *(str(folder / name) for name in ("predictions.json", "nbest_predictions.json")),
        str(folder / "null_odds.json"),
    ]
    nbest = json.loads((folder / "nbest_predictions.json").read_text("utf-8"))
    odds = json.loads((folder / "null_odds.json").read_text())
    predictions = json.loads((folder / "predictions.json").read_text("utf-8"))
    for row in rows:
        entries = nbest[row["id"]]
        assert [e["text"] for e in entries if e["start"] >= 0] == [s["text"] for s in row["n_best"]]
        assert [e["text"] for e in entries if e["start"] < 0] == [""]
        assert sum(e["probability"] for e in entries) == pytest.approx(1.0)
        probabilities = [e["probability"] for e in entries]
        assert probabilities == sorted(probabilities, reverse=True)
        assert odds[row["id"]] == pytest.approx(row["null_score"] - row["n_best"][0]["score"])
        assert predictions[row["id"]] == row["answer"]
