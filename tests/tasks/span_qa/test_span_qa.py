"""Span QA end to end: the model learns to answer (and to leave unanswerable questions
unanswered, with a threshold chosen on dev), the raw-text SavedModel gives the trainer's
answers in a fresh process that imports only tensorflow and tensorflow_text, across
windows of long contexts, refusing hostile requests, and its ``answers`` signature the
trainer's n best with the null score a client thresholds; the finetune command does it
all from files."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.serving_scripts import OP_SCAN
from helpers.testing_utils import LEARNS, tiny_config

from albert_tf.checkpoints.saved_format import load_task_model
from albert_tf.serving import export_saved_model
from albert_tf.tasks.span_qa.data import Answer, QAExample
from albert_tf.tasks.span_qa.model import AlbertSpanQA
from albert_tf.tasks.span_qa.trainer import SpanQATrainer
from albert_tf.tokenizers import WordPieceTokenizer, load_tokenizer

PEOPLE = ["王明", "李华", "张国平", "刘伟", "陈芳"]
PLACES = ["北京", "上海", "广州", "南京", "成都"]
FILLERS = ["{PER}喜欢{LOC}。", "今天{LOC}下雨。", "{PER}和{PER}是朋友。", "{LOC}很大。"]
MAX_SEQ_LENGTH = 32  # 27 context pieces after a 2-piece question: long contexts need windows


def _questions(n: int, seed: int, impossible: float = 0.25) -> list[QAExample]:
    """ "Where does X live?" over 2–6 sentences; the one that says it ("X住在Y。") sits
    anywhere among sentences naming other people and places, or is missing."""
    rng = random.Random(seed)
    items = []
    for i in range(n):
        person = rng.choice(PEOPLE)
        sentences = [
            rng.choice(FILLERS).replace("{PER}", rng.choice(PEOPLE), 1)
            .replace("{PER}", rng.choice(PEOPLE)).replace("{LOC}", rng.choice(PLACES))
            for _ in range(rng.randint(1, 5))
        ]  # fmt: skip
        place = rng.choice(PLACES)
        answerable = rng.random() >= impossible
        if answerable:
            sentences.insert(rng.randint(0, len(sentences)), f"{person}住在{place}。")
        context = "".join(sentences)
        answers = ()
        if answerable:
            start = context.index(f"{person}住在") + len(person) + 2
            answers = (Answer(start, start + len(place), place),)
        items.append(
            QAExample(f"{seed}-{i}", f"{person}住哪？", context, answers, not answerable, "zh")
        )
    return items


@pytest.fixture(scope="module")
def tokenizer(mc_models):
    return load_tokenizer(mc_models["zh"]["model"] / "tokenizer")


def _model(tokenizer):
    keras.utils.set_random_seed(0)
    config = tiny_config(vocab_size=tokenizer.vocabulary_size, **LEARNS)
    return AlbertSpanQA.from_albert_config(config)


def _trainer(model, tokenizer, tmp_path, **kwargs):
    settings = dict(
        output_dir=tmp_path / "run",
        max_seq_length=MAX_SEQ_LENGTH,
        max_query_length=8,
        doc_stride=12,
        max_answer_length=4,
        batch_size=32,
        learning_rate=2e-3,
        num_train_steps=600,
        eval_every=200,
        patience=0,
        progress=False,
    )
    return SpanQATrainer(model, tokenizer, **(settings | kwargs))


@pytest.fixture(scope="module")
def reader(tokenizer, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("span_qa")
    trainer = _trainer(_model(tokenizer), tokenizer, tmp_path)
    result = trainer.fit(_questions(600, 0), _questions(100, 1))
    return trainer, result, tmp_path


def test_reader_learns_to_answer_and_to_abstain(reader):
    trainer, result, _ = reader
    assert result["metric"] == "f1"
    with open(f"{result['best_dir']}/finetune.json") as f:
        saved = json.load(f)
    assert saved["task"] == "span_qa" and saved["doc_stride"] == 12
    # Dev had unanswerable questions: a threshold was chosen, saved and kept after fit.
    assert isinstance(saved["no_answer_threshold"], float)
    assert trainer.no_answer_threshold == saved["no_answer_threshold"]
    test = _questions(120, 2)
    scores = trainer.evaluate(test)
    assert scores["f1"] >= 0.9, result["history"]
    assert scores["has_answer_f1"] >= 0.85 and scores["no_answer_f1"] >= 0.85, scores
    assert scores["count"] == 120
    # Chinese questions: CMRC 2018's own scores beside SQuAD's.
    assert scores["cmrc_f1"] >= 0.9 and 0 <= scores["cmrc_exact_match"] <= 1
    assert "cmrc_count" not in scores  # every question is Chinese
    # Answers in later windows were found: the key sentence sat past the first window.
    encoded = trainer.encode(test)
    late = [i for i, e in enumerate(encoded)
            if not any(w["labels"][1] for w in e["windows"][:1]) and test[i].answers]  # fmt: skip
    assert len(late) >= 10
    predicted = trainer.predict([test[i] for i in late])
    right = sum(p[0].text == test[i].answers[0].text for p, i in zip(predicted, late, strict=True))
    assert right >= 0.7 * len(late)  # (a broken window offset would find none)


_SERVE = (
    OP_SCAN
    + r"""
model = tf.saved_model.load(spec["path"])
serve = model.signatures["serving_default"]
def run(questions, contexts):
    out = serve(question=tf.constant(questions, tf.string),
                context=tf.constant(contexts, tf.string))
    return {k: [x.decode() for x in v.numpy()] if v.dtype == tf.string else v.numpy().tolist()
            for k, v in out.items()}
report["answer"] = run(spec["questions"], spec["contexts"])
empty = tf.constant([], tf.string)
report["empty"] = {k: list(v.shape) for k, v in serve(question=empty, context=empty).items()}
report["blank"] = run(["", "王明住哪？"], ["", ""])
report["bad_utf8"] = run(["王明住哪？"], [b"\xff\xfe" + "王明住在北京。".encode()])
ranked = model.signatures["answers"]
def run_ranked(questions, contexts, top_k):
    out = ranked(question=tf.constant(questions, tf.string),
                 context=tf.constant(contexts, tf.string), top_k=tf.constant(top_k, tf.int32))
    return {k: [[x.decode() for x in row] for row in v.numpy()] if v.dtype == tf.string
            else v.numpy().tolist() for k, v in out.items()}
report["ranked"] = run_ranked(spec["questions"], spec["contexts"], 3)
report["ranked_empty"] = {k: list(v.shape) for k, v in
                          ranked(question=empty, context=empty, top_k=tf.constant(2)).items()}
report["ranked_blank"] = run_ranked(["王明住哪？"], [""], 2)
def error(questions, contexts):
    try:
        run(questions, contexts)
        return "no error"
    except tf.errors.InvalidArgumentError as err:
        return err.message
report["too_long"] = error(["谁？"], ["北" * 50001])
report["long_question"] = error(["谁" * 2001], ["北京"])
report["mismatch"] = error(["谁？", "谁？"], ["北京"])
def ranked_error(top_k):
    try:
        run_ranked(["谁？"], ["北京"], top_k)
        return "no error"
    except tf.errors.InvalidArgumentError as err:
        return err.message
report["top_k_0"], report["top_k_101"] = ranked_error(0), ranked_error(101)
report["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
print(json.dumps(report))
"""
)


def test_saved_model_answers_as_the_trainer_in_a_fresh_process(reader, tmp_path):
    trainer, result, _ = reader
    path = export_saved_model(result["best_dir"], tmp_path / "exported" / "qa", version=1)
    metadata = json.loads((tmp_path / "exported/qa/1/assets.extra/albert_tf.json").read_text())
    assert metadata["task"] == "span_qa" and metadata["doc_stride"] == 12
    assert metadata["limits"] == {"max_context_chars": 50000, "max_question_chars": 2000}
    assert metadata["no_answer_threshold"] == trainer.no_answer_threshold
    items = _questions(40, 3)
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "path": path,
                "questions": [x.question for x in items],
                "contexts": [x.context for x in items],
            }
        )
    )
    run = subprocess.run(
        [sys.executable, "-c", _SERVE, str(spec)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # albert_tf must not be importable by accident
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["albert_tf_imported"] is False and report["unregistered"] == []
    assert report["tf_text"]  # the in-graph tokenizer's ops
    best = _trainer(
        load_task_model(result["best_dir"], "span_qa"), trainer.tokenizer, tmp_path,
        no_answer_threshold=trainer.no_answer_threshold,
    )  # fmt: skip
    want = [p[0] for p in best.predict(items)]
    got = report["answer"]
    assert got["answer"] == [p.text for p in want]
    assert got["start"] == [p.start for p in want] and got["end"] == [p.end for p in want]
    np.testing.assert_allclose(got["score"], [p.probability for p in want], atol=1e-4)
    assert sum(s < 0 for s in got["start"]) >= 5  # some left unanswered
    for row, item in enumerate(items):
        if got["start"][row] >= 0:
            assert item.context[got["start"][row] : got["end"][row]] == got["answer"][row]
    assert report["empty"] == {"answer": [0], "start": [0], "end": [0], "score": [0]}
    assert report["blank"]["start"] == [-1, -1] and report["blank"]["answer"] == ["", ""]
    # Empty contexts are never answered; each invalid UTF-8 byte reads as one
    # replacement character, which the offsets count: the trainer on that text agrees.
    edge = best.predict(
        [
            QAExample("b1", "", "", ()),
            QAExample("b2", "王明住哪？", "", ()),
            QAExample("u", "王明住哪？", "\ufffd\ufffd王明住在北京。", ()),
        ]
    )
    for key, row, want_row in (("blank", 0, 0), ("blank", 1, 1), ("bad_utf8", 0, 2)):
        want = edge[want_row][0]
        got_row = {k: v[row] for k, v in report[key].items()}
        assert (got_row["answer"], got_row["start"], got_row["end"]) == (
            want.text,
            want.start,
            want.end,
        ), key
        np.testing.assert_allclose(got_row["score"], want.probability, atol=1e-4)
    assert edge[0][0].start == edge[1][0].start == -1
    assert "context length exceeds the serving limit of 50,000" in report["too_long"]
    assert "question length exceeds the serving limit of 2,000" in report["long_question"]
    assert "same batch size" in report["mismatch"]
    # `answers`: the trainer's 3 best spans, a null score and the export's threshold,
    # with which a client makes serving_default's choice itself.
    ranked = report["ranked"]
    assert ranked["no_answer_threshold"] == pytest.approx(trainer.no_answer_threshold)
    n_best = best.predict(items)
    for row, (item, predictions) in enumerate(zip(items, n_best, strict=True)):
        spans = [p for p in predictions if p.start >= 0][:3]
        assert len(spans) == 3 and len({(p.start, p.end) for p in spans}) == 3
        assert ranked["starts"][row] == [p.start for p in spans]
        assert ranked["ends"][row] == [p.end for p in spans]
        assert ranked["answers"][row] == [item.context[p.start : p.end] for p in spans]
        np.testing.assert_allclose(ranked["scores"][row], [p.score for p in spans], atol=1e-4)
        np.testing.assert_allclose(
            ranked["probabilities"][row], [p.probability for p in spans], atol=1e-4
        )
        margin = ranked["null_score"][row] - ranked["scores"][row][0]
        answered = margin <= ranked["no_answer_threshold"]
        assert (got["start"][row] >= 0) == answered
        if answered:
            assert got["answer"][row] == ranked["answers"][row][0]
        else:
            assert predictions[0].start == -1
            np.testing.assert_allclose(predictions[0].score, ranked["null_score"][row], atol=1e-4)
    assert report["ranked_empty"] == {
        **{k: [0, 2] for k in ("answers", "starts", "ends", "scores", "probabilities")},
        "null_score": [0], "null_probability": [0], "no_answer_threshold": [],
    }  # fmt: skip
    blank = report["ranked_blank"]
    assert blank["starts"] == [[-1, -1]] and blank["answers"] == [["", ""]]
    assert blank["scores"] == [[0.0, 0.0]]
    for key in ("top_k_0", "top_k_101"):
        assert "top_k must be 1 to 100 answers per question" in report[key], report[key]


def test_finetune_command_answers_from_files(tokenizer, mc_models, tmp_path):
    def squad(items):
        return {"version": "v2.0", "data": [{"title": "t", "paragraphs": [
            {"context": x.context, "qas": [{
                "id": x.id, "question": x.question, "is_impossible": x.impossible,
                "answers": [{"text": a.text, "answer_start": a.start} for a in x.answers]}]}
            for x in items]}]}  # fmt: skip

    train = squad(_questions(120, 4))
    train["data"][0]["paragraphs"][0]["qas"][0]["answers"] = [{"text": "nope", "answer_start": 0}]
    (tmp_path / "train.json").write_text(json.dumps(train, ensure_ascii=False))
    (tmp_path / "dev.json").write_text(json.dumps(squad(_questions(30, 5)), ensure_ascii=False))
    (tmp_path / "test.json").write_text(json.dumps(squad(_questions(30, 6)), ensure_ascii=False))
    config = tmp_path / "config.json"
    _model(tokenizer).config.to_hf_json(config)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.finetune",
            "--task=span_qa",
            f"--init_config={config}",
            f"--tokenizer_dir={mc_models['zh']['model'] / 'tokenizer'}",
            f"--train_files={tmp_path / 'train.json'}",
            f"--dev_files={tmp_path / 'dev.json'}",
            f"--test_files={tmp_path / 'test.json'}",
            f"--output_dir={tmp_path / 'run'}",
            f"--export_dir={tmp_path / 'exported'}",
            "--max_seq_length=32",
            "--max_query_length=8",
            "--doc_stride=12",
            "--max_answer_length=4",
            "--num_train_steps=4",
            "--eval_every=2",
            "--batch_size=8",
            "--progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert (
        "skipped 1 question(s) and dropped 1 answer(s) of bad input: "
        "{'answer_text_mismatch': 1, 'no_valid_answer': 1}"
    ) in run.stdout
    assert "train: 119 questions on" in run.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["metric"] == "f1" and summary["steps"] == 4
    assert {"exact_match", "f1", "has_answer_f1", "no_answer_f1"} <= set(summary["test"])
    assert "test_people_sentence" not in summary  # an English baseline
    saved = json.loads((tmp_path / "run" / "best" / "finetune.json").read_text())
    # The test was scored with the best checkpoint's threshold, not one chosen on test.
    assert summary["test"]["no_answer_threshold"] == saved["no_answer_threshold"]
    card = json.loads(
        (tmp_path / "exported" / "1" / "assets.extra" / "model_card.json").read_text()
    )
    assert card["task"] == "extractive question answering"
    assert card["held_out"]["f1"] == summary["test"]["f1"]


def test_refused_input_is_named(tokenizer, mc_models, tmp_path):
    vocab = mc_models["zh"]["model"] / "tokenizer" / "vocab.txt"
    cased = WordPieceTokenizer(vocab, lower_case=False)
    with pytest.raises(ValueError, match="span QA needs each piece's characters"):
        _trainer(_model(cased), cased, tmp_path)
    trainer = _trainer(_model(tokenizer), tokenizer, tmp_path)
    unlabelled = [QAExample("u", "谁？", "王明住在北京。", (), labelled=False)]
    with pytest.raises(ValueError, match="evaluate\\(\\) needs answered questions"):
        trainer.evaluate(unlabelled)
    assert len(trainer.predict(unlabelled)[0]) >= 1  # predict() answers them
    with pytest.raises(ValueError, match="max_answer_length .* must be at least 1"):
        _trainer(_model(tokenizer), tokenizer, tmp_path, max_answer_length=0)


def test_reader_trains_with_xla(tokenizer, tmp_path):
    trainer = _trainer(
        _model(tokenizer), tokenizer, tmp_path, jit_compile=True, num_train_steps=2, eval_every=2
    )
    result = trainer.fit(_questions(16, 6), _questions(8, 7))
    assert result["steps"] == 2 and np.isfinite(result["history"][-1]["train_loss"])
    assert 0.0 <= result["history"][-1]["dev_f1"] <= 1.0


def test_ties_break_alike_in_the_trainer_and_the_saved_model(tokenizer, tmp_path):
    # A head of zeros scores every span and every window the same: both must pick the
    # earliest window, then the earliest start and end, and the same "no answer".
    from albert_tf.tasks.span_qa.preprocessing import Windowing
    from albert_tf.tasks.span_qa.serving import SpanQAServingModule

    model = _model(tokenizer)
    for weight in model.span_head.weights:
        weight.assign(np.zeros(weight.shape, "float32"))
    items = _questions(12, 8)
    answered = {}
    for threshold in (None, 0.0, -1.0):
        trainer = _trainer(model, tokenizer, tmp_path, no_answer_threshold=threshold)
        want = [p[0] for p in trainer.predict(items)]
        module = SpanQAServingModule(
            model, tokenizer, Windowing(MAX_SEQ_LENGTH, 8, 12), 4, threshold
        )
        got = module.serving_default(
            tf.constant([x.question for x in items]), tf.constant([x.context for x in items])
        )
        assert got["start"].numpy().tolist() == [p.start for p in want], threshold
        assert got["end"].numpy().tolist() == [p.end for p in want]
        np.testing.assert_allclose(got["score"], [p.probability for p in want], atol=1e-6)
        answered[threshold] = [p.start >= 0 for p in want]
    # Every margin is exactly 0: answered at threshold 0 (margin <= threshold), not at -1;
    # the earliest span is the context's first word.
    assert all(answered[None]) and all(answered[0.0]) and not any(answered[-1.0])
    assert all(p.start == 0 for p in _trainer(model, tokenizer, tmp_path).predict(items[:3])[0][:1])


def test_fit_answers_always_when_dev_has_no_impossible_question(tokenizer, tmp_path):
    trainer = _trainer(
        _model(tokenizer), tokenizer, tmp_path, no_answer_threshold=1.5,
        num_train_steps=2, eval_every=2,
    )  # fmt: skip
    trainer.fit(_questions(16, 9, impossible=0.0), _questions(8, 10, impossible=0.0))
    assert trainer.no_answer_threshold is None
    with open(tmp_path / "run" / "best" / "finetune.json") as f:
        assert json.load(f)["no_answer_threshold"] is None
