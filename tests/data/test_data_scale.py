"""Data preparation at corpus scale: byte-range tasks, examples that depend on
the document and not on how the work was cut, resumption after SIGKILL, and
bad input that fails clearly instead of silently."""

from __future__ import annotations

import collections
import gzip
import json
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from albert_tf.data import sample_path
from albert_tf.data.corpus import ReadStats, read_located_documents
from albert_tf.data.input_tasks import plan_file_tasks
from albert_tf.data.shards import write_pretraining_data

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta") + (
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
)


def _random_corpus(rng: random.Random, documents: int) -> list[list[str]]:
    return [
        [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) + "."
            for _ in range(rng.randint(1, 6))
        ]
        for _ in range(documents)
    ]


def _write_text(path, docs: list[list[str]], rng: random.Random) -> None:
    """BERT's text format with the awkward parts: runs of blank lines, lines of
    spaces or an ideographic space, CRLF endings."""
    out = []
    for doc in docs:
        eol = "\r\n" if rng.random() < 0.3 else "\n"
        out.append("".join(s + eol for s in doc))
        out.append(rng.choice(["\n", "\n\n", "   \n", "\u3000\n", "\n \n"]))
    path.write_bytes("".join(out).encode("utf-8"))


def _write_jsonl(path, docs: list[list[str]]) -> None:
    lines = [json.dumps({"sentences": d}, ensure_ascii=False) for d in docs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _read_in_ranges(path, cuts: list[int]) -> list[tuple[int, list[str]]]:
    out = []
    for start, end in zip(cuts, cuts[1:] + [None], strict=True):
        out += list(read_located_documents(str(path), start=start, end=end))
    return out


@pytest.mark.parametrize("file_format", ["text", "jsonl"])
def test_byte_ranges_read_every_document_once(tmp_path, file_format):
    rng = random.Random(3)
    docs = _random_corpus(rng, 300)
    path = tmp_path / f"corpus.{file_format}"
    if file_format == "text":
        _write_text(path, docs, rng)
    else:
        _write_jsonl(path, docs)
    size = path.stat().st_size
    # The expected documents come from the generator, not from the reader.
    expected = [[s.strip() for s in d] for d in docs]
    for trial in range(20):
        count = rng.choice([1, 2, 7, 50, 300]) if trial else 1
        cuts = sorted({0, *(rng.randrange(1, size) for _ in range(count - 1))})
        located = _read_in_ranges(path, cuts)
        assert [d for _, d in located] == expected, cuts
        positions = [p for p, _ in located]
        assert positions == sorted(set(positions))
    # Positions are where documents start: the first sentence is right there.
    raw = path.read_bytes()
    for position, doc in located:
        if file_format == "jsonl":
            line = raw[position:].split(b"\n", 1)[0]
            assert json.loads(line)["sentences"] == doc, position
        else:
            assert raw[position:].startswith(doc[0].encode()), position


def test_plan_cuts_files_into_bounded_tasks(tmp_path):
    big, small = tmp_path / "big.txt", tmp_path / "small.txt.gz"
    big.write_bytes(b"x y.\n\n" * 10_000)  # 60,000 bytes
    with gzip.open(small, "wb") as fh:
        fh.write(b"x y.\n\n" * 10_000)
    tasks = plan_file_tasks([str(big), str(small)], task_bytes=16_384, pool_bytes=4096)
    ranges = [(t.name, t.start, t.end) for t in tasks]
    assert ranges == [
        ("big.txt", 0, 16_384),
        ("big.txt", 16_384, 32_768),
        ("big.txt", 32_768, 49_152),
        ("big.txt", 49_152, None),
        ("small.txt.gz", 0, None),  # compressed: one streamed task
    ]
    with pytest.raises(ValueError, match="multiple of pool_bytes"):
        plan_file_tasks([str(big)], task_bytes=5000, pool_bytes=4096)


def _records(output_dir) -> collections.Counter:
    files = sorted(str(p) for p in output_dir.glob("pretrain-*.tfrecord"))
    return collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(files))


@pytest.mark.parametrize("sentence_task", ["nsp", "sop"])
def test_examples_do_not_depend_on_how_the_work_is_cut(tmp_path, spm_dir, sentence_task):
    common = dict(
        tokenizer=spm_dir,
        inputs=[sample_path("en")],
        max_seq_length=48,
        sentence_task=sentence_task,
        dupe_factor=2,
        seed=5,
        pool_bytes=16_384,
        show_progress=False,
        log=None,
    )
    one = write_pretraining_data(
        output_dir=str(tmp_path / "one"), task_bytes=1 << 30, num_shards=1, **common
    )
    many = write_pretraining_data(
        output_dir=str(tmp_path / "many"), task_bytes=16_384, num_shards=3, **common
    )
    workers = write_pretraining_data(
        output_dir=str(tmp_path / "workers"),
        task_bytes=32_768,
        num_shards=2,
        num_workers=2,
        **common,
    )
    assert (one.tasks, many.tasks, workers.tasks) == (1, 19, 10)
    reference = _records(tmp_path / "one")
    assert sum(reference.values()) == one.examples > 2000
    assert _records(tmp_path / "many") == reference
    assert _records(tmp_path / "workers") == reference
    assert one.documents == many.documents == workers.documents == 42
    # Another seed gives other examples (the comparison above can fail).
    other = write_pretraining_data(
        output_dir=str(tmp_path / "other"),
        task_bytes=16_384,
        num_shards=1,
        **(common | {"seed": 6}),
    )
    assert _records(tmp_path / "other") != reference and other.examples > 0


def _cli(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "albert_tf.create_pretraining_data", *args]


def test_killed_preparation_resumes_and_writes_the_same_shards(tmp_path, spm_dir):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(open(sample_path("en"), "rb").read() * 3)  # noqa: SIM115
    args = [
        f"--input={corpus}",
        f"--tokenizer_dir={spm_dir}",
        "--max_seq_length=64",
        "--dupe_factor=3",
        "--num_shards=2",
        "--task_bytes=16384",
        "--pool_bytes=16384",
    ]
    clean = tmp_path / "clean"
    done = subprocess.run(_cli([*args, f"--output_dir={clean}"]), capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    tasks = json.loads((clean / "metadata.json").read_text())["summary"]["tasks"]
    assert tasks == 56

    out = tmp_path / "resumed"
    process = subprocess.Popen(
        _cli([*args, f"--output_dir={out}"]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    parts = out / ".parts"
    deadline = time.time() + 300
    while time.time() < deadline and len(list(parts.glob("done-*.json"))) < tasks // 3:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = len(list(parts.glob("done-*.json")))
    assert 0 < finished < tasks, "the run was not interrupted part-way"
    assert not (out / "metadata.json").exists()
    assert not list(out.glob("pretrain-*.tfrecord"))  # nothing presented as complete

    again = subprocess.run(
        _cli([*args, f"--output_dir={out}"]), capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"resuming: {finished} of {tasks} tasks were already done" in again.stdout
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["summary"]["resumed_tasks"] == finished
    clean_meta = json.loads((clean / "metadata.json").read_text())
    for key in ("documents", "sentences", "examples", "label_counts"):
        assert meta["summary"][key] == clean_meta["summary"][key]
    for shard in sorted(clean.glob("pretrain-*.tfrecord")):
        assert (out / shard.name).read_bytes() == shard.read_bytes()
    assert not parts.exists()

    # The same command once more: nothing to redo.
    third = subprocess.run(
        _cli([*args, f"--output_dir={out}"]), capture_output=True, text=True, timeout=600
    )
    assert third.returncode == 0 and "already holds these shards" in third.stdout


def test_full_sentences_cross_documents_and_keep_every_token(tmp_path, toy_tokenizer):
    docs = _random_corpus(random.Random(1), 200)
    path = tmp_path / "c.jsonl"
    _write_jsonl(path, docs)
    max_seq_length = 64
    summary = write_pretraining_data(
        tokenizer=toy_tokenizer,
        output_dir=str(tmp_path / "out"),
        inputs=[str(path)],
        max_seq_length=max_seq_length,
        sentence_task="none",
        packing="full_sentences",
        dupe_factor=1,
        num_shards=1,
        show_progress=False,
        log=None,
    )
    special = {toy_tokenizer.cls_id, toy_tokenizer.sep_id}
    content, lengths, inner_seps = 0, [], 0
    for record in _records(tmp_path / "out").elements():
        features = tf.train.Example.FromString(record).features.feature
        ids = list(features["token_ids"].int64_list.value)
        lengths.append(len(ids))
        content += sum(t not in special for t in ids)
        inner_seps += ids[1:-1].count(toy_tokenizer.sep_id)
    # Every token of every sentence is in some input (none is longer than one).
    pieces = toy_tokenizer.tokenize(tf.constant([s for d in docs for s in d]))
    assert content == int(tf.size(pieces.flat_values))
    assert inner_seps > 50  # inputs run on across documents
    assert summary.examples == len(lengths)
    # Inputs are filled up, unlike DOC-SENTENCES ones, which stop with their
    # (short) documents: RoBERTa's reason for comparing the two.
    doc_sentences = write_pretraining_data(
        tokenizer=toy_tokenizer,
        output_dir=str(tmp_path / "doc"),
        inputs=[str(path)],
        max_seq_length=max_seq_length,
        sentence_task="none",
        dupe_factor=1,
        num_shards=1,
        short_seq_prob=0.0,
        show_progress=False,
        log=None,
    )
    assert sum(lengths) / len(lengths) > 0.85 * max_seq_length
    assert doc_sentences.examples > 1.5 * summary.examples
    with pytest.raises(ValueError, match="sentence_task='none'"):
        write_pretraining_data(
            tokenizer=toy_tokenizer,
            output_dir=str(tmp_path / "x"),
            inputs=[str(path)],
            packing="full_sentences",
        )


def test_truncated_gzip_names_the_file_and_the_offset(tmp_path, toy_tokenizer):
    data = gzip.compress(open(sample_path("en"), "rb").read())  # noqa: SIM115
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"broken\.jsonl\.gz.*truncated or damaged after [\d,]+"):
        write_pretraining_data(
            tokenizer=toy_tokenizer,
            output_dir=str(tmp_path / "out"),
            inputs=[str(broken)],
            show_progress=False,
            log=None,
        )
    assert not (tmp_path / "out" / "metadata.json").exists()


def test_empty_file_and_long_line_are_counted(tmp_path, toy_tokenizer):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    summary = write_pretraining_data(
        tokenizer=toy_tokenizer,
        output_dir=str(tmp_path / "out"),
        inputs=[sample_path("en"), str(empty)],
        dupe_factor=1,
        num_shards=1,
        show_progress=False,
        log=None,
    )
    assert summary.documents == 42 and summary.skipped["empty_file"] == 1
    # A line without a newline longer than the limit is drained, not held.
    long = tmp_path / "long.txt"
    long.write_bytes(b"Short one.\nShort two.\n\n" + b"x" * 300_000)
    stats = ReadStats()
    docs = list(read_located_documents(str(long), stats=stats, max_line_bytes=100_000))
    assert docs == [(0, ["Short one.", "Short two."])]
    assert stats.skipped == {"line_too_long": 1}


def test_unwritable_output_directory_is_an_error_before_work(tmp_path, toy_tokenizer):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(OSError, match="cannot create the output directory.*--output_dir"):
        write_pretraining_data(
            tokenizer=toy_tokenizer,
            output_dir=str(blocker / "out"),
            inputs=[sample_path("en")],
            show_progress=False,
            log=None,
        )


def test_a_finished_run_is_not_redone_and_another_recipe_starts_over(tmp_path, spm_dir):
    common = dict(
        tokenizer=spm_dir,
        output_dir=str(tmp_path / "out"),
        inputs=[sample_path("en")],
        max_seq_length=48,
        dupe_factor=1,
        num_shards=1,
        show_progress=False,
    )
    lines: list[str] = []
    first = write_pretraining_data(log=lines.append, **common)
    again = write_pretraining_data(log=lines.append, **common)
    assert again.examples == first.examples and "already holds" in lines[-1]
    other = write_pretraining_data(log=lines.append, **(common | {"max_seq_length": 32}))
    assert other.examples > first.examples
    assert json.loads((tmp_path / "out" / "metadata.json").read_text())["max_seq_length"] == 32
    shutil.rmtree(tmp_path / "out")


def test_a_tfds_split_is_cut_into_slices_that_read_every_example_once(tmp_path):
    import tensorflow_datasets as tfds

    from albert_tf.data.input_tasks import plan_tfds_tasks
    from albert_tf.data.tfds_corpus import AlbertCorpus

    manual = tmp_path / "manual"
    manual.mkdir()
    docs = _random_corpus(random.Random(4), 230)
    (manual / "c.txt").write_text("".join("\n".join(d) + "\n\n" for d in docs))
    data_dir = str(tmp_path / "tfds")
    AlbertCorpus(data_dir=data_dir).download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual))
    )
    tasks = plan_tfds_tasks(
        "albert_corpus", "train", data_dir=data_dir, task_documents=100, pool_documents=50
    )
    assert [t.source for t in tasks] == ["train[0:100]", "train[100:200]", "train[200:230]"]
    located = [item for t in tasks for item in t.documents(ReadStats())]
    # Example indices continue across slices; every document is read once.
    assert [index for index, _ in located] == list(range(230))
    assert sorted(map(tuple, (d for _, d in located))) == sorted(map(tuple, docs))
    # A split expression is one task.
    (whole,) = plan_tfds_tasks("albert_corpus", "train[:10%]", data_dir=data_dir)
    assert whole.source == "train[:10%]"
    with pytest.raises(ValueError, match="no top-level Text feature.*--tfds_text_key"):
        list(_tfds_without_text(tmp_path))


def _tfds_without_text(tmp_path):
    """A real tfds dataset whose only feature is an integer."""
    import tensorflow_datasets as tfds

    from albert_tf.data.tfds_corpus import tfds_located_documents

    class NumbersOnly(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return self.dataset_info_from_configs(
                features=tfds.features.FeaturesDict({"n": tfds.features.Scalar(tf.int64)})
            )

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for i in range(3):
                yield i, {"n": i}

    data_dir = str(tmp_path / "numbers")
    NumbersOnly(data_dir=data_dir).download_and_prepare()
    return tfds_located_documents("numbers_only", data_dir=data_dir)
