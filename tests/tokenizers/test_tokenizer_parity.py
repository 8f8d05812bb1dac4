"""Exact id parity with Hugging Face's slow reference tokenizers.

``transformers.AlbertTokenizer`` (SentencePiece + google-research's
preprocessing) and ``transformers.BertTokenizer(do_lower_case=True)`` are run
on the very model / vocab the fixtures trained; full id lists must match.
"""

from __future__ import annotations

import pytest
import tensorflow as tf
import transformers
from helpers.tokenizer_inputs import HARD_INPUTS, LONG_INPUT
from helpers.tokenizer_inputs import random_inputs as _random_inputs


def _ids(tokenizer, texts: list[str]) -> list[list[int]]:
    return tokenizer.tokenize(tf.constant(texts)).to_list()


# -- SentencePiece ----------------------------------------------------------


@pytest.fixture(scope="module")
def hf_albert(sp_dir):
    return transformers.AlbertTokenizer(vocab_file=str(sp_dir / "spiece.model"))


def _hf_albert_ids(hf, texts):
    return [hf.encode(t, add_special_tokens=False) for t in texts]


def test_sentencepiece_matches_hf_on_hard_inputs(sp_tokenizer, hf_albert):
    texts = HARD_INPUTS + [LONG_INPUT]
    got = _ids(sp_tokenizer, texts)
    want = _hf_albert_ids(hf_albert, texts)
    for text, g, w in zip(texts, got, want, strict=True):
        assert g == w, f"mismatch on {text[:60]!r}"


def test_sentencepiece_matches_hf_on_mutated_corpus(sp_tokenizer, hf_albert, english_lines):
    texts = _random_inputs(english_lines, 300, seed=1)
    assert _ids(sp_tokenizer, texts) == _hf_albert_ids(hf_albert, texts)


def test_sentencepiece_inputs_are_not_trivial(sp_tokenizer, hf_albert):
    """Guards the parity tests: the inputs must produce unknowns, multi-piece
    words, and trigger the digit-comma rule."""
    texts = HARD_INPUTS + [LONG_INPUT]
    ids = _ids(sp_tokenizer, texts)
    flat = [i for row in ids for i in row]
    assert sp_tokenizer.unk_id in flat
    assert len(ids[-1]) > 2000  # the 10k-character input
    assert ids[HARD_INPUTS.index("")] == []
    pieces = hf_albert.tokenize("supercalifragilisticexpialidocious")
    assert len(pieces) > 3

    # The digit-comma rule must change something on these inputs, and the
    # rule-less output must then disagree with HF (so the rule is tested).
    from albert_tf.tokenizers import SentencePieceTokenizer

    plain = SentencePieceTokenizer(sp_tokenizer._model_proto, split_digit_comma=False)
    numbers = ["1,000,000 and 9,5", "In 1999, 2,500, 12,345,678,"] + [LONG_INPUT]
    without_rule = _ids(plain, numbers)
    with_rule = _ids(sp_tokenizer, numbers)
    assert without_rule != with_rule
    assert with_rule == _hf_albert_ids(hf_albert, numbers)


def test_sentencepiece_pieces_match_hf(sp_tokenizer, hf_albert):
    texts = ["Café 1,000, naïve", "We paid 12,345, then 9,5."]
    got = sp_tokenizer.tokenize_to_pieces(tf.constant(texts)).to_list()
    assert [[p.decode() for p in row] for row in got] == [hf_albert.tokenize(t) for t in texts]


# -- WordPiece ---------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_bert(wp_dir):
    return transformers.BertTokenizer(vocab_file=str(wp_dir / "vocab.txt"), do_lower_case=True)


def _hf_bert_ids(hf, texts):
    return [hf.encode(t, add_special_tokens=False) for t in texts]


def test_wordpiece_matches_hf_on_hard_inputs(wp_tokenizer, hf_bert):
    texts = HARD_INPUTS + [LONG_INPUT]
    got = _ids(wp_tokenizer, texts)
    want = _hf_bert_ids(hf_bert, texts)
    for text, g, w in zip(texts, got, want, strict=True):
        assert g == w, f"mismatch on {text[:60]!r}"


def test_wordpiece_matches_hf_on_mutated_corpus(wp_tokenizer, hf_bert, chinese_lines):
    texts = _random_inputs(chinese_lines, 300, seed=2)
    assert _ids(wp_tokenizer, texts) == _hf_bert_ids(hf_bert, texts)


def test_wordpiece_inputs_are_not_trivial(wp_tokenizer, hf_bert):
    texts = HARD_INPUTS + [LONG_INPUT]
    tokens = [hf_bert.tokenize(t) for t in texts]
    flat = [t for row in tokens for t in row]
    assert "[UNK]" in flat
    assert any(t.startswith("##") for t in flat)
    # over-long words: 150 x's → one [UNK]; 120 CJK chars → 120 one-char words
    long_row = tokens[HARD_INPUTS.index("x" * 150 + " " + "中" * 120)]
    assert long_row[0] == "[UNK]" and len(long_row) == 121
    assert tokens[HARD_INPUTS.index("我爱ALBERT模型2024年")][:2] == ["我", "爱"]
    assert len(_ids(wp_tokenizer, [LONG_INPUT])[0]) > 2000
