"""Interface behaviour: ids, word starts, save/load, errors, training input."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import iter_sentences
from albert_tf.data.corpus import ReadStats
from albert_tf.tokenizers import (
    SentencePieceTokenizer,
    Tokenizer,
    WordPieceTokenizer,
    load_tokenizer,
    train_sentencepiece,
    train_wordpiece,
)
from albert_tf.tokenizers._text_ops import lower_utf8


def test_sentencepiece_special_ids_follow_official_recipe(sp_tokenizer):
    assert isinstance(sp_tokenizer, Tokenizer) and isinstance(sp_tokenizer, tf.Module)
    assert (sp_tokenizer.pad_id, sp_tokenizer.unk_id) == (0, 1)
    assert (sp_tokenizer.cls_id, sp_tokenizer.sep_id, sp_tokenizer.mask_id) == (2, 3, 4)
    assert sp_tokenizer.vocabulary[:5] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert sp_tokenizer.vocabulary_size == 1500
    # The official user-defined symbols are single pieces.
    assert {"(", ")", '"', "-", ".", "–", "£", "€"} <= set(sp_tokenizer.vocabulary)


def test_wordpiece_special_ids_follow_bert_layout(wp_tokenizer):
    vocab = wp_tokenizer.vocabulary
    assert vocab[0] == "[PAD]" and vocab[1] == "[unused1]"
    assert vocab[21:25] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert wp_tokenizer.special_ids == (0, 21, 22, 23, 24)
    assert 1800 <= wp_tokenizer.vocabulary_size <= 2000


def test_word_start_masks(sp_tokenizer, wp_tokenizer):
    for tokenizer, is_start in (
        (sp_tokenizer, lambda p: p.startswith("▁")),
        (wp_tokenizer, lambda p: not p.startswith("##")),
    ):
        mask = tokenizer.word_start_mask()
        assert mask.dtype == bool and mask.shape == (tokenizer.vocabulary_size,)
        assert mask[list(tokenizer.special_ids)].all()
        special = set(tokenizer.special_ids)
        for i, piece in enumerate(tokenizer.vocabulary):
            if i not in special:
                assert mask[i] == is_start(piece), piece
        assert 0 < mask.sum() < tokenizer.vocabulary_size


def test_word_starts_group_a_multi_piece_word(sp_tokenizer, wp_tokenizer):
    for tokenizer in (sp_tokenizer, wp_tokenizer):
        ids = tokenizer.tokenize(tf.constant(["supercalifragilistic"])).to_list()[0]
        starts = tokenizer.word_start_mask()[ids]
        assert len(ids) > 1 and starts[0] and not starts[1:].any()


def test_detokenize_and_id_to_token(sp_tokenizer, wp_tokenizer):
    text = tf.constant(["Hello there, general Kenobi"])
    sp_ids = sp_tokenizer.tokenize(text)
    padded = sp_ids.to_tensor(default_value=sp_tokenizer.pad_id, shape=[1, 20])
    assert sp_tokenizer.detokenize(padded).numpy()[0] == b"hello there, general kenobi"
    pieces = sp_tokenizer.id_to_token(sp_ids).to_list()[0]
    assert b"".join(pieces).decode().replace("▁", " ").strip() == "hello there, general kenobi"

    wp_ids = wp_tokenizer.tokenize(tf.constant(["我爱模型 hello"]))
    assert wp_tokenizer.detokenize(wp_ids).numpy()[0].decode() == "我 爱 模 型 hello"
    assert wp_tokenizer.id_to_token(tf.constant([wp_tokenizer.cls_id])).numpy()[0] == b"[CLS]"


def test_save_and_load_round_trip(sp_tokenizer, wp_tokenizer, tmp_path):
    texts = tf.constant(["Café 1,000, 我爱ALBERT"])
    for tokenizer in (sp_tokenizer, wp_tokenizer):
        out = tmp_path / tokenizer.kind
        tokenizer.save(out)
        config = json.loads((out / "tokenizer.json").read_text())
        assert config["kind"] == tokenizer.kind and config["lower_case"] is True
        assert (out / (config.get("model_file") or config["vocab_file"])).is_file()
        loaded = load_tokenizer(out)
        assert type(loaded) is type(tokenizer)
        assert loaded.tokenize(texts).to_list() == tokenizer.tokenize(texts).to_list()


def test_cased_options_are_kept(sp_dir, tmp_path):
    cased = SentencePieceTokenizer.from_file(
        sp_dir / "spiece.model", lower_case=False, keep_accents=True
    )
    cased.save(tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert loaded.options == cased.options
    upper = loaded.tokenize(tf.constant(["CAFÉ"])).to_list()
    assert upper != loaded.tokenize(tf.constant(["cafe"])).to_list()


# -- errors -------------------------------------------------------------------


def test_missing_files_raise(tmp_path):
    with pytest.raises(FileNotFoundError, match="SentencePiece model file not found"):
        SentencePieceTokenizer.from_file(tmp_path / "nope.model")
    with pytest.raises(FileNotFoundError, match="vocab file not found"):
        WordPieceTokenizer(tmp_path / "vocab.txt")
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"kind": "bpe"}')
    with pytest.raises(ValueError, match="unknown tokenizer kind"):
        load_tokenizer(tmp_path)
    with pytest.raises(ValueError, match="not a valid SentencePiece model"):
        SentencePieceTokenizer(b"not a model")


@pytest.mark.parametrize("missing", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
def test_vocab_without_special_token_is_rejected(missing, tmp_path):
    tokens = [t for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"] if t != missing]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n")
    with pytest.raises(ValueError, match=rf"lacks the special token\(s\) \{missing}"):
        WordPieceTokenizer(path)


def test_vocab_with_duplicates_or_crlf_is_rejected(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\na\n")
    with pytest.raises(ValueError, match="appears on lines 6 and 7"):
        WordPieceTokenizer(path)
    path.write_bytes(b"[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\n")
    with pytest.raises(ValueError, match=r"\\r line endings"):
        WordPieceTokenizer(path)


def test_sentencepiece_model_without_control_symbols_is_rejected(tmp_path):
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["hello world again and again"] * 30),
        model_prefix=str(tmp_path / "plain"),
        vocab_size=15,
        minloglevel=2,
    )
    with pytest.raises(ValueError, match=r"no \[CLS\] piece"):
        SentencePieceTokenizer.from_file(tmp_path / "plain.model")


def test_empty_corpus_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="training corpus is empty"):
        train_sentencepiece(["", "   "], tmp_path / "sp", vocab_size=100)
    with pytest.raises(ValueError, match="training corpus is empty"):
        train_wordpiece(["\t"], tmp_path / "wp", vocab_size=200)


def test_too_small_corpus_errors_or_shrinks(tmp_path):
    lines = ["the cat sat on the mat", "a dog ate the bone", "birds fly south"] * 20
    with pytest.raises(ValueError, match=r"supports at most \d+ SentencePiece pieces, not 5000"):
        train_sentencepiece(lines, tmp_path / "a", vocab_size=5000)
    shrunk = train_sentencepiece(lines, tmp_path / "b", vocab_size=5000, shrink_vocab=True)
    assert 10 < shrunk.vocabulary_size < 5000
    assert load_tokenizer(tmp_path / "b").vocabulary_size == shrunk.vocabulary_size


def test_corpus_reader_counts_bad_lines(tmp_path):
    plain = tmp_path / "a.txt"
    plain.write_bytes(b"good line\n\xff\xfe broken\n\n  \nanother\n")
    jsonl = tmp_path / "b.jsonl.gz"
    with gzip.open(jsonl, "wb") as handle:
        handle.write(b'{"id": 1, "sentences": ["one", "two", ""]}\n')
        handle.write(b"{not json\n")
        handle.write(b'{"id": 2, "sentences": ["caf\xc3\xa9", "\xe0\x80 bad"]}\n')
        handle.write(b'{"id": 3, "text": "no sentences key"}\n')
    stats = ReadStats()
    # A record with "text" instead of "sentences" is split into sentences, as
    # the pretraining reader does (the one reader serves both).
    assert list(iter_sentences([plain, jsonl], stats)) == [
        "good line",
        "another",
        "one",
        "two",
        "no sentences key",
    ]
    assert dict(stats.skipped) == {"invalid_utf8": 2, "invalid_json": 1, "empty_sentence": 1}
    assert stats.sentences == 5 and stats.documents == 4
    assert "skipped (invalid_utf8): 2" in stats.summary()
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        list(iter_sentences([tmp_path / "missing.txt"]))


def test_invalid_utf8_at_tokenize_time_does_not_crash(sp_tokenizer, wp_tokenizer):
    bad = tf.constant([b"ok \xff\xfe text"])
    assert len(sp_tokenizer.tokenize(bad).to_list()[0]) > 0
    # BERT cleaning deletes U+FFFD, so the bad bytes vanish.
    assert (
        wp_tokenizer.tokenize(bad).to_list()
        == wp_tokenizer.tokenize(tf.constant(["ok text"])).to_list()
    )


def test_lower_matches_python_per_character_on_every_code_point():
    # One space-separated string of every code point: per-character lowering
    # has no context, so joining changes nothing and is far faster.
    chars = [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF and c != 0x20]
    lowered = lower_utf8(tf.constant([" ".join(chars).encode()])).numpy()[0].decode()
    expected = [ch.lower() for ch in chars]
    got = lowered.split(" ")
    assert len(got) == len(expected)
    assert [(e, g) for e, g in zip(expected, got, strict=True) if e != g] == []
    assert lower_utf8(tf.constant(["ΟΔΟΣ A\x00B\x00"])).numpy()[0].decode() == "οδοσ a\x00b\x00"


def test_lower_fixes_only_the_rows_that_need_it():
    # Letters ICU does not lower sit in some rows only: the fixed rows are put
    # back in place and the others pass through.
    rows = ["Ꟁ Ab", "plain ABC", "", "\U00010570x\x00Ꟙ", "中文", "ⰯΣ"]
    got = [v.decode() for v in lower_utf8(tf.constant(rows)).numpy()]
    assert got == ["".join(ch.lower() for ch in text).replace("ς", "σ") for text in rows]
    with pytest.raises(ValueError, match="1-D batch"):
        lower_utf8(tf.constant([rows[:2]]))


def test_character_classes_equal_a_plain_loop_over_every_code_point():
    """The classes the graphs embed are built with vectorized calls; here the
    same definitions as a plain per-code-point loop, the way the reference
    tokenizers test each character."""
    import unicodedata

    from albert_tf.tokenizers import _text_ops

    def is_punct(cp, cat):
        ascii_punct = 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
        return ascii_punct or cat.startswith("P")

    predicates = {
        "python_whitespace": lambda cp, ch, cat: ch.isspace(),
        "combining": lambda cp, ch, cat: unicodedata.combining(ch) != 0,
        "nonspacing_mark": lambda cp, ch, cat: cat == "Mn",
        "digit": lambda cp, ch, cat: ch.isdigit(),
        "bert_removed": lambda cp, ch, cat: (
            cp in (0, 0xFFFD) or (cat.startswith("C") and cp not in (9, 10, 13))
        ),
        "bert_whitespace": lambda cp, ch, cat: cp in (32, 9, 10, 13) or cat == "Zs",
        "bert_punctuation": lambda cp, ch, cat: is_punct(cp, cat),
    }
    members: dict[str, list[int]] = {name: [] for name in predicates}
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        cat = unicodedata.category(ch)
        for name, predicate in predicates.items():
            if predicate(cp, ch, cat):
                members[name].append(cp)
    classes = _text_ops._classes()
    for name, cps in members.items():
        # Parse the RE2 class body back into code points.
        got: list[int] = []
        for lo, hi in re.findall(r"\\x\{([0-9A-F]+)\}(?:-\\x\{([0-9A-F]+)\})?", classes[name]):
            got.extend(range(int(lo, 16), int(hi or lo, 16) + 1))
        assert got == cps, name


# -- command line ---------------------------------------------------------------


def test_train_tokenizer_cli(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    lines = [
        json.dumps({"id": i, "sentences": [f"Sentence {i} about 中文 models.", "Café au lait."]})
        for i in range(200)
    ]
    corpus.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff bad line\n")
    out = tmp_path / "wp"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.train_tokenizer",
            f"--input={corpus}",
            f"--output_dir={out}",
            "--kind=wordpiece",
            "--vocab_size=300",
            "--num_unused=5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "input: 1 file(s); documents: 200; sentences: 400;" in result.stdout
    assert "skipped (invalid_utf8): 1" in result.stdout
    tokenizer = load_tokenizer(out)
    assert tokenizer.kind == "wordpiece"
    ids = tokenizer.tokenize(tf.constant(["中文 models"])).to_list()[0]
    assert tokenizer.unk_id not in ids
    assert np.array(ids).size == 3


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece"])
def test_tokenize_on_host_gives_the_ids_of_tokenize(
    kind, sp_dir, wp_dir, english_lines, chinese_lines
):
    """Data preparation's traced path: the same ids and rows as eager
    `tokenize` (the one checked against the reference tokenizers), for
    batches of different sizes, an empty string and an empty batch; and the
    cache of traced functions neither keeps a tokenizer alive nor adds a
    function to what a SavedModel of it would save."""
    import gc
    import weakref

    # Fresh objects: the session fixtures' tokenizers are kept alive by pytest.
    if kind == "sentencepiece":
        tok, lines = SentencePieceTokenizer.from_file(sp_dir / "spiece.model"), english_lines
    else:
        tok, lines = WordPieceTokenizer(wp_dir / "vocab.txt"), chinese_lines
    children = set(tok._trackable_children(save_type="savedmodel"))
    for batch in (lines[:1], lines[:300] + [""], lines[-77:]):
        flat, splits = tok.tokenize_on_host(batch)
        ragged = tok.tokenize(tf.constant(batch))
        assert flat.tolist() == ragged.flat_values.numpy().tolist()
        assert splits.tolist() == ragged.row_splits.numpy().tolist()
    flat, splits = tok.tokenize_on_host([])
    assert flat.size == 0 and splits.tolist() == [0]
    assert set(tok._trackable_children(save_type="savedmodel")) == children
    alive = weakref.ref(tok)
    del tok
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece"])
def test_a_tokenizer_saves_to_and_loads_from_a_url(
    kind, sp_tokenizer, wp_tokenizer, tmp_path, monkeypatch
):
    # A model_dir in a bucket holds its tokenizer there: saved and loaded through
    # TensorFlow's file systems (ram:// in one process, as gs:// would be), with the
    # same ids as the original and no local folder named after the scheme.
    monkeypatch.chdir(tmp_path)
    tokenizer = {"sentencepiece": sp_tokenizer, "wordpiece": wp_tokenizer}[kind]
    url = f"ram://albert_tf_tokenizer_{kind}/tok"
    tokenizer.save(url)
    loaded = load_tokenizer(url)
    assert loaded.kind == kind and loaded.vocabulary == tokenizer.vocabulary
    text = tf.constant(["Hello world, 你好世界 tokenizers."])
    np.testing.assert_array_equal(
        loaded.tokenize(text).to_list(), tokenizer.tokenize(text).to_list()
    )
    assert list(tmp_path.iterdir()) == []
