"""Reading the three formats, run_race packing (in-graph vs a Python
reference), and batches padded to their own longest item."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.splits import split_examples
from albert_tf.tasks.multiple_choice.data import (
    build_qa,
    encode_multiple_choice,
    fill_qa,
    multiple_choice_batches,
    pack_multiple_choice,
    read_multiple_choice,
)
from albert_tf.tasks.multiple_choice.next_sentence import next_sentence_items
from albert_tf.tokenizers import load_tokenizer

CLASSIC_OPTIONS = [
    "成都动物园里的大熊猫人人都想摸一下.",
    "他们主要负责AI算法的研究和落地.",
    "我没吃上吉士果.",
    "你吃饭了吗?",
]


@pytest.fixture(scope="module")
def tok_en(mc_models):
    return load_tokenizer(mc_models["en"]["model"] / "tokenizer")


@pytest.fixture(scope="module")
def tok_zh(mc_models):
    return load_tokenizer(mc_models["zh"]["model"] / "tokenizer")


def test_reads_jsonl_gz_race_and_c3_and_counts_bad_input(tmp_path):
    good = {"id": "a", "lang": "en", "context": "c", "question": "q", "options": ["x", "y", "z"]}
    lines = [
        json.dumps(good | {"label": 2}),
        "{not json",
        json.dumps(good | {"label": 3}),  # label out of range
        json.dumps(good | {"options": ["x"], "label": 0}),  # one option
        json.dumps(good | {"options": ["x", ""], "label": 0}),  # empty option
        json.dumps(good | {"options": "xy", "label": 0}),  # not a list
        "",
        json.dumps(good | {"id": "b", "options": ["1", "2"], "label": 1}),
    ]
    (tmp_path / "mc.jsonl.gz").write_bytes(gzip.compress("\n".join(lines).encode()))
    race = tmp_path / "race" / "high"
    race.mkdir(parents=True)
    (race / "1.txt").write_text(
        json.dumps(
            {
                "id": "high1.txt",
                "article": "Tom has a cat.",
                "questions": ["Tom has a _ .", "Who has a cat?"],
                "options": [["cat", "dog", "cow", "pig"], ["Tom", "Ann", "Bob", "Sue"]],
                "answers": ["A", "E"],  # E is no option: skipped
            }
        )
    )
    c3 = [
        [
            ["男：你好。", "女：你好！"],
            [
                {
                    "question": "他们在做什么？",
                    "choice": ["打招呼", "吃饭", "睡觉"],
                    "answer": "打招呼",
                }
            ],
            "c3-1",
        ]
    ]
    (tmp_path / "c3.json").write_text(json.dumps(c3, ensure_ascii=False))

    items, skipped = read_multiple_choice(str(tmp_path / "mc.jsonl.gz"))
    assert [(i.id, i.label, len(i.options)) for i in items] == [("a", 2, 3), ("b", 1, 2)]
    assert dict(skipped) == {
        "invalid_json": 1,
        "bad_label": 1,
        "too_few_options": 1,
        "empty_option": 1,
        "invalid_record": 1,
    }
    items, skipped = read_multiple_choice([str(tmp_path / "race")])
    assert [(i.id, i.question, i.label, i.lang) for i in items] == [
        ("high1.txt-0", "Tom has a _ .", 0, "en")
    ]
    assert dict(skipped) == {"bad_label": 1}
    items, skipped = read_multiple_choice(str(tmp_path / "c3.json"))
    assert items[0].context == "男：你好。\n女：你好！" and items[0].label == 0
    assert items[0].lang == "zh" and not skipped
    with pytest.raises(FileNotFoundError, match="nothing.jsonl"):
        read_multiple_choice([str(tmp_path / "nothing.jsonl")])


def test_in_graph_qa_matches_python_rule():
    questions = ["a _ b _", "No blank?", "", "_", "x\\1 _ $1", "多_个"]
    options = ["Y\\1", "o p", "o", "", "z\\\\", "选项"]
    got = fill_qa(tf.constant(questions), tf.constant([[o] for o in options]))
    expected = [build_qa(q, o) for q, o in zip(questions, options, strict=True)]
    assert [g[0].decode() for g in got.numpy()] == expected


def _reference(tok, context, question, option, max_seq_length, max_qa_length, keep="start"):
    """google-research/albert run_race's packing, one option at a time (with
    ``keep="end"``, the context's last pieces instead of its first)."""
    ids = lambda text: tok.tokenize(tf.constant([text])).to_list()[0]  # noqa: E731
    ctx, qa = ids(context), ids(build_qa(question, option))[-max_qa_length:]
    budget = max_seq_length - 3 - len(qa)
    ctx = ctx[:budget] if keep == "start" else ctx[max(len(ctx) - budget, 0) :]
    tokens = [tok.cls_id, *ctx, tok.sep_id, *qa, tok.sep_id]
    return tokens, [0] * (len(ctx) + 2) + [1] * (len(qa) + 1)


@pytest.mark.parametrize("keep", ["start", "end"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_packing_matches_run_race_reference(lang, keep, tok_en, tok_zh):
    tok = tok_en if lang == "en" else tok_zh
    long_context = " ".join(f"The old man walked to the river {n} times." for n in range(12))
    contexts = [long_context, "", "算法组的成员们精通各种AI算法.", "Short one."]
    questions = ["What did he _ each day?", "", "", "Why " * 40 + "?"]
    options = [
        ["walk", "swim to the other side of the wide river", "", ""],
        ["only option", "", "", ""],
        [
            "成都动物园里的大熊猫人人都想摸一下.",
            "他们主要负责AI算法的研究和落地.",
            "我没吃上吉士果.",
            "你吃饭了吗?",
        ],
        ["a", "b", "c", "d " * 50],
    ]
    seq, qa = 48, 16
    packed = pack_multiple_choice(
        tok,
        tf.constant(contexts),
        tf.constant(questions),
        tf.constant(options),
        max_seq_length=seq,
        max_qa_length=qa,
        context_keep=keep,
    )
    ids, seg, mask = (packed[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask"))
    assert ids.shape[:2] == (4, 4) and ids.shape[2] <= seq
    assert ids.shape[2] == mask.sum(-1).max()  # padded to the batch's longest, not to seq
    for b in range(4):
        for c in range(4):
            if not options[b][c]:
                assert mask[b, c].sum() == 0 and ids[b, c].sum() == 0
                assert not packed["present"].numpy()[b, c]
                continue
            tokens, segments = _reference(
                tok, contexts[b], questions[b], options[b][c], seq, qa, keep
            )
            n = len(tokens)
            assert ids[b, c, :n].tolist() == tokens
            assert seg[b, c, :n].tolist() == segments
            assert mask[b, c].tolist() == [1] * n + [0] * (ids.shape[2] - n)
            assert (ids[b, c, n:] == tok.pad_id).all() and (seg[b, c, n:] == 0).all()
    truncated = packed["context_truncated"].numpy()
    assert truncated[0, 0] and not truncated[3, 0]
    assert packed["qa_truncated"].numpy()[3].tolist() == [True, True, True, True]


def test_packing_rejects_impossible_lengths(tok_en):
    with pytest.raises(ValueError, match="max_qa_length"):
        pack_multiple_choice(tok_en, ["c"], ["q"], [["a", "b"]], max_seq_length=10, max_qa_length=8)


def test_batches_mix_option_counts_and_pad_to_longest(tok_en):
    from albert_tf.tasks.multiple_choice.data import MultipleChoiceExample

    items = [
        MultipleChoiceExample("1", "Short.", "", ["a", "b"], 1),
        MultipleChoiceExample(
            "2", "A much longer context " * 5, "Q?", ["a", "b", "c", "d", "e"], 4
        ),
        MultipleChoiceExample("3", "Mid length context.", "", ["x", "y", "z"], 0),
    ]
    encoded = encode_multiple_choice(items, tok_en, max_seq_length=64, max_qa_length=16)
    assert [e["token_ids"].shape[0] for e in encoded] == [2, 5, 3]
    ((features, labels),) = multiple_choice_batches(encoded, 3)
    assert features["token_ids"].shape == (3, 5, max(e["token_ids"].shape[1] for e in encoded))
    assert labels.tolist() == [1, 4, 0]
    assert features["padding_mask"][0, 2:].sum() == 0  # absent options, not filler text
    shapes = [f["token_ids"].shape for f, _ in multiple_choice_batches(encoded, 1, shuffle=True)]
    assert sorted(s[1] for s in shapes) == [2, 3, 5]


def test_split_is_deterministic_and_disjoint():
    docs = [[f"Doc {d} sentence {s}." for s in range(6)] for d in range(30)]
    items = next_sentence_items(docs, num_options=4, seed=1)
    assert all(
        i.options[i.label] == docs[int(i.id.split("-")[1])][int(i.id.split("-")[2]) + 1]
        for i in items
    )
    a = split_examples(items, [0.8, 0.1, 0.1])
    b = split_examples(list(reversed(items)), [0.8, 0.1, 0.1])
    assert [sorted(i.id for i in s) for s in a] == [sorted(i.id for i in s) for s in b]
    assert sum(len(s) for s in a) == len(items)
    with pytest.raises(ValueError, match="sum to 1"):
        split_examples(items, [0.5, 0.1])
    assert np.isclose(len(a[0]) / len(items), 0.8, atol=0.08)


def test_next_sentence_context_and_same_group_distractors():
    docs = [[f"{src}{d} s{s}." for s in range(5)] for src in "AB" for d in range(4)]
    groups = [doc[0][0] for doc in docs]  # "A" or "B"
    items = next_sentence_items(docs, seed=3, context_chars=14, groups=groups)
    assert len(items) == 8 * 4
    for item in items:
        _, d, i = item.id.split("-")
        doc = docs[int(d)]
        assert item.options[item.label] == doc[int(i) + 1]
        # Context: the previous sentence and earlier ones within 14 characters (7 each).
        assert item.context == " ".join(doc[max(0, int(i) - 1) : int(i) + 1])
        distractors = [o for k, o in enumerate(item.options) if k != item.label]
        assert all(o[0] == groups[int(d)] and not o.startswith(doc[0][:2]) for o in distractors)
    with pytest.raises(ValueError, match="groups"):
        next_sentence_items(docs, groups=["A"])
