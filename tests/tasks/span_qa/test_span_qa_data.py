"""Span QA data: SQuAD-layout (SQuAD 1.1/2.0, CMRC 2018, DRCD) and JSON Lines readers
with bad input counted, never fatal; windows over long contexts as the official
``run_squad`` cuts them; training labels on the pieces that hold the answer."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import tensorflow as tf
from helpers.paths import SHARED_DATA

from albert_tf.tasks.span_qa.data import Answer, QAExample, read_span_qa
from albert_tf.tasks.span_qa.preprocessing import Windowing, encode_span_qa, pack_qa
from albert_tf.tokenizers import load_tokenizer

PICO = SHARED_DATA / "qa" / "en_pico_population.jsonl.gz"


def _squad(paragraphs: list[dict]) -> dict:
    return {"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]}


def test_squad_v2_layout_with_bad_answers_counted(tmp_path):
    context = "Denver Broncos won Super Bowl 50 in 2016."
    data = _squad(
        [
            {
                "context": context,
                "qas": [
                    {"id": "a", "question": "Who won?",
                     "answers": [{"text": "Denver Broncos", "answer_start": 0},
                                 {"text": "Denver Broncos", "answer_start": 0},
                                 {"text": "Broncos", "answer_start": 7}]},
                    {"id": "b", "question": "Who lost?", "answers": [], "is_impossible": True,
                     "plausible_answers": [{"text": "Denver", "answer_start": 0}]},
                    {"id": "c", "question": "When?",
                     "answers": [{"text": "2016", "answer_start": 3},
                                 {"text": "2016", "answer_start": 36}]},
                    {"id": "d", "question": "Where?",
                     "answers": [{"text": "x", "answer_start": 99}]},
                    {"id": "e", "question": "  ", "answers": []},
                    {"id": "f", "answers": []},
                    "not a question",
                ],
            },
            {"context": 7, "qas": [{"id": "g", "question": "Why?", "answers": []}]},
        ]
    )  # fmt: skip
    path = tmp_path / "dev-v2.0.json"
    path.write_text(json.dumps(data))
    examples, skipped = read_span_qa([str(path)])
    assert [(e.id, e.answers, e.impossible) for e in examples] == [
        ("a", (Answer(0, 14, "Denver Broncos"), Answer(7, 14, "Broncos")), False),
        ("b", (), True),
        ("c", (Answer(36, 40, "2016"),), False),
    ]
    assert all(e.labelled and e.lang == "en" for e in examples)
    assert dict(skipped) == {
        "answer_text_mismatch": 1,
        "bad_answer": 1,
        "no_valid_answer": 1,
        "empty_question": 1,
        "missing_question": 1,
        "invalid_json": 1,
        "missing_context": 1,
    }


def test_cmrc_and_drcd_files_read_as_chinese(tmp_path):
    # CMRC 2018 and DRCD ship SQuAD's layout; their answers index characters.
    cmrc = _squad(
        [
            {
                "context": "《战国无双3》是由光荣和ω-force开发的战国无双系列的正统第三续作。",
                "qas": [
                    {
                        "id": "TRAIN_186_QUERY_0",
                        "question": "《战国无双3》是由哪两个公司合作开发的？",
                        "answers": [{"text": "光荣和ω-force", "answer_start": 9}],
                    }
                ],
            }
        ]
    )
    drcd = _squad(
        [
            {
                "context": "蘋果公司總部位於加州庫比蒂諾。",
                "qas": [
                    {
                        "id": "1-1",
                        "question": "總部在哪裡？",
                        "answers": [{"id": "1", "text": "加州庫比蒂諾", "answer_start": 8}],
                    }
                ],
            }
        ]
    )
    # fmt: skip
    for name, data in (("cmrc2018_train.json", cmrc), ("DRCD_dev.json", drcd)):
        (tmp_path / name).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    examples, skipped = read_span_qa([str(tmp_path)])
    assert not skipped
    assert {e.id: (e.answers[0].text, e.lang) for e in examples} == {
        "TRAIN_186_QUERY_0": ("光荣和ω-force", "zh"),
        "1-1": ("加州庫比蒂諾", "zh"),
    }


def test_json_lines_unlabelled_files_and_refusals(tmp_path):
    rows = [
        {"context": "ALBERT shares layers.", "question": "What is shared?"},
        {"id": "x", "context": "Cats sleep.", "question": "Who sleeps?"},
    ]
    unlabelled = tmp_path / "questions.jsonl"
    unlabelled.write_text("\n".join(json.dumps(r) for r in rows) + "\n{bad json\n")
    examples, skipped = read_span_qa([str(unlabelled)])
    assert [(e.id, e.labelled, e.answers) for e in examples] == [
        ("questions.jsonl:1", False, ()),
        ("x", False, ()),
    ]
    assert dict(skipped) == {"invalid_json": 1}
    # A question without answers in a file whose others have them is skipped.
    rows[1]["answers"] = [{"text": "Cats", "answer_start": 0}]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join(json.dumps(r) for r in rows))
    examples, skipped = read_span_qa([str(mixed)])
    assert [e.id for e in examples] == ["x"] and dict(skipped) == {"missing_answers": 1}
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(ValueError, match="empty.jsonl: the file is empty"):
        read_span_qa([str(tmp_path / "empty.jsonl")])
    (tmp_path / "table.txt").write_text("question\tcontext\n")
    with pytest.raises(ValueError, match="cannot recognise the format.*SQuAD layout"):
        read_span_qa([str(tmp_path / "table.txt")])
    with pytest.raises(ValueError, match="no readable questions"):
        (tmp_path / "bad.jsonl").write_text('{"context": "a"}\n')
        read_span_qa([str(tmp_path / "bad.jsonl")])
    with pytest.raises(ValueError, match="matched no file|no such|not found|No file"):
        read_span_qa([str(tmp_path / "missing.json")])


def test_pico_file_reads_whole():
    if not PICO.exists():
        pytest.skip(f"{PICO} is not here")
    examples, skipped = read_span_qa([str(PICO)])
    with gzip.open(PICO, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert not skipped and len(examples) == len(rows) == 397
    for example, row in zip(examples, rows, strict=True):
        assert example.id == row["id"] and example.lang == "en"
        spans = {(a["answer_start"], a["answer_start"] + len(a["text"])) for a in row["answers"]}
        assert {(a.start, a.end) for a in example.answers} == spans
        assert all(example.context[a.start : a.end] == a.text for a in example.answers)


@pytest.fixture(scope="module")
def tokenizer(mc_models):
    return load_tokenizer(mc_models["zh"]["model"] / "tokenizer")


def _bert_doc_spans(num_pieces: int, max_tokens: int, doc_stride: int) -> list[tuple[int, int]]:
    """google-research/bert's run_squad loop, as written there: (start, length) windows."""
    spans, start = [], 0
    while start < num_pieces:
        length = min(num_pieces - start, max_tokens)
        spans.append((start, length))
        if start + length == num_pieces:
            break
        start += min(length, doc_stride)
    return spans


@pytest.mark.parametrize("doc_stride", [1, 5, 16, 100])
def test_windows_are_run_squads(tokenizer, doc_stride):
    questions = [
        "王明在哪里工作？",
        "What does ALBERT share with every layer of its encoder?",
        "谁",
    ]
    contexts = ["王明在北京工作，李华在上海读书。" * 4, "ALBERT shares one layer. " * 6, "短。"]
    windowing = Windowing(40, max_query_length=8, doc_stride=doc_stride)
    packed = pack_qa(tf.constant(questions), tf.constant(contexts), tokenizer, windowing)
    question_ids = tokenizer.tokenize(tf.constant(questions)).to_list()
    context_ids = tokenizer.tokenize(tf.constant(contexts)).to_list()
    example = packed["window_example"].numpy()
    token_ids = packed["token_ids"].numpy()
    segments = packed["segment_ids"].numpy()
    lengths = packed["padding_mask"].numpy().sum(-1)
    for b, (q, c) in enumerate(zip(question_ids, context_ids, strict=True)):
        q = q[:8]
        want = _bert_doc_spans(len(c), 40 - 3 - len(q), doc_stride)
        rows = np.flatnonzero(example == b)
        got = list(
            zip(
                packed["window_start"].numpy()[rows],
                packed["window_length"].numpy()[rows],
                strict=True,
            )
        )
        assert got == want
        for row, (start, length) in zip(rows, want, strict=True):
            n = lengths[row]
            expected = [
                tokenizer.cls_id,
                *q,
                tokenizer.sep_id,
                *c[start : start + length],
                tokenizer.sep_id,
            ]
            assert token_ids[row, :n].tolist() == expected
            assert segments[row, :n].tolist() == [0] * (len(q) + 2) + [1] * (length + 1)
            assert packed["context_offset"].numpy()[row] == len(q) + 2
        assert len(want) > 1 or b == 2  # the long contexts need several windows


def _labelled_span(encoded: dict, window: dict) -> tuple[int, int]:
    """The characters of a window's labelled first..last piece in its context."""
    first, last = window["labels"]
    pieces = window["window_start"] + np.arange(first, last + 1) - window["context_offset"]
    return encoded["piece_starts"][pieces[0]], encoded["piece_ends"][pieces[-1]]


def test_labels_point_at_the_answers_pieces(tokenizer):
    context = "昨天王明说，北京的大熊猫人人都想摸一下。ALBERT shares layers across the encoder."
    answers = {"大熊猫": "zh", "shares layers": "en"}
    items = [
        QAExample(text, "问题？", context,
                  (Answer(context.index(text), context.index(text) + len(text), text),))
        for text in answers
    ]  # fmt: skip
    windowing = Windowing(24, max_query_length=4, doc_stride=6)
    for item, encoded in zip(items, encode_span_qa(items, tokenizer, windowing), strict=True):
        holding = [w for w in encoded["windows"] if w["labels"][1] > 0]
        assert len(holding) >= 1 and len(encoded["windows"]) > len(holding)
        for window in holding:
            assert context[slice(*_labelled_span(encoded, window))] == item.answers[0].text
            assert window["segment_ids"][window["labels"][0]] == 1
        # Windows without the answer point at [CLS].
        assert all(
            w["labels"].tolist() == [0, 0] for w in encoded["windows"] if w["labels"][1] == 0
        )


def test_sentencepiece_labels_point_at_the_answers_pieces(mc_models):
    # English ALBERT's SentencePiece: the labelled pieces' spans are the answer's
    # characters exactly, not the space before its first word.
    english = load_tokenizer(mc_models["en"]["model"] / "tokenizer")
    context = "We enrolled  120 Adults with type 2 diabetes, aged 40–65, in Zürich’s clinics."
    answers = ["120 Adults with type 2 diabetes", "aged 40–65", "Zürich"]
    items = [
        QAExample(str(i), "Who took part?", context,
                  (Answer(context.index(a), context.index(a) + len(a), a),))
        for i, a in enumerate(answers)
    ]  # fmt: skip
    windowing = Windowing(32, max_query_length=8, doc_stride=8)
    for item, encoded in zip(items, encode_span_qa(items, english, windowing), strict=True):
        holding = [w for w in encoded["windows"] if w["labels"][1] > 0]
        assert holding, item.answers
        for window in holding:
            assert context[slice(*_labelled_span(encoded, window))] == item.answers[0].text


def test_windowing_refuses_settings_that_leave_no_context():
    with pytest.raises(ValueError, match="leaves no context piece"):
        Windowing(20, max_query_length=17)
    with pytest.raises(ValueError, match="must be at least 1"):
        Windowing(64, doc_stride=0)


def test_each_window_learns_the_answer_it_holds(tokenizer):
    # Two answers far apart: no window holds both; each window that holds one whole is
    # labelled with it, not with [CLS] because the first answer is elsewhere.
    context = "王明住在北京。" + "今天下雨。" * 8 + "李华住在上海。"
    first, second = context.index("北京"), context.rindex("上海")
    item = QAExample(
        "two",
        "谁？",
        context,
        (Answer(first, first + 2, "北京"), Answer(second, second + 2, "上海")),
    )
    (encoded,) = encode_span_qa([item], tokenizer, Windowing(24, max_query_length=4, doc_stride=8))
    found = set()
    for window in encoded["windows"]:
        first_piece, last_piece = window["labels"]
        if last_piece:
            pieces = (
                window["window_start"]
                + np.array([first_piece, last_piece])
                - window["context_offset"]
            )
            found.add(
                context[encoded["piece_starts"][pieces[0]] : encoded["piece_ends"][pieces[1]]]
            )
    assert found == {"北京", "上海"}


def test_hf_columns_blank_answers_and_broken_structure(tmp_path):
    rows = [
        # Hugging Face datasets' columns: two answers.
        {"id": "hf", "context": "Cats sleep a lot.", "question": "Who sleeps?",
         "answers": {"text": ["Cats", "Cats sleep"], "answer_start": [0, 0]}},
        # A blank answer is no answer: dropped, and the question with it.
        {"id": "blank", "context": "a  b", "question": "What?",
         "answers": [{"text": "  ", "answer_start": 1}]},
    ]  # fmt: skip
    path = tmp_path / "hf.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    examples, skipped = read_span_qa([str(path)])
    assert [(e.id, [a.text for a in e.answers]) for e in examples] == [
        ("hf", ["Cats", "Cats sleep"])
    ]
    assert dict(skipped) == {"bad_answer": 1, "no_valid_answer": 1}
    broken = {"data": ["not an article", {"paragraphs": "x"}, {"paragraphs": [{"qas": 3}]},
                       {"paragraphs": [{"context": "ok.", "qas": [
                           {"id": "q", "question": "q?",
                            "answers": [{"text": "ok", "answer_start": 0}]}]}]}]}  # fmt: skip
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    examples, skipped = read_span_qa([str(tmp_path / "broken.json")])
    assert [e.id for e in examples] == ["q"] and dict(skipped) == {"invalid_json": 3}
    (tmp_path / "cut.json").write_text(json.dumps(broken)[:-20])
    with pytest.raises(ValueError, match="cut.json: not valid JSON"):
        read_span_qa([str(tmp_path / "cut.json")])
