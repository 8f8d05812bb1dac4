"""Tagging data readers: our JSON Lines (plain and gzip), CLUENER2020 with inclusive
ends, English and Chinese per-character CoNLL (BIO, IOB1, BIOES), bad rows counted
by reason, the errors, and the shared People's Daily file."""

from __future__ import annotations

import gzip
import itertools
import json

import pytest
from helpers.paths import SHARED_DATA

from albert_tf.tasks.tagging.data import SKIP_REASONS, Entity, TaggingExample, read_tagging

REAL_FILE = SHARED_DATA / "tagging" / "zh_peoples_daily_1998_ner.jsonl.gz"


def _jsonl(records) -> str:
    return "\n".join(
        r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records
    )


def _spans(example: TaggingExample) -> list[tuple[str, str]]:
    """(surface, label) of each entity: what the offsets point at."""
    return [(example.text[e.start : e.end], e.label) for e in example.entities]


def test_reads_our_jsonl_plain_and_gzip_with_every_bad_row(tmp_path):
    text = "江泽民在北京"
    lines = [
        {
            "id": "a",
            "lang": "zh",
            "source": "pd",
            "text": text,
            # out of order in the file: sorted by start when read
            "entities": [
                {"start": 4, "end": 6, "label": "LOC", "text": "北京"},
                {"start": 0, "end": 3, "label": "PER", "text": "江泽民"},
            ],
        },
        {"text": "没有实体", "entities": []},  # no id: file name and line
        "{not json",  # invalid_json
        "[1, 2]",  # invalid_json: not an object
        {"id": "c", "entities": []},  # missing_text
        {"id": "d", "text": "  ", "entities": []},  # empty_text
        {"id": "e", "text": text, "entities": [{"start": 4, "end": 7, "label": "LOC"}]},
        {"id": "f", "text": text, "entities": [{"start": 2, "end": 2, "label": "LOC"}]},
        {"id": "g", "text": text, "entities": [{"start": 0, "end": 3, "label": ""}]},
        {"id": "h", "text": text, "entities": [{"start": "0", "end": 3, "label": "PER"}]},
        {"id": "i", "text": text, "entities": {"start": 0}},  # bad_entity: not a list
        {"id": "j", "text": text, "entities": ["PER"]},  # bad_entity: not an object
        {"id": "k", "text": text,
         "entities": [{"start": 0, "end": 2, "label": "PER", "text": "江泽民"}]},  # mismatch
        {
            "id": "l",
            "text": text,
            "entities": [
                {"start": 0, "end": 3, "label": "PER"},
                {"start": 2, "end": 4, "label": "LOC"},
            ],
        },  # overlapping_entities
        {"id": "m", "text": "无标注"},  # missing_entities: the file has annotation elsewhere
        "",  # blank: ignored, not counted
        {"id": 7, "text": "张三", "entities": [{"start": 0, "end": 2, "label": "PER"}] * 2},
    ]  # fmt: skip
    folder = tmp_path / "ours"
    folder.mkdir()
    (folder / "train.jsonl").write_bytes(
        b"\xef\xbb\xbf" + _jsonl(lines).replace("\n", "\r\n").encode()
    )
    examples, skipped = read_tagging([str(folder / "train.jsonl")])
    assert [(e.id, e.lang, e.labelled, _spans(e)) for e in examples] == [
        ("a", "zh", True, [("江泽民", "PER"), ("北京", "LOC")]),
        ("train.jsonl:2", "", True, []),
        ("7", "", True, [("张三", "PER")]),  # an exact repeat counts once
    ]
    assert examples[0].entities == (Entity(0, 3, "PER"), Entity(4, 6, "LOC"))
    assert dict(skipped) == {
        "invalid_json": 2,
        "missing_text": 1,
        "empty_text": 1,
        "bad_entity": 6,
        "entity_text_mismatch": 1,
        "overlapping_entities": 1,
        "missing_entities": 1,
    }
    assert set(skipped) <= set(SKIP_REASONS)

    # gzip, whatever the name; a file with no annotation at all is a test file.
    records = [{"id": "t1", "text": "Apple Inc ."}, {"id": "t2", "text": "Paris"}]
    (folder / "test.jsonl.gz").write_bytes(gzip.compress(_jsonl(records).encode()))
    (folder / "zipped.dat").write_bytes(gzip.compress(_jsonl(lines[:1]).encode()))
    examples, skipped = read_tagging([str(folder / "test.jsonl.gz"), str(folder / "zipped.dat")])
    assert [(e.id, e.labelled, e.entities) for e in examples[:2]] == [
        ("t1", False, ()),
        ("t2", False, ()),
    ]
    assert _spans(examples[2]) == [("江泽民", "PER"), ("北京", "LOC")] and not skipped


def test_reads_cluener_with_inclusive_ends(tmp_path):
    train = [
        {
            "text": "浙商银行企业信贷部叶老桂博士则从另一个角度对五道门槛进行了解读。",
            "label": {"name": {"叶老桂": [[9, 11]]}, "company": {"浙商银行": [[0, 3]]}},
        },
        {"text": "张三和张三", "label": {"name": {"张三": [[0, 1], [3, 4]]}}},
        {"text": "北京", "label": {"address": {"北京": [[0, 1]]}, "game": {}}},
        {"text": "没有", "label": {}},  # labelled, no entity
        {"text": "叶老桂", "label": {"name": {"叶老桂": [[0, 3]]}}},  # bad_entity: past the end
        {"text": "叶老桂", "label": {"name": {"叶老": [[0, 2]]}}},  # entity_text_mismatch
        {"text": "叶老桂", "label": {"name": {"叶老桂": [0, 2]}}},  # bad_entity: not a span list
        {"text": "叶老桂", "label": ["name"]},  # bad_entity
        {"text": "叶老桂", "label": {"name": {"叶老桂": [[0, 2]]}, "x": {"老": [[1, 1]]}}},
    ]  # fmt: skip
    path = tmp_path / "train.json"
    path.write_text(_jsonl(train), encoding="utf-8")
    examples, skipped = read_tagging([str(path)])
    assert [(e.id, e.lang, _spans(e)) for e in examples] == [
        ("train.json:1", "zh", [("浙商银行", "company"), ("叶老桂", "name")]),
        ("train.json:2", "zh", [("张三", "name"), ("张三", "name")]),
        ("train.json:3", "zh", [("北京", "address")]),
        ("train.json:4", "zh", []),
    ]
    # The inclusive end 11 of 叶老桂 becomes the exclusive 12.
    assert examples[0].entities[1] == Entity(9, 12, "name")
    assert dict(skipped) == {
        "bad_entity": 3,
        "entity_text_mismatch": 1,
        "overlapping_entities": 1,
    }

    test = tmp_path / "test.json"
    test.write_text(_jsonl([{"id": 0, "text": "四川敦煌学"}, {"id": 1, "text": "尼日利亚"}]))
    examples, skipped = read_tagging([str(test)])
    assert [(e.id, e.text, e.labelled) for e in examples] == [
        ("0", "四川敦煌学", False),
        ("1", "尼日利亚", False),
    ]


def test_reads_english_conll_bio_iob1_and_bioes(tmp_path):
    conll = tmp_path / "eng.train"  # no CoNLL name: found by its first line
    conll.write_text(
        "-DOCSTART- -X- -X- O\n\n"
        "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\ncall NN I-NP O\n"
        "to TO B-VP O\nboycott VB I-VP O\nBritish JJ B-NP B-MISC\nlamb NN I-NP O\n. . O O\n"
        "\n\n"
        "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n\n"
        "-DOCSTART- -X- -X- O\n"
        "New B-LOC\nYork I-LOC\nand O\nLos B-LOC\nAngeles E-LOC\nUN S-ORG\n",
        encoding="utf-8",
    )
    examples, skipped = read_tagging([str(conll)])
    assert [(e.id, e.text, e.lang, _spans(e)) for e in examples] == [
        (
            "eng.train:3",
            "EU rejects German call to boycott British lamb .",
            "",
            [("EU", "ORG"), ("German", "MISC"), ("British", "MISC")],
        ),
        ("eng.train:14", "Peter Blackburn", "", [("Peter Blackburn", "PER")]),
        ("eng.train:18", "New York and Los Angeles UN", "", [
            ("New York", "LOC"), ("Los Angeles", "LOC"), ("UN", "ORG")]),
    ]  # fmt: skip
    assert examples[1].entities == (Entity(0, 15, "PER"),) and not skipped

    # IOB1 (CoNLL-2003's original files): I- begins an entity, B- only splits two
    # adjacent entities of one type; a tab-separated .iob file.
    iob1 = tmp_path / "iob1.iob"
    iob1.write_text(
        "Clinton\tI-PER\nand\tO\nBlair\tI-PER\nBrown\tB-PER\nin\tO\nLondon\tI-LOC\n"
        "Paris\tI-MISC\n\nBad line\tX-PER\nhere\tO\n\nno-tag\n",
        encoding="utf-8",
    )
    examples, skipped = read_tagging([str(iob1)])
    assert [_spans(e) for e in examples] == [
        [("Clinton", "PER"), ("Blair", "PER"), ("Brown", "PER"), ("London", "LOC"),
         ("Paris", "MISC")],
    ]  # fmt: skip
    assert dict(skipped) == {"bad_tag": 2}


def test_reads_chinese_per_character_conll(tmp_path):
    # People's Daily / MSRA NER layout: one character a line; digits and Latin
    # letters are single characters too, and join without spaces.
    lines = [
        "中 B-ORG", "共 I-ORG", "中 I-ORG", "央 I-ORG", "总 O", "书 O", "记 O", "、 O",
        "江 B-PER", "泽 I-PER", "民 I-PER", "", "1 O", "9 O", "9 O", "8 O", "年 O",
        "A B-ORG", "B I-ORG", "C I-ORG", "在 O", "北 B-LOC", "京 I-LOC",
    ]  # fmt: skip
    path = tmp_path / "msra_train.bio"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    examples, skipped = read_tagging([str(path)])
    assert [(e.id, e.text, e.lang, _spans(e)) for e in examples] == [
        ("msra_train.bio:1", "中共中央总书记、江泽民", "zh",
         [("中共中央", "ORG"), ("江泽民", "PER")]),
        ("msra_train.bio:13", "1998年ABC在北京", "zh", [("ABC", "ORG"), ("北京", "LOC")]),
    ]  # fmt: skip
    assert examples[0].entities == (Entity(0, 4, "ORG"), Entity(8, 11, "PER")) and not skipped

    # Word-segmented Chinese: spaces between words, none between single characters.
    words = tmp_path / "words.conll"
    words.write_text("中共中央 B-ORG\n总书记 O\n江 B-PER\n泽 I-PER\n民 I-PER\n。 O\n", "utf-8")
    examples, _ = read_tagging([str(words)])
    assert examples[0].text == "中共中央 总书记 江泽民。"
    assert _spans(examples[0]) == [("中共中央", "ORG"), ("江泽民", "PER")]


def test_conll_without_a_tag_column_is_unlabelled(tmp_path):
    path = tmp_path / "test.txt"
    path.write_text("中\n国\n\n人\n", encoding="utf-8")
    examples, skipped = read_tagging([str(path)])
    assert [(e.text, e.entities, e.labelled) for e in examples] == [
        ("中国", (), False),
        ("人", (), False),
    ]
    assert not skipped


def test_folders_mix_formats(tmp_path):
    (tmp_path / "a.conll").write_text("Paris B-LOC\n", encoding="utf-8")
    (tmp_path / "b.jsonl.gz").write_bytes(
        gzip.compress(_jsonl([{"id": "x", "text": "Rome", "entities": []}]).encode())
    )
    (tmp_path / "notes.md").write_text("ignored: not a data file name\n", encoding="utf-8")
    examples, _ = read_tagging([str(tmp_path)])
    assert [(e.id, e.text) for e in examples] == [("a.conll:1", "Paris"), ("x", "Rome")]


def test_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="nothing.jsonl"):
        read_tagging([str(tmp_path / "nothing.jsonl")])

    unknown = tmp_path / "notes.dat"
    unknown.write_text("Some prose, not a tagging file.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"notes\.dat: cannot recognise.*JSON Lines.*CoNLL"):
        read_tagging([str(unknown)])

    bad = tmp_path / "bad.jsonl"
    bad.write_text(_jsonl(["{oops", {"text": "x", "entities": [{"start": 0}]}]), "utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl: no readable rows \(2 skipped: .*"
                       r"'invalid_json': 1.*'bad_entity': 1"):  # fmt: skip
        read_tagging([str(bad)])

    empty = tmp_path / "empty.conll"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty\.conll: no readable rows \(0 skipped: the file"):
        read_tagging([str(empty)])


def test_peoples_daily_offsets_match_their_text(tmp_path):
    try:
        with gzip.open(REAL_FILE, "rt", encoding="utf-8") as f:
            head = list(itertools.islice(f, 2000))
    except FileNotFoundError:
        pytest.skip(f"{REAL_FILE} is not here")
    sample = tmp_path / "pd.jsonl.gz"
    sample.write_bytes(gzip.compress("".join(head).encode()))
    examples, skipped = read_tagging([str(sample)])
    records = [json.loads(line) for line in head if line.strip()]
    assert len(examples) == len(records) == 2000 and not skipped
    checked = 0
    for example, record in zip(examples, records, strict=True):
        assert example.id == record["id"] and example.text == record["text"]
        expected = sorted((e["start"], e["end"], e["label"]) for e in record["entities"])
        assert [(e.start, e.end, e.label) for e in example.entities] == expected
        for entity in record["entities"]:
            assert record["text"][entity["start"] : entity["end"]] == entity["text"]
            checked += 1
    assert checked > 1000
