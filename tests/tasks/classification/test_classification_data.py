"""Classification data: every input layout (ours, CLUE, GLUE) with bad rows,
run_classifier packing (in-graph vs a plain-Python reference, eager, in a
tf.function and in a reloaded SavedModel), and length-bucketed batches."""

from __future__ import annotations

import collections
import gzip
import itertools
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text
from helpers.paths import SHARED_DATA

from albert_tf.data import iter_sentences, sample_path
from albert_tf.data.splits import split_examples
from albert_tf.tasks.classification.data import (
    ClassificationExample,
    classification_batches,
    encode_classification,
    pack_classification,
    read_classification,
)
from albert_tf.tokenizers import WordPieceTokenizer, train_sentencepiece

REAL_FILE = str(SHARED_DATA / "classification" / "zh_product_reviews.jsonl.gz")


@pytest.fixture(scope="module")
def tok_en(tmp_path_factory):
    lines = list(itertools.islice(iter_sentences([sample_path("en")]), 1200))
    out = tmp_path_factory.mktemp("spm")
    return train_sentencepiece(lines, out, vocab_size=700, shrink_vocab=True)


@pytest.fixture(scope="module")
def tok_zh(tmp_path_factory):
    """Chinese WordPiece with one piece per character (a CJK character is its own
    word), plus a few English words, so a mixed text has known pieces."""
    text = "".join(itertools.islice(iter_sentences([sample_path("zh")]), 300)).lower()
    chars = sorted({c for c in text if not c.isspace()} | set("甲乙好坏"))
    words = ["good", "bad", "movie", "the", "plot", "##s"]
    vocab = list(dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, *chars]))
    path = tmp_path_factory.mktemp("wordpiece") / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return WordPieceTokenizer(path)


def _jsonl(records) -> str:
    return "\n".join(
        r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records
    )


def _tsv(rows) -> str:
    return "\n".join("\t".join(row) for row in rows) + "\n"


# -- reading -----------------------------------------------------------------


def test_reads_our_jsonl_plain_and_gzip_with_every_bad_row(tmp_path):
    folder = tmp_path / "ours"
    folder.mkdir()
    lines = [
        {"id": "a", "lang": "zh", "source": "reviews", "text": "好", "label": 1},
        {"id": "b", "text": "坏", "text_pair": "很坏", "label": "0"},  # string label, a pair
        "{not json",  # invalid_json
        "[1, 2]",  # valid JSON, no object: invalid_json
        {"id": "c", "label": 1},  # missing_text
        {"id": "d", "text": " \t", "label": 1},  # empty_text
        {"id": "e", "text": "x"},  # missing_label: the file has labels elsewhere
        {"id": "f", "text": "x", "label": {"a": 1}},  # unknown_label
        "",  # blank: ignored, not counted
        {"text": "行\u2028分隔", "text_pair": "", "label": 0.0},  # no id; U+2028 stays in the text
        {"id": "g", "text": "y", "label": True},  # unknown_label
        {"id": "h", "text": "z", "text_pair": 5, "label": 0},  # missing_text
    ]
    # A UTF-8 BOM and CRLF line endings, as Windows tools write them.
    (folder / "ours.jsonl").write_bytes(
        b"\xef\xbb\xbf" + _jsonl(lines).replace("\n", "\r\n").encode()
    )
    gz = [{"id": "z1", "text": "好好", "label": 1}, {"id": "z2", "text": "坏坏", "label": 0}]
    (folder / "more.jsonl.gz").write_bytes(gzip.compress(_jsonl(gz).encode()))

    items, skipped, names = read_classification([str(folder)])
    assert names == ["0", "1"]
    # Folder files in sorted order: more.jsonl.gz, then ours.jsonl.
    assert [(i.id, i.text, i.text_pair, i.label) for i in items] == [
        ("z1", "好好", "", 1),
        ("z2", "坏坏", "", 0),
        ("a", "好", "", 1),
        ("b", "坏", "很坏", 0),
        ("ours.jsonl:10", "行\u2028分隔", "", 0),
    ]
    assert (items[2].lang, items[2].source) == ("zh", "reviews")
    assert dict(skipped) == {
        "invalid_json": 2,
        "missing_text": 2,
        "empty_text": 1,
        "missing_label": 1,
        "unknown_label": 2,
    }

    # A trained model's label map: its indexes, and labels it lacks are unknown.
    items, skipped, names = read_classification(
        [str(folder / "ours.jsonl")], label_names=["1", "0"]
    )
    assert names == ["1", "0"] and [i.label for i in items] == [0, 1, 1]
    items, skipped, names = read_classification([str(folder / "*.gz")], label_names=["1"])
    assert [i.id for i in items] == ["z1"] and dict(skipped) == {"unknown_label": 1}

    with pytest.raises(FileNotFoundError, match="nothing.jsonl"):
        read_classification([str(tmp_path / "nothing.jsonl")])


def test_reads_clue_tnews_iflytek_afqmc(tmp_path):
    tnews = tmp_path / "tnews"
    tnews.mkdir()
    (tnews / "train.json").write_text(
        _jsonl(
            [
                {
                    "label": "102",
                    "label_desc": "news_ent",
                    "sentence": "江疏影甜甜圈自拍",
                    "keywords": "江疏影,美少女",
                },
                {"label": "116", "label_desc": "news_game", "sentence": "游戏", "keywords": ""},
                {"label": "100", "label_desc": "news_story", "sentence": "故事", "keywords": ""},
                {"label": "102", "label_desc": "news_ent", "sentence": "", "keywords": ""},
                {"label": "103", "label_desc": "news_sports", "keywords": "足球"},
            ]
        ),  # fmt: skip
        encoding="utf-8",
    )
    (tnews / "test.json").write_text(
        _jsonl([{"id": 0, "sentence": "新闻一", "keywords": ""}, {"id": 1, "sentence": "新闻二"}]),
        encoding="utf-8",
    )
    items, skipped, names = read_classification([str(tnews / "train.json")])
    assert names == ["100", "102", "116"]  # codes in numeric order
    assert [(i.id, i.text, i.label, i.lang, i.source) for i in items] == [
        ("train.json:1", "江疏影甜甜圈自拍", 1, "zh", "clue"),
        ("train.json:2", "游戏", 2, "zh", "clue"),
        ("train.json:3", "故事", 0, "zh", "clue"),
    ]
    assert dict(skipped) == {"empty_text": 1, "missing_text": 1}
    # A test file (no labels at all) keeps its items, unlabelled, with its own ids.
    items, skipped, _ = read_classification([str(tnews / "test.json")], label_names=names)
    assert [(i.id, i.label) for i in items] == [("0", -1), ("1", -1)] and not skipped

    iflytek = tmp_path / "iflytek.json"
    iflytek.write_text(
        _jsonl(
            {"label": code, "label_des": f"app{code}", "sentence": f"应用{code}"}
            for code in ("11", "0", "2", "11")
        ),
        encoding="utf-8",
    )
    items, skipped, names = read_classification([str(iflytek)])
    assert names == ["0", "2", "11"]  # numerically, not "0", "11", "2"
    assert [i.label for i in items] == [2, 0, 1, 2] and not skipped

    afqmc = tmp_path / "afqmc.json"
    afqmc.write_text(
        _jsonl(
            [
                {"sentence1": "双十一花呗提额在哪", "sentence2": "里可以提花呗额度", "label": "0"},
                {"sentence1": "花呗如何还款", "sentence2": "花呗怎么还款", "label": "1"},
                {"sentence1": "花呗", "sentence2": "  ", "label": "1"},  # empty_text
                {"sentence1": "花呗", "label": "1"},  # missing_text: a pair task's pair
            ]
        ),
        encoding="utf-8",
    )
    items, skipped, names = read_classification([str(afqmc)])
    assert names == ["0", "1"]
    assert [(i.text, i.text_pair, i.label) for i in items] == [
        ("双十一花呗提额在哪", "里可以提花呗额度", 0),
        ("花呗如何还款", "花呗怎么还款", 1),
    ]
    assert dict(skipped) == {"empty_text": 1, "missing_text": 1}


def test_reads_glue_sst2_mrpc_qnli_and_test_files(tmp_path):
    sst = tmp_path / "SST-2"
    sst.mkdir()
    (sst / "train.tsv").write_text(
        _tsv(
            [
                ("sentence", "label"),
                ("hide new secretions from the parental units ", "0"),
                ("that loves its characters ", "1"),
                ('a "quoted" word , kept as is ', "1"),  # GLUE's TSVs are unquoted
                ("too", "many", "1"),  # wrong_column_count
                ("   ", "1"),  # empty_text
                ("no label here", ""),  # missing_label
            ]
        )
    )
    (sst / "test.tsv").write_text(
        _tsv([("index", "sentence"), ("0", "uneasy mishmash of styles"), ("1", "well worth it")])
    )
    items, skipped, names = read_classification([str(sst / "train.tsv")])
    assert names == ["0", "1"]
    assert [(i.id, i.text, i.label, i.lang) for i in items] == [
        ("train.tsv:2", "hide new secretions from the parental units ", 0, "en"),
        ("train.tsv:3", "that loves its characters ", 1, "en"),
        ("train.tsv:4", 'a "quoted" word , kept as is ', 1, "en"),
    ]
    assert dict(skipped) == {"wrong_column_count": 1, "empty_text": 1, "missing_label": 1}
    items, skipped, _ = read_classification([str(sst / "test.tsv")], label_names=names)
    assert [(i.id, i.text, i.label) for i in items] == [
        ("0", "uneasy mishmash of styles", -1),
        ("1", "well worth it", -1),
    ]

    # MRPC as Microsoft ships it: a BOM before the header and CRLF line endings.
    mrpc = tmp_path / "msr_paraphrase_train.tsv"
    rows = [
        ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"),
        ("1", "702876", "702977", "Amrozi accused his brother .", "Referring to him , Amrozi ."),
        ("0", "2108705", "2108831", "Yucaipa owned Dominick 's .", "Yucaipa bought Dominick 's ."),
        ("1", "1330381", "1330521", "A pair .", ""),  # empty_text: the pair is required
    ]
    mrpc.write_bytes(b"\xef\xbb\xbf" + _tsv(rows).replace("\n", "\r\n").encode())
    items, skipped, names = read_classification([str(mrpc)])
    assert names == ["0", "1"] and dict(skipped) == {"empty_text": 1}
    assert [(i.text, i.text_pair, i.label) for i in items] == [
        ("Amrozi accused his brother .", "Referring to him , Amrozi .", 1),
        ("Yucaipa owned Dominick 's .", "Yucaipa bought Dominick 's .", 0),
    ]

    qnli = tmp_path / "qnli.tsv"
    qnli.write_text(
        _tsv(
            [
                ("index", "question", "sentence", "label"),
                ("0", "When did it open?", "It opened in 1990.", "entailment"),
                ("1", "Who won?", "Nobody knows.", "not_entailment"),
            ]
        )
    )
    items, _, names = read_classification([str(qnli)])
    assert names == ["entailment", "not_entailment"]  # not all integers: sorted strings
    assert [(i.id, i.text, i.text_pair, i.label) for i in items] == [
        ("0", "When did it open?", "It opened in 1990.", 0),
        ("1", "Who won?", "Nobody knows.", 1),
    ]


MNLI_TRAIN = [
    "index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
    "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label",
]  # fmt: skip
MNLI_DEV = [*MNLI_TRAIN[:-1], "label2", "label3", "label4", "label5", "gold_label"]


def _mnli_row(header, index, s1, s2, gold, votes=("neutral",)):
    row = dict.fromkeys(header, "(x)") | {"index": str(index), "sentence1": s1, "sentence2": s2}
    row |= {f"label{n}": vote for n, vote in enumerate(votes, 1) if f"label{n}" in header}
    return tuple((row | {"gold_label": gold}).values())


def test_reads_glue_mnli_cola_and_sts_b(tmp_path):
    mnli = tmp_path / "MNLI"
    mnli.mkdir()
    (mnli / "train.tsv").write_text(
        _tsv(
            [
                MNLI_TRAIN,
                _mnli_row(MNLI_TRAIN, 0, "He sat.", "He stood.", "contradiction"),
                _mnli_row(MNLI_TRAIN, 1, "It rains.", "It is wet.", "entailment", ["neutral"]),
                _mnli_row(MNLI_TRAIN, 2, "A cat.", "An animal?", "neutral"),
                _mnli_row(MNLI_TRAIN, 3, "Short.", "Row.", "neutral")[:-2],  # wrong_column_count
            ]
        )
    )
    (mnli / "dev_matched.tsv").write_text(
        _tsv(
            [
                MNLI_DEV,
                _mnli_row(MNLI_DEV, 0, "A.", "B.", "neutral", ["neutral"] * 5),
                _mnli_row(MNLI_DEV, 1, "C.", "D.", "hidden", ["neutral"] * 5),  # unknown_label
            ]
        )
    )
    items, skipped, names = read_classification([str(mnli / "train.tsv")])
    assert names == ["contradiction", "entailment", "neutral"]  # gold_label, not label1
    assert [(i.id, i.text, i.text_pair, i.label) for i in items] == [
        ("0", "He sat.", "He stood.", 0),
        ("1", "It rains.", "It is wet.", 1),
        ("2", "A cat.", "An animal?", 2),
    ]
    assert dict(skipped) == {"wrong_column_count": 1}
    items, skipped, _ = read_classification([str(mnli / "dev_matched.tsv")], label_names=names)
    assert [(i.id, i.label) for i in items] == [("0", 2)] and dict(skipped) == {"unknown_label": 1}

    # CoLA: no header, 4 columns (source, label, original mark, sentence).
    cola = tmp_path / "in_domain_train.tsv"
    cola.write_text(
        _tsv(
            [
                ("gj04", "1", "", "Our friends won't buy this analysis."),
                ("gj04", "0", "*", "They drank the pub."),
                ("gj04", "1", "too few"),  # wrong_column_count
                ("gj04", "", "", "A sentence, no label."),  # missing_label
            ]
        )
    )
    items, skipped, names = read_classification([str(cola)])
    assert names == ["0", "1"]
    assert [(i.id, i.text, i.label) for i in items] == [
        ("in_domain_train.tsv:1", "Our friends won't buy this analysis.", 1),
        ("in_domain_train.tsv:2", "They drank the pub.", 0),
    ]
    assert dict(skipped) == {"wrong_column_count": 1, "missing_label": 1}

    sts = tmp_path / "sts-train.tsv"
    header = "index genre filename year old_index source1 source2 sentence1 sentence2 score"

    def sts_row(index, s1, s2, score):
        return (
            str(index),
            "main-captions",
            "MSRvid",
            "2012test",
            "1",
            "none",
            "none",
            s1,
            s2,
            score,
        )

    sts.write_text(
        _tsv(
            [
                header.split(),
                sts_row(0, "A plane is taking off.", "An air plane is taking off.", "5.000"),
                sts_row(
                    1, "A man is playing a flute.", "A man is playing a bamboo flute.", "3.800"
                ),
                sts_row(2, "A man spreads cheese.", "A man spreads butter.", "n/a"),  # bad_score
                sts_row(3, "A dog.", "A cat.", "nan"),  # bad_score: not a finite number
            ]
        )
    )
    items, skipped, names = read_classification([str(sts)], regression=True)
    assert names == [] and dict(skipped) == {"bad_score": 2}
    assert [(i.id, i.text_pair, i.label) for i in items] == [
        ("0", "An air plane is taking off.", 5.0),
        ("1", "A man is playing a bamboo flute.", 3.8),
    ]
    assert all(isinstance(i.label, float) for i in items)
    with pytest.raises(ValueError, match="regression"):
        read_classification([str(sts)], regression=True, label_names=["0"])


def test_layouts_are_detected_from_content_and_unknown_tsv_is_an_error(tmp_path):
    # A TSV named .txt is still a TSV; a .tsv with no known header is an error.
    (tmp_path / "sst.txt").write_text(_tsv([("sentence", "label"), ("fine", "1")]))
    items, _, _ = read_classification([str(tmp_path / "sst.txt")])
    assert [(i.text, i.label) for i in items] == [("fine", 0)]
    (tmp_path / "odd.tsv").write_text(_tsv([("words", "class"), ("fine", "1")]))
    with pytest.raises(ValueError, match="odd.tsv"):
        read_classification([str(tmp_path / "odd.tsv")])
    # Regression from JSON Lines: numbers and numeric strings; a list is a bad score.
    (tmp_path / "scores.jsonl").write_text(
        _jsonl(
            [
                {"id": "1", "text": "a", "label": 0.25},
                {"id": "2", "text": "b", "label": "4"},
                {"id": "3", "text": "c", "label": [1]},
            ]
        )
    )
    items, skipped, names = read_classification([str(tmp_path / "scores.jsonl")], regression=True)
    assert [(i.id, i.label) for i in items] == [("1", 0.25), ("2", 4.0)]
    assert dict(skipped) == {"bad_score": 1} and names == []


def test_label_names_from_data_and_the_shared_split(tmp_path):
    (tmp_path / "ints.jsonl").write_text(
        _jsonl({"text": "t", "label": label} for label in (10, "9", 2, -1))
    )
    _, _, names = read_classification([str(tmp_path / "ints.jsonl")])
    assert names == ["-1", "2", "9", "10"]
    (tmp_path / "mixed.jsonl").write_text(
        _jsonl({"text": "t", "label": label} for label in ("b", 1, "a"))
    )
    items, _, names = read_classification([str(tmp_path / "mixed.jsonl")])
    assert names == ["1", "a", "b"] and [i.label for i in items] == [2, 0, 1]
    # The multiple-choice split only needs ids: it splits these items too.
    many = [ClassificationExample(str(i), "t") for i in range(300)]
    parts = split_examples(many, [0.5, 0.5])
    assert sorted(i.id for p in parts for i in p) == sorted(i.id for i in many)


@pytest.mark.skipif(not os.path.exists(REAL_FILE), reason="shared data not mounted")
def test_reads_the_real_product_reviews():
    items, skipped, names = read_classification([REAL_FILE])
    assert len(items) == 29_854 and names == ["0", "1"] and not skipped
    assert len({i.id for i in items}) == len(items)
    assert {i.label for i in items} == {0, 1} and all(i.lang == "zh" for i in items)


# -- packing -----------------------------------------------------------------


def _truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """google-research/albert run_classifier's, verbatim."""
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_length:
            break
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


_PIECES: dict = {}


def _pieces(tok, text: str) -> list[int]:
    """The tokenizer's pieces for one text alone (memoised: the grid repeats texts)."""
    if (tok, text) not in _PIECES:
        _PIECES[tok, text] = tok.tokenize(tf.constant([text])).to_list()[0]
    return list(_PIECES[tok, text])


def _reference(tok, text: str, pair: str, max_seq_length: int) -> tuple[list, list]:
    """run_classifier's convert_single_example, from the tokenizer's own pieces."""
    a, b = _pieces(tok, text), _pieces(tok, pair)
    if b:
        _truncate_seq_pair(a, b, max_seq_length - 3)
        return [tok.cls_id, *a, tok.sep_id, *b, tok.sep_id], [0] * (len(a) + 2) + [1] * (len(b) + 1)
    a = a[: max_seq_length - 2]
    return [tok.cls_id, *a, tok.sep_id], [0] * (len(a) + 2)


def _check_against_reference(tok, texts, pairs, max_seq_length, packed=None):
    if packed is None:
        packed = pack_classification(tf.constant(texts), tf.constant(pairs), tok, max_seq_length)
    ids, seg, mask = (packed[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask"))
    assert {a.dtype.name for a in (ids, seg, mask)} == {"int32"}
    references = [_reference(tok, t, p, max_seq_length) for t, p in zip(texts, pairs, strict=True)]
    # Padded to the batch's longest packed sequence, never beyond max_seq_length.
    assert ids.shape == (len(texts), max(len(r[0]) for r in references)) == seg.shape
    assert ids.shape[1] <= max_seq_length
    for row, (tokens, segments) in enumerate(references):
        n = len(tokens)
        assert ids[row, :n].tolist() == tokens, row
        assert seg[row, :n].tolist() == segments, row
        assert mask[row].tolist() == [1] * n + [0] * (ids.shape[1] - n)
        assert (ids[row, n:] == tok.pad_id).all() and (seg[row, n:] == 0).all()


def test_round_robin_trimmer_allocates_as_truncate_seq_pair():
    cases = [(la, lb) for la in range(12) for lb in range(12)]
    a = tf.ragged.constant([list(range(la)) for la, _ in cases], tf.int32)
    b = tf.ragged.constant([list(range(lb)) for _, lb in cases], tf.int32)
    for budget in range(1, 26):
        ta, tb = tf_text.RoundRobinTrimmer(budget).trim([a, b])
        got = list(zip(ta.row_lengths().numpy(), tb.row_lengths().numpy(), strict=True))
        expected = []
        for la, lb in cases:
            x, y = list(range(la)), list(range(lb))
            _truncate_seq_pair(x, y, budget)
            expected.append((len(x), len(y)))
        assert got == expected, budget


def test_packing_matches_run_classifier_on_every_length(tok_zh):
    # One piece a character: every split of the budget, singles and pairs in one batch.
    lengths = [(la, lb) for la in range(10) for lb in range(10)]
    texts = ["甲" * la for la, _ in lengths]
    pairs = ["乙" * lb for _, lb in lengths]
    assert tok_zh.tokenize(tf.constant(["甲" * 7])).row_lengths().numpy().tolist() == [7]
    for max_seq_length in range(4, 24, 3):
        _check_against_reference(tok_zh, texts, pairs, max_seq_length)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_packing_singles_pairs_and_too_long_text(lang, tok_en, tok_zh):
    tok = tok_en if lang == "en" else tok_zh
    if lang == "en":
        long = " ".join(f"The old man walked to the river {n} times." for n in range(12))
        texts = ["A good movie.", long, "Why?", long, "", "Short one."]
        pairs = ["", "Did he walk?", long + " And back.", long, "Only a pair.", " "]
    else:
        long = "成都动物园里的大熊猫人人都想摸一下。" * 5
        texts = ["好", long, "为什么?", long, "", "good movie 很好"]
        pairs = ["", "他们主要负责AI算法的研究和落地.", long, long + "吗", "你吃饭了吗?", ""]
    for max_seq_length in (4, 9, 24, 128):
        _check_against_reference(tok, texts, pairs, max_seq_length)
    # Singles only and pairs only, too.
    _check_against_reference(tok, texts[:1], pairs[:1], 24)
    _check_against_reference(tok, texts[1:4], pairs[1:4], 24)


def test_packing_rejects_impossible_lengths(tok_zh):
    with pytest.raises(ValueError, match="at least 3"):
        pack_classification(tf.constant(["好"]), tf.constant([""]), tok_zh, 2)
    with pytest.raises(ValueError, match="pairs need max_seq_length >= 4"):
        pack_classification(tf.constant(["好", "坏"]), tf.constant(["", "好"]), tok_zh, 3)
    with pytest.raises(ValueError, match="2 texts but 1 text pairs"):
        pack_classification(tf.constant(["好", "坏"]), tf.constant(["好"]), tok_zh, 8)
    # Three is enough for single texts: [CLS] one piece [SEP].
    _check_against_reference(tok_zh, ["好坏", ""], ["", ""], 3)


class _Packer(tf.Module):
    """What the raw-text SavedModel does: strings in, packed ids out."""

    def __init__(self, tokenizer, max_seq_length):
        super().__init__()
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def __call__(self, texts, text_pairs):
        return pack_classification(texts, text_pairs, self.tokenizer, self.max_seq_length)


def test_packing_inside_tf_function_and_a_reloaded_saved_model(tok_en, tmp_path):
    texts = ["A good movie.", "Why " * 30, "", "The plot."]
    pairs = ["", "Because " * 30, "Only a pair.", "It is thin."]
    packer = _Packer(tok_en, 20)
    outputs = packer.__call__.get_concrete_function().structured_outputs
    assert {k: v.shape.as_list() for k, v in outputs.items()} == dict.fromkeys(
        ("token_ids", "segment_ids", "padding_mask"), [None, None]
    )
    _check_against_reference(tok_en, texts, pairs, 20, packer(tf.constant(texts), pairs))
    tf.saved_model.save(packer, str(tmp_path / "packer"))
    loaded = tf.saved_model.load(str(tmp_path / "packer"))
    _check_against_reference(tok_en, texts, pairs, 20, loaded(tf.constant(texts), pairs))
    # Batch sizes and lengths vary without retracing.
    _check_against_reference(tok_en, texts[:1], pairs[:1], 20, loaded(texts[:1], pairs[:1]))

    # In a graph, too short a length for pairs fails when a pair arrives.
    short = _Packer(tok_en, 3)
    _check_against_reference(tok_en, ["Why?"], [""], 3, short(["Why?"], [""]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="pairs need"):
        short(["Why?"], ["Because."])


# -- encoding and batches ------------------------------------------------------


def test_encode_gives_unpadded_items_with_typed_labels(tok_zh):
    items = [
        ClassificationExample("1", "好", label=1),
        ClassificationExample("2", "甲" * 30, "乙" * 30, label=0),
        ClassificationExample("3", "坏", "好", label=2.5),
    ]
    encoded = encode_classification(items, tok_zh, 16)
    assert [len(e["token_ids"]) for e in encoded] == [3, 16, 5]
    for e, item in zip(encoded, items, strict=True):
        tokens, segments = _reference(tok_zh, item.text, item.text_pair, 16)
        assert e["token_ids"].tolist() == tokens and e["segment_ids"].tolist() == segments
        assert e["padding_mask"].tolist() == [1] * len(tokens)
        assert {e[k].dtype.name for k in ("token_ids", "segment_ids", "padding_mask")} == {"int32"}
    assert [e["label"].dtype.name for e in encoded] == ["int32", "int32", "float32"]
    assert encode_classification([], tok_zh, 16) == []


def _fake(lengths, labels=None):
    labels = range(len(lengths)) if labels is None else labels
    return [
        {
            "token_ids": np.arange(1, n + 1, dtype=np.int32),
            "segment_ids": np.ones(n, np.int32),
            "padding_mask": np.ones(n, np.int32),
            "label": label,
        }
        for n, label in zip(lengths, labels, strict=True)
    ]


def test_batches_pad_to_their_longest_and_cover_every_item_once():
    rng = np.random.RandomState(0)
    lengths = rng.randint(3, 60, size=203).tolist()
    encoded = _fake(lengths, [np.int32(i) for i in range(203)])

    batches = list(classification_batches(encoded, 16))
    assert [len(y) for _, y in batches] == [16] * 12 + [11]
    assert np.concatenate([y for _, y in batches]).tolist() == list(range(203))  # in order
    for features, labels in batches:
        assert labels.dtype == np.int32
        width = max(lengths[i] for i in labels)
        for key in ("token_ids", "segment_ids", "padding_mask"):
            assert features[key].shape == (len(labels), width) and features[key].dtype == np.int32
        for row, i in enumerate(labels):
            n = lengths[i]
            assert features["token_ids"][row].tolist() == list(range(1, n + 1)) + [0] * (width - n)
            assert features["padding_mask"][row].sum() == n == features["segment_ids"][row].sum()

    def epoch(seed):
        return [y.tolist() for _, y in classification_batches(encoded, 16, shuffle=True, seed=seed)]

    shuffled = epoch(7)
    assert sorted(sum(shuffled, [])) == list(range(203))  # every item exactly once
    assert shuffled == epoch(7) and shuffled != epoch(8)  # deterministic per seed
    # Length-bucketed: one window holds all 203 items, so batches are runs of the
    # sorted lengths and pad far less than the unshuffled ones.
    runs = sorted(sorted(lengths[i] for i in batch) for batch in shuffled)
    assert sum(runs, []) == sorted(lengths)

    def padding(batches):
        return sum(f["padding_mask"].size - f["padding_mask"].sum() for f, _ in batches)

    assert padding(classification_batches(encoded, 16, True, 7)) < padding(batches) / 4


def test_batch_labels_are_float32_for_regression_scores():
    ((_, labels),) = classification_batches(_fake([2, 3], [np.float32(0.5), -1]), 4)
    assert labels.dtype == np.float32 and labels.tolist() == [0.5, -1.0]
    ((_, labels),) = classification_batches(_fake([2, 3], [np.int32(1), -1]), 4)
    assert labels.dtype == np.int32 and labels.tolist() == [1, -1]
    assert list(classification_batches([], 4)) == []
    with pytest.raises(ValueError, match="batch_size"):
        list(classification_batches(_fake([2]), 0))


def test_read_encode_batch_end_to_end(tmp_path, tok_zh):
    counts = collections.Counter()
    rows = [{"id": str(i), "text": "好" * (i % 7 + 1), "label": i % 3} for i in range(40)]
    (tmp_path / "d.jsonl").write_text(_jsonl(rows), encoding="utf-8")
    items, skipped, names = read_classification([str(tmp_path / "d.jsonl")])
    encoded = encode_classification(items, tok_zh, 8)
    for features, labels in classification_batches(encoded, 8, shuffle=True, seed=1):
        counts.update(labels.tolist())
        assert features["token_ids"].shape[1] == features["padding_mask"].sum(-1).max() <= 8
    assert names == ["0", "1", "2"] and not skipped and counts == {0: 14, 1: 13, 2: 13}
