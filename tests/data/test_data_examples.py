"""Pair building (SOP / NSP / none) on id sequences, and the shard writer."""

from __future__ import annotations

import collections
import glob
import json
import math
import os
import random

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import sample_path
from albert_tf.data.examples import (
    PretrainingExample,
    create_examples_from_document,
    serialize_example,
    truncate_seq_pair,
)
from albert_tf.data.packed_document import PackedDocument
from albert_tf.data.shards import write_pretraining_data

CLS, SEP = 2, 3
DOC_STRIDE = 100_000


def make_documents(num_docs: int, rng: random.Random, max_sentence: int = 12):
    """Documents whose token ids are consecutive integers: doc d starts at
    d * DOC_STRIDE + 10, so any id tells its document and its position."""
    docs = []
    for d in range(num_docs):
        nxt = d * DOC_STRIDE + 10
        doc = []
        for _ in range(rng.randint(2, 30)):
            n = rng.randint(1, max_sentence)
            doc.append(list(range(nxt, nxt + n)))
            nxt += n
        docs.append(doc)
    return docs


def split_example(ex):
    ids, segs = ex.token_ids, ex.segment_ids
    assert ids[0] == CLS and ids[-1] == SEP
    a_end = ids.index(SEP)
    a, b = ids[1:a_end], ids[a_end + 1 : -1]
    assert segs == [0] * (a_end + 1) + [1] * (len(ids) - a_end - 1)
    return a, b


def all_examples(docs, task, seed=0, **kw):
    rng = random.Random(seed)
    out = []
    for i in range(len(docs)):
        out += create_examples_from_document(
            docs, i, cls_id=CLS, sep_id=SEP, rng=rng, sentence_task=task, **kw
        )
    return out


def is_run(xs):
    return all(y == x + 1 for x, y in zip(xs, xs[1:], strict=False))


@pytest.mark.parametrize("max_seq_length", [16, 64])
def test_sop_pairs_are_ordered_segments(max_seq_length):
    docs = make_documents(300, random.Random(1))
    examples = all_examples(docs, "sop", max_seq_length=max_seq_length)
    assert len(examples) > 500
    for ex in examples:
        assert len(ex.token_ids) <= max_seq_length
        a, b = split_example(ex)
        assert a and b
        # Both segments are contiguous runs of one document (truncation only
        # removes tokens from the ends).
        assert is_run(a) and is_run(b)
        assert a[0] // DOC_STRIDE == b[0] // DOC_STRIDE
        if ex.sentence_order_label == 0:
            assert a[-1] < b[0]
        else:
            assert b[-1] < a[0]


def test_sop_label_balance():
    docs = make_documents(400, random.Random(2))
    examples = all_examples(docs, "sop", max_seq_length=32, seed=3)
    n = len(examples)
    frac = sum(e.sentence_order_label for e in examples) / n
    # Each pair is swapped with probability 1/2: binomial sd = sqrt(.25/n).
    assert abs(frac - 0.5) < 4 * math.sqrt(0.25 / n), (frac, n)


def test_short_seq_prob():
    # Many 1-token sentences: with the full target, a document's first example
    # always fills max_seq_length; it is shorter only when a short target
    # (uniform in [2, max - 3]) was drawn: p = 0.1 * (1 - 1 / (max - 4)).
    max_len = 20
    docs = [[[d * DOC_STRIDE + 10 + i] for i in range(60)] for d in range(3000)]
    rng = random.Random(4)
    short = 0
    for i in range(len(docs)):
        first = create_examples_from_document(
            docs, i, max_seq_length=max_len, cls_id=CLS, sep_id=SEP, rng=rng
        )[0]
        short += len(first.token_ids) < max_len
    expected = 0.1 * (1 - 1 / (max_len - 4))
    sd = math.sqrt(expected * (1 - expected) / len(docs))
    assert abs(short / len(docs) - expected) < 4 * sd


def test_truncation_fits_and_is_random_end():
    # A 100-token first sentence fills a chunk alone: it is split inside and
    # cut to fit, sometimes at the front and sometimes at the back.
    docs = [[list(range(10, 110)), list(range(110, 210))]]
    fronts = backs = 0
    for seed in range(200):
        ex = all_examples(docs, "sop", seed=seed, max_seq_length=23, short_seq_prob=0)[0]
        assert len(ex.token_ids) == 23
        a, b = split_example(ex)
        fronts += min(a + b) > 10
        backs += max(a + b) < 109
    assert fronts > 50 and backs > 50


def test_nsp_random_segments_come_from_other_documents():
    docs = make_documents(200, random.Random(5))
    examples = all_examples(docs, "nsp", max_seq_length=32)
    labels = collections.Counter(e.sentence_order_label for e in examples)
    assert labels[0] > 100 and labels[1] > 100
    for ex in examples:
        a, b = split_example(ex)
        same_doc = a[0] // DOC_STRIDE == b[0] // DOC_STRIDE
        if ex.sentence_order_label == 0:
            assert same_doc and a[-1] < b[0]
        else:
            assert not same_doc


def test_none_mode_single_segment():
    docs = make_documents(50, random.Random(6))
    examples = all_examples(docs, "none", max_seq_length=24)
    for ex in examples:
        assert ex.token_ids[0] == CLS and ex.token_ids[-1] == SEP
        assert SEP not in ex.token_ids[1:-1]
        assert set(ex.segment_ids) == {0} and ex.sentence_order_label == 0
        assert len(ex.token_ids) <= 24 and is_run(ex.token_ids[1:-1])


def test_one_sentence_documents_are_counted():
    docs = [[[10, 11, 12]], [[20, 21], [22, 23]]]
    stats = collections.Counter()
    rng = random.Random(0)
    kw = dict(max_seq_length=16, cls_id=CLS, sep_id=SEP, rng=rng, stats=stats)
    assert create_examples_from_document(docs, 0, **kw) == []
    assert stats["one_sentence_document"] == 1
    assert create_examples_from_document(docs, 0, sentence_task="none", **kw)


def test_same_seed_same_examples():
    docs = make_documents(30, random.Random(7))
    a = all_examples(docs, "sop", seed=11, max_seq_length=32)
    b = all_examples(docs, "sop", seed=11, max_seq_length=32)
    c = all_examples(docs, "sop", seed=12, max_seq_length=32)
    assert a == b and a != c


# --------------------------------------------------------------------------
# The writer
# --------------------------------------------------------------------------


def read_records(output_dir):
    files = sorted(glob.glob(os.path.join(output_dir, "pretrain-*.tfrecord")))
    out = []
    for record in tf.data.TFRecordDataset(files):
        ex = tf.train.Example.FromString(record.numpy())
        f = ex.features.feature
        out.append(
            (
                list(f["token_ids"].int64_list.value),
                list(f["segment_ids"].int64_list.value),
                f["sentence_order_label"].int64_list.value[0],
            )
        )
    return files, out


def test_write_pretraining_data(tmp_path, toy_tokenizer):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(
        b"First sentence here.\nSecond one follows.\nThird.\n\n"
        b"\xff\xfe broken line\n\nLonely sentence.\n\n"
    )
    out = str(tmp_path / "out")
    summary = write_pretraining_data(
        tokenizer=toy_tokenizer,
        output_dir=out,
        inputs=[sample_path("en"), str(bad)],
        max_seq_length=64,
        dupe_factor=2,
        num_shards=3,
        seed=1,
        show_progress=False,
        log=None,
    )
    files, records = read_records(out)
    assert len(files) == 3 and len(records) == summary.examples > 100
    assert summary.documents == 42 + 2
    assert summary.skipped == {"invalid_utf8": 1, "one_sentence_document": 1}
    for ids, segs, label in records:
        assert len(ids) == len(segs) <= 64 and ids[0] == toy_tokenizer.cls_id
        assert label in (0, 1)
    meta = json.load(open(os.path.join(out, "metadata.json")))  # noqa: SIM115
    assert meta["max_seq_length"] == 64 and meta["summary"]["examples"] == len(records)
    assert os.path.exists(os.path.join(out, "masking_vocab.json"))
    assert not os.path.exists(os.path.join(out, ".parts"))

    # Same inputs and seed: byte-identical shards.
    out2 = str(tmp_path / "out2")
    write_pretraining_data(
        tokenizer=toy_tokenizer,
        output_dir=out2,
        inputs=[sample_path("en"), str(bad)],
        max_seq_length=64,
        dupe_factor=2,
        num_shards=3,
        seed=1,
        show_progress=False,
        log=None,
    )
    for f in files:
        other = os.path.join(out2, os.path.basename(f))
        assert open(f, "rb").read() == open(other, "rb").read()  # noqa: SIM115

    labels = np.array([r[2] for r in records])
    assert abs(labels.mean() - 0.5) < 4 * math.sqrt(0.25 / len(labels))


def test_write_errors_before_work(tmp_path, toy_tokenizer):
    with pytest.raises(FileNotFoundError):
        write_pretraining_data(
            tokenizer=toy_tokenizer,
            output_dir=str(tmp_path / "o"),
            inputs=[str(tmp_path / "missing.txt")],
            log=None,
        )
    with pytest.raises(ValueError, match="sentence_task"):
        write_pretraining_data(
            tokenizer=toy_tokenizer,
            output_dir=str(tmp_path / "o"),
            inputs=[sample_path("en")],
            sentence_task="xyz",
        )
    assert not os.path.exists(tmp_path / "o")


def test_write_from_tfds_dataset(tmp_path, toy_tokenizer):
    import tensorflow_datasets as tfds

    from albert_tf.data.tfds_corpus import AlbertCorpus

    manual = tmp_path / "manual"
    manual.mkdir()
    doc = "".join(f"Sentence {i} is here.\n" for i in range(6))
    (manual / "c.txt").write_text((doc + "\n") * 20)
    data_dir = str(tmp_path / "tfds")
    AlbertCorpus(data_dir=data_dir).download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual))
    )
    summary = write_pretraining_data(
        tokenizer=toy_tokenizer,
        output_dir=str(tmp_path / "out"),
        tfds_name="albert_corpus",
        tfds_data_dir=data_dir,
        max_seq_length=32,
        dupe_factor=1,
        num_shards=2,
        show_progress=False,
        log=None,
    )
    assert summary.documents == 20 and summary.sentences == 120
    assert summary.examples == len(read_records(str(tmp_path / "out"))[1]) > 20


def test_serialized_bytes_do_not_depend_on_the_hash_seed():
    """Shards are byte-identical across runs only if one example always
    serializes to the same bytes; protobuf maps do not, unless asked."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from albert_tf.data.examples import PretrainingExample, serialize_example\n"
        "ex = PretrainingExample([2, 7, 3, 8, 3], [0, 0, 0, 1, 1], 1, [0, 0, 0, 1, 0])\n"
        "sys.stdout.write(serialize_example(ex).hex())\n"
    )
    outputs = set()
    for seed in ("1", "2", "3"):
        result = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert result.returncode == 0, result.stderr[-2000:]
        outputs.add(result.stdout)
    assert len(outputs) == 1
    parsed = tf.train.Example.FromString(bytes.fromhex(outputs.pop()))
    feature = parsed.features.feature
    assert list(feature["token_ids"].int64_list.value) == [2, 7, 3, 8, 3]
    assert list(feature["word_continues"].int64_list.value) == [0, 0, 0, 1, 0]
    assert list(feature["sentence_order_label"].int64_list.value) == [1]


@pytest.mark.parametrize("word_continues", [None, [0, 0, 1, 0, 0, 0]])
def test_serialized_bytes_equal_the_public_example_api(word_continues):
    """serialize_example fills the proto in place; the bytes are those of an
    Example built from tf.train.Feature objects, the documented way."""
    ex = PretrainingExample([2, 7, 8000, 3, 300_000, 3], [0, 0, 0, 0, 1, 1], 0, word_continues)

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    features = {
        "token_ids": ints(ex.token_ids),
        "segment_ids": ints(ex.segment_ids),
        "sentence_order_label": ints([ex.sentence_order_label]),
    }
    if word_continues is not None:
        features["word_continues"] = ints(word_continues)
    reference = tf.train.Example(features=tf.train.Features(feature=features))
    assert serialize_example(ex) == reference.SerializeToString(deterministic=True)


def test_serialized_bytes_equal_protobuf_for_every_varint_width():
    """Random examples whose values need 1 to 10 varint bytes (ids, the word
    continuation bit 1 << 40, a negative label), empty lists and over-long
    ones: the bytes are those of an Example built from tf.train.Feature
    objects."""
    rng = random.Random(7)
    widths = [(0, 127), (128, 16_383), (16_384, 2_097_151), (1 << 40, (1 << 41) - 1), (-5, -1)]

    def values(n):
        return [rng.randint(*rng.choice(widths)) for _ in range(n)]

    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    for _ in range(300):
        n = rng.choice([0, 1, 2, 127, 128, 513])
        ex = PretrainingExample(
            values(n),
            [rng.randint(0, 1) for _ in range(n)],
            rng.choice([0, 1, -1, 1 << 40]),
            values(n) if rng.random() < 0.5 else None,
        )
        features = {
            "token_ids": ints(ex.token_ids),
            "segment_ids": ints(ex.segment_ids),
            "sentence_order_label": ints([ex.sentence_order_label]),
        }
        if ex.word_continues is not None:
            features["word_continues"] = ints(ex.word_continues)
        reference = tf.train.Example(features=tf.train.Features(feature=features))
        assert serialize_example(ex) == reference.SerializeToString(deterministic=True), ex


def _one_sentence_at_a_time(documents, doc_index, *, max_seq_length, rng, sentence_task, stats):
    """google-research's create_instances_from_document loop (a chunk grows one
    sentence at a time), with this package's SOP rules for one-sentence chunks."""
    document = documents[doc_index]
    if sentence_task != "none" and len(document) < 2:
        stats["one_sentence_document"] += 1
        return []
    max_num_tokens = max_seq_length - (2 if sentence_task == "none" else 3)
    target = max_num_tokens
    if rng.random() < 0.1:
        target = rng.randint(2, max_num_tokens)
    out, chunk, length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            label, a_end = 0, 1
            if sentence_task == "none":
                a, b = [t for s in chunk for t in s], []
            else:
                if len(chunk) >= 2:
                    a_end = rng.randint(1, len(chunk) - 1)
                a = [t for s in chunk[:a_end] for t in s]
                b = [t for s in chunk[a_end:] for t in s]
                if sentence_task == "nsp" and (len(chunk) == 1 or rng.random() < 0.5):
                    label = 1
                    j = rng.randrange(len(documents) - 1)
                    other = documents[j + 1 if j >= doc_index else j]
                    b = []
                    for sentence in other[rng.randrange(len(other)) :]:
                        b.extend(sentence)
                        if len(b) >= target - len(a):
                            break
                    i -= len(chunk) - a_end
                elif sentence_task == "sop":
                    if len(chunk) == 1:
                        if len(a) < 2:
                            stats["one_token_chunk"] += 1
                            a = []
                        else:
                            cut = rng.randint(1, len(a) - 1)
                            a, b = a[:cut], a[cut:]
                            stats["single_sentence_chunk_split"] += 1
                    if rng.random() < 0.5:
                        a, b, label = b, a, 1
            if a and (b or sentence_task == "none"):
                truncate_seq_pair(a, b, max_num_tokens, rng)
                ids = [CLS, *a, SEP] + ([*b, SEP] if b else [])
                out.append((ids, label))
            chunk, length = [], 0
        i += 1
    return out


@pytest.mark.parametrize("packed", [False, True], ids=["lists", "packed"])
@pytest.mark.parametrize("task", ["sop", "nsp", "none"])
def test_chunks_are_those_of_the_one_sentence_at_a_time_loop(task, packed):
    """Chunks found by bisection over running sentence ends, as slices of
    packed documents or from lists of sentences, give the examples, counts
    and random stream of the loop that adds one sentence at a time."""
    cases = random.Random(11)
    for _ in range(40):
        docs = make_documents(cases.randint(2, 12), cases, max_sentence=cases.choice([3, 12, 60]))
        docs[0] = docs[0][:1]  # a one-sentence document
        pool = [PackedDocument.from_sentences(doc) for doc in docs] if packed else docs
        seed, length = cases.randrange(10**9), cases.choice([8, 16, 64, 128])
        for d in range(len(docs)):
            want_stats, got_stats = collections.Counter(), collections.Counter()
            want_rng, rng = random.Random(seed + d), random.Random(seed + d)
            want = _one_sentence_at_a_time(
                docs, d, max_seq_length=length, rng=want_rng, sentence_task=task, stats=want_stats
            )
            got = create_examples_from_document(
                pool,
                d,
                max_seq_length=length,
                cls_id=CLS,
                sep_id=SEP,
                rng=rng,
                sentence_task=task,
                stats=got_stats,
            )
            assert [(e.token_ids, e.sentence_order_label) for e in got] == want
            assert got_stats == want_stats
            assert rng.random() == want_rng.random()


def test_packed_document_is_a_sequence_of_its_sentences():
    sentences = [[5, 6, 7], [8], [9, 10]]
    doc = PackedDocument.from_sentences(sentences)
    assert list(doc) == sentences and len(doc) == 3
    assert doc[-2] == [8] and doc[1:] == sentences[1:] and doc[::-1] == sentences[::-1]
    assert [doc.span(a, b) for a, b in [(0, 3), (1, 3), (2, 2)]] == [
        [5, 6, 7, 8, 9, 10],
        [8, 9, 10],
        [],
    ]
    with pytest.raises(IndexError):
        doc[3]


def test_truncate_seq_pair_makes_the_official_choices():
    """The same tokens survive as with google-research's loop, which deletes
    one token per random draw from the longer list's front or back."""

    def official(tokens_a, tokens_b, max_num_tokens, rng):
        while len(tokens_a) + len(tokens_b) > max_num_tokens:
            trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
            if rng.random() < 0.5:
                del trunc[0]
            else:
                trunc.pop()

    cases = random.Random(0)
    for _ in range(3000):
        a = list(range(cases.randrange(0, 150)))
        b = list(range(1000, 1000 + cases.randrange(0, 150)))
        limit, seed = cases.randrange(0, 200), cases.randrange(10**9)
        want_a, want_b = list(a), list(b)
        official_rng, rng = random.Random(seed), random.Random(seed)
        official(want_a, want_b, limit, official_rng)
        truncate_seq_pair(a, b, limit, rng)
        assert (a, b) == (want_a, want_b)
        # As many draws as the official loop: the rest of the stream is the same.
        assert rng.random() == official_rng.random()
