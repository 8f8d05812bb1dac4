"""Chinese whole-word masking: alignment, shards and masks over segmenter words."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import read_documents, sample_path
from albert_tf.data.chinese_wwm import get_segmenter, is_cjk_char, word_continuation
from albert_tf.data.pipeline import pretraining_dataset
from albert_tf.data.shards import write_pretraining_data
from albert_tf.tokenizers import WordPieceTokenizer


def two_char_words(text: str) -> list[str]:
    """A stand-in segmenter: CJK runs cut into two-character words."""
    out, run = [], ""
    for ch in text:
        if is_cjk_char(ch):
            run += ch
            if len(run) == 2:
                out.append(run)
                run = ""
        else:
            if run:
                out.append(run)
                run = ""
            out.append(ch)
    return out + ([run] if run else [])


def test_word_continuation_alignment():
    pieces = ["[UNK]", "中", "文", "abc", "##d", "好"]
    assert word_continuation(pieces, ["中文", "abcd", "好"]) == [
        False,
        False,
        True,
        False,
        False,
        False,
    ]
    # A piece that does not match its character stops alignment (safe).
    assert word_continuation(["中", "x", "文", "字"], ["中國", "文字"]) == [
        False,
        False,
        False,
        False,
    ]
    assert word_continuation([], []) == []


def test_unknown_segmenter():
    with pytest.raises(ValueError):
        get_segmenter("nope")


def test_chinese_whole_words_are_masked_together(tmp_path):
    docs = list(read_documents(sample_path("zh")))[:60]
    chars = sorted({c for d in docs for s in d for c in s.lower() if not c.isspace()})
    vocab = list(dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars]))
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = WordPieceTokenizer(tmp_path / "vocab.txt")
    src = tmp_path / "zh.jsonl"
    src.write_text(
        "\n".join(json.dumps({"sentences": d}, ensure_ascii=False) for d in docs),
        encoding="utf-8",
    )
    out = str(tmp_path / "out")
    write_pretraining_data(
        tokenizer=tok,
        output_dir=out,
        inputs=[str(src)],
        max_seq_length=64,
        dupe_factor=2,
        num_shards=1,
        chinese_segmenter=two_char_words,
        show_progress=False,
        log=None,
    )
    shard = os.path.join(out, "pretrain-00000-of-00001.tfrecord")
    flags, ids = [], []
    for record in tf.data.TFRecordDataset(shard):
        f = tf.train.Example.FromString(record.numpy()).features.feature
        row = list(f["word_continues"].int64_list.value)
        assert len(row) == len(f["token_ids"].int64_list.value)
        flags.append(row + [0] * (64 - len(row)))
        ids.append(list(f["token_ids"].int64_list.value) + [0] * (64 - len(row)))
    flags = np.array(flags, bool)
    special = np.isin(np.array(ids), tok.special_ids)

    ds = pretraining_dataset(
        shard,
        batch_size=32,
        max_seq_length=64,
        tokenizer=tok,
        shuffle=False,
        repeat=False,
        drop_remainder=False,
    )
    rows = []
    for features, labels in ds:
        w = labels["mask_weights"].numpy() > 0
        sel = np.zeros(features["token_ids"].shape, bool)
        r = np.nonzero(w)[0]
        sel[r, features["mask_positions"].numpy()[w]] = True
        rows.append(sel)
    selected = np.concatenate(rows)
    assert selected.shape == flags.shape and selected.any()
    # A piece continuing a segmenter word is masked iff the piece before is
    # (unless truncation left it right after [CLS]/[SEP]: then it starts one).
    cont = flags[:, 1:] & ~special[:, :-1]
    assert cont.sum() > 100
    assert np.array_equal(selected[:, 1:][cont], selected[:, :-1][cont])
    # Two-character words really were masked as wholes.
    assert (selected[:, 1:][cont] & selected[:, :-1][cont]).sum() > 20
