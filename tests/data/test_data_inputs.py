"""One input layer: resolve_inputs, and one reader behind tokenizer training and
pretraining data."""

from __future__ import annotations

import gzip
import json
import os
import pathlib

import pytest

from albert_tf.data import ReadStats, iter_sentences, read_corpus, sample_path
from albert_tf.data.input_tasks import plan_file_tasks
from albert_tf.data.inputs import resolve_inputs, sample_language
from albert_tf.data.shards import write_pretraining_data
from albert_tf.tasks.multiple_choice.data import read_multiple_choice

# Written by the tests below in three encodings; every reader must give back
# exactly these documents.
DOCUMENTS = [
    ["The first document starts here.", "It has a second sentence.", "And a third one."],
    ["第二篇文档。", "它有两句话。"],
    ["A third document, café included.", "Its last sentence."],
]
SENTENCES = [s for d in DOCUMENTS for s in d]


def _jsonl_bytes() -> bytes:
    lines = [
        json.dumps({"id": i, "sentences": d}, ensure_ascii=False) for i, d in enumerate(DOCUMENTS)
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _text_bytes() -> bytes:
    return "\n\n".join("\n".join(d) for d in DOCUMENTS).encode("utf-8") + b"\n"


@pytest.fixture()
def corpus_files(tmp_path: pathlib.Path) -> dict[str, str]:
    """The same corpus as gzip without a .gz suffix, JSON Lines named .txt, and
    plain text: the names mislead on purpose, only the content tells."""
    files = {
        "gzip_no_suffix": (tmp_path / "corpus.data", gzip.compress(_jsonl_bytes())),
        "jsonl_named_txt": (tmp_path / "records.txt", _jsonl_bytes()),
        "plain_text": (tmp_path / "plain.txt", _text_bytes()),
        "gzip_text_named_jsonl": (tmp_path / "text.jsonl", gzip.compress(_text_bytes())),
    }
    for path, data in files.values():
        path.write_bytes(data)
    return {name: str(path) for name, (path, _) in files.items()}


@pytest.mark.parametrize(
    "name", ["gzip_no_suffix", "jsonl_named_txt", "plain_text", "gzip_text_named_jsonl"]
)
def test_tokenizer_training_and_pretraining_read_a_file_identically(corpus_files, name):
    path = corpus_files[name]
    # Tokenizer training (train_tokenizer, prepare_pretraining_data).
    tok_stats = ReadStats()
    assert list(iter_sentences([path], tok_stats)) == SENTENCES
    # pretrain --corpus (prepare_pretraining_data reads through read_corpus).
    corpus_stats = ReadStats()
    assert list(read_corpus(path, stats=corpus_stats, what="corpus")) == DOCUMENTS
    # create_pretraining_data / write_pretraining_data: what a ShardWriter reads.
    shard_stats = ReadStats()
    (task,) = plan_file_tasks([path])
    assert [doc for _, doc in task.documents(shard_stats)] == DOCUMENTS
    for stats in (tok_stats, corpus_stats, shard_stats):
        assert (stats.documents, stats.sentences, dict(stats.skipped)) == (3, 7, {})


def test_shards_count_the_same_documents_for_every_encoding(corpus_files, toy_tokenizer, tmp_path):
    results = {}
    for name, path in corpus_files.items():
        summary = write_pretraining_data(
            tokenizer=toy_tokenizer,
            output_dir=str(tmp_path / name),
            inputs=path,
            max_seq_length=32,
            dupe_factor=1,
            num_shards=1,
            show_progress=False,
            log=None,
        )
        assert (summary.documents, summary.sentences, dict(summary.skipped)) == (3, 7, {})
        results[name] = summary.examples
    # The examples themselves differ: a document's identity is its file and
    # offset (tests/data/test_data_scale.py), which differ between encodings.
    assert len(results) == 4 and min(results.values()) > 0


def test_resolve_files_globs_and_comma_lists(tmp_path):
    for name in ("b.jsonl", "a.jsonl", "c.txt"):
        (tmp_path / name).write_text("x\n")
    a, b, c = (str(tmp_path / n) for n in ("a.jsonl", "b.jsonl", "c.txt"))
    assert resolve_inputs(c) == [c]
    assert resolve_inputs(pathlib.Path(c)) == [c]
    # A glob's matches come sorted; specs keep their order; repeats are dropped.
    assert resolve_inputs([c, str(tmp_path / "*.jsonl")]) == [c, a, b]
    assert resolve_inputs(f"{b}, {a},{b}") == [b, a]
    # A file whose name holds glob characters is taken literally.
    odd = tmp_path / "part[1].txt"
    odd.write_text("x\n")
    assert resolve_inputs(str(odd)) == [str(odd)]


def test_resolve_folders_recursively(tmp_path):
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / ".hidden").mkdir()
    for rel in (
        "z.jsonl",
        "a.txt",
        "sub/m.json",
        "sub/deeper/n.gz",
        "sub/README.md",
        "sub/.secret.txt",
        ".hidden/h.txt",
    ):
        (tmp_path / rel).write_text("x\n")
    expected = [
        os.path.join(str(tmp_path), rel)
        for rel in ("a.txt", "z.jsonl", "sub/m.json", "sub/deeper/n.gz")
    ]
    assert resolve_inputs(str(tmp_path)) == expected
    assert resolve_inputs(str(tmp_path), suffixes=(".md",)) == [str(tmp_path / "sub/README.md")]


def test_resolve_samples():
    assert resolve_inputs("sample:en") == [sample_path("en")]
    assert resolve_inputs(["sample:zh", "sample:en"]) == [sample_path("zh"), sample_path("en")]
    assert sample_path("zh").endswith(os.path.join("sample", "zh_sample.jsonl"))
    assert os.path.isfile(sample_path("en")) and os.path.isfile(sample_path("zh"))
    assert [sample_language(s) for s in ("sample:en", "sample:zh", "en.txt")] == ["en", "zh", None]
    with pytest.raises(ValueError, match="no embedded sample for 'fr'; use 'en' or 'zh'"):
        resolve_inputs("sample:fr")


def test_missing_inputs_name_the_path_and_the_fix(tmp_path):
    present = tmp_path / "here.txt"
    present.write_text("x\n")
    missing = str(tmp_path / "nowhere.jsonl")
    no_match = str(tmp_path / "none-*.txt")
    with pytest.raises(FileNotFoundError) as err:
        resolve_inputs([str(present), missing, no_match], what="corpus")
    message = str(err.value)
    assert message.startswith(f"corpus file not found: {missing}, {no_match} (")
    assert "folders" in message and "sample:en / sample:zh" in message
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(FileNotFoundError, match="empty_dir"):
        resolve_inputs(str(tmp_path / "empty_dir"))
    with pytest.raises(FileNotFoundError, match="no input files given"):
        resolve_inputs(" , ")
    # The readers fail before reading anything, with the same message.
    with pytest.raises(FileNotFoundError, match=f"corpus file not found: {missing}"):
        next(read_corpus(missing, what="corpus"))
    with pytest.raises(FileNotFoundError, match=f"input file not found: {missing}"):
        next(iter_sentences([missing]))


def test_multiple_choice_data_uses_the_same_resolver(tmp_path):
    folder = tmp_path / "mc" / "nested"
    folder.mkdir(parents=True)
    item = {"id": "q", "context": "It rains.", "question": "Take an _ .", "options": ["a", "b"]}
    (folder / "items.jsonl").write_text(json.dumps(item | {"label": 1}) + "\n")
    # gzip detected by content here too, whatever the name.
    (folder / "more.txt").write_bytes(
        gzip.compress((json.dumps(item | {"label": 0}) + "\n").encode())
    )
    items, skipped = read_multiple_choice(str(tmp_path / "mc"))
    assert [i.label for i in items] == [1, 0] and not skipped  # more.txt sorts before items.jsonl
    # On this path "sample:en" is a fine-tuning task, not a corpus file.
    with pytest.raises(FileNotFoundError, match="multiple-choice data file not found: sample:en"):
        read_multiple_choice("sample:en")
