"""Corpus reading, sentence splitting, bad input and the offline tfds builder."""

from __future__ import annotations

import gzip
import json
import os
import pathlib

import pytest
import tensorflow_datasets as tfds

from albert_tf.data import sample_path
from albert_tf.data.corpus import (
    ReadStats,
    read_corpus,
    read_documents,
    split_sentences,
)
from albert_tf.data.inputs import resolve_inputs
from albert_tf.data.tfds_corpus import AlbertCorpus, tfds_documents


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello there. General Kenobi!", ["Hello there.", "General Kenobi!"]),
        ("Mr. Darcy bowed. Dr. J. Watson left.", ["Mr. Darcy bowed.", "Dr. J. Watson left."]),
        (
            "It costs 3.50 now. See example.com today.",
            ["It costs 3.50 now.", "See example.com today."],
        ),
        ('She said "Go!" Then she went.', ['She said "Go!"', "Then she went."]),
        ("Is it? yes, it is.", ["Is it? yes, it is."]),
        ("Wait... What now?", ["Wait...", "What now?"]),
        ("Line one\nLine two", ["Line one", "Line two"]),
        ("我爱北京。天安门很大！真的吗？", ["我爱北京。", "天安门很大！", "真的吗？"]),
        ("他说：“走吧。”我们就走了。", ["他说：“走吧。”", "我们就走了。"]),
        ("「好！」她说；然后离开……再见", ["「好！」", "她说；", "然后离开……", "再见"]),
        ("混合 English. 中文。", ["混合 English.", "中文。"]),
        ("", []),
        ("   \n  ", []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_split_sentences_never_loses_text():
    text = "A b. C d! 中文。“引号”后面？ e.g. this… And 3.14 x."
    joined = "".join(split_sentences(text)).replace(" ", "")
    assert joined == text.replace(" ", "")


def _write(path, data: bytes, gz: bool = False) -> str:
    with (gzip.open if gz else open)(path, "wb") as fh:
        fh.write(data)
    return str(path)


@pytest.mark.parametrize("gz", [False, True])
def test_text_format(tmp_path, gz):
    p = _write(tmp_path / "c.txt", b"A one.\nA two.\n\n\n\nB one.\nB two.\n\n", gz)
    stats = ReadStats()
    assert list(read_documents(p, stats=stats)) == [
        ["A one.", "A two."],
        ["B one.", "B two."],
    ]
    assert (stats.documents, stats.sentences, sum(stats.skipped.values())) == (2, 4, 0)


@pytest.mark.parametrize("gz", [False, True])
def test_jsonl_format(tmp_path, gz):
    lines = [
        {"id": "a", "sentences": ["One.", "Two."]},
        {"text": "Split me. Please."},
    ]
    data = "\n".join(json.dumps(x) for x in lines).encode()
    p = _write(tmp_path / "c.data", data, gz)  # format from content, not name
    assert list(read_documents(p)) == [["One.", "Two."], ["Split me.", "Please."]]


def test_bad_input_is_counted_not_fatal(tmp_path):
    good = json.dumps({"sentences": ["Fine.", "Also fine."]}).encode()
    lines = [
        good,
        b'{"sentences": ["bad \xff\xfe utf8"]}',  # invalid UTF-8
        b"{not json",  # invalid JSON
        json.dumps({"sentences": "not a list"}).encode(),  # invalid record
        json.dumps([1, 2]).encode(),  # invalid record
        json.dumps({"sentences": []}).encode(),  # empty document
        json.dumps({"sentences": ["", "  "]}).encode(),  # 2 empty sentences, empty doc
        json.dumps({"sentences": ["Only one."]}).encode(),  # kept: 1-sentence doc
        b"",  # blank line: ignored, no content
        json.dumps({"sentences": ["x" * 500]}).encode(),  # sentence too long
        b'{"sentences": ["' + b"y" * 5000 + b'"]}',  # physical line too long
        good,
    ]
    p = _write(tmp_path / "bad.jsonl", b"\n".join(lines) + b"\n")
    stats = ReadStats()
    docs = list(read_documents(p, stats=stats, max_line_bytes=2000, max_sentence_chars=300))
    assert docs == [["Fine.", "Also fine."], ["Only one."], ["Fine.", "Also fine."]]
    assert dict(stats.skipped) == {
        "invalid_utf8": 1,
        "invalid_json": 1,
        "invalid_record": 2,
        "empty_document": 3,
        "empty_sentence": 2,
        "sentence_too_long": 1,
        "line_too_long": 1,
    }
    assert "skipped (invalid_utf8): 1" in stats.summary()


def test_text_format_bad_lines(tmp_path):
    data = b"Good one.\n\xc3\x28 broken\nGood two.\n" + b"z" * 3000 + b"\nLast.\n"
    stats = ReadStats()
    docs = list(read_documents(_write(tmp_path / "t.txt", data), stats=stats, max_line_bytes=1000))
    assert docs == [["Good one.", "Good two.", "Last."]]
    assert dict(stats.skipped) == {"invalid_utf8": 1, "line_too_long": 1}


def test_long_sentence_is_resplit(tmp_path):
    long_line = " ".join(["This is a sentence."] * 40)
    p = _write(tmp_path / "t.txt", long_line.encode())
    stats = ReadStats()
    docs = list(read_documents(p, stats=stats, max_sentence_chars=100))
    assert docs == [["This is a sentence."] * 40]
    assert not stats.skipped


def test_missing_files_raise_before_work(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        list(read_documents(str(tmp_path / "nope.txt")))
    with pytest.raises(FileNotFoundError, match="missing"):
        resolve_inputs([sample_path("en"), str(tmp_path / "missing*.txt")])
    with pytest.raises(FileNotFoundError):
        list(read_corpus(str(tmp_path / "*.jsonl")))


def test_embedded_samples():
    for lang, n_docs in (("en", 42), ("zh", 284)):
        stats = ReadStats()
        docs = list(read_documents(sample_path(lang), stats=stats))
        assert len(docs) == n_docs
        assert not stats.skipped
        assert os.path.getsize(sample_path(lang)) < 400_000
    readme = os.path.join(os.path.dirname(sample_path("en")), "README.md")
    text = pathlib.Path(readme).read_text(encoding="utf-8")
    assert "Mozilla Public License" in text and "public domain" in text


def _build(tmp_path, files: dict[str, bytes]) -> str:
    manual = tmp_path / "manual"
    for rel, data in files.items():
        (manual / rel).parent.mkdir(parents=True, exist_ok=True)
        (manual / rel).write_bytes(data)
    data_dir = str(tmp_path / "tfds")
    AlbertCorpus(data_dir=data_dir).download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual))
    )
    return data_dir


def test_tfds_builder_offline(tmp_path):
    jsonl = json.dumps({"sentences": ["J one.", "J two."]}).encode()
    data_dir = _build(
        tmp_path,
        {
            "train/a.txt": b"A one.\nA two.\n\nB one.\n\xff\n",
            "train/sub/b.jsonl.gz": gzip.compress(jsonl),
            "validation/v.txt": b"V one.\nV two.\n",
            "README.md": b"ignored",
        },
    )
    ds, info = tfds.load(
        "albert_corpus", data_dir=data_dir, split="train", with_info=True, download=False
    )
    texts = sorted(ex["text"].decode() for ex in tfds.as_numpy(ds))
    assert texts == ["A one.\nA two.", "B one.", "J one.\nJ two."]
    assert set(info.splits) == {"train", "validation"}
    # The same data through the generic tfds reader, sentences preserved.
    stats = ReadStats()
    docs = sorted(
        tfds_documents("albert_corpus", split="validation", data_dir=data_dir, stats=stats)
    )
    assert docs == [["V one.", "V two."]]
    assert stats.documents == 1


def test_tfds_builder_without_split_folders(tmp_path):
    data_dir = _build(tmp_path, {"x.txt": b"Only. Line.\n"})
    docs = list(tfds_documents("albert_corpus", data_dir=data_dir))
    assert docs == [["Only. Line."]]  # lines are sentences for albert_corpus
    docs = list(tfds_documents("albert_corpus", data_dir=data_dir, splitter=split_sentences))
    assert docs == [["Only.", "Line."]]


def test_tfds_builder_missing_manual_dir(tmp_path):
    with pytest.raises(Exception, match="manual"):
        AlbertCorpus(data_dir=str(tmp_path / "d")).download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=str(tmp_path / "absent"))
        )


def test_build_corpus_cli(tmp_path):
    import subprocess
    import sys

    manual = tmp_path / "manual"
    manual.mkdir()
    (manual / "a.txt").write_text("One.\nTwo.\n\nThree.\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.build_corpus",
            f"--manual_dir={manual}",
            f"--data_dir={tmp_path / 'tfds'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "train: 2 documents" in result.stdout
