"""Character offsets of SentencePiece pieces against Hugging Face's fast tokenizer.

`SentencePieceTokenizer.tokenize_with_offsets` gives each piece's characters
through ALBERT's normalisation (lower-casing, whitespace runs, doubled quotes,
NFKD and accent stripping) and the model's own NFKC. ``AlbertTokenizerFast``
tracks the same alignment in Rust. It is built here by transformers' own
converter from the test's SentencePiece model. The only change: transformers
is handed its bundled protobuf module for the model file, because the one that
ships with sentencepiece needs a newer protobuf runtime than TensorFlow's pin.

Two conventions of ours, applied to the fast tokenizer's spans before
comparing, because tagging and QA need them: a piece's span leaves out the
whitespace its "▁" stands for (and control characters the normaliser deletes or
turns into spaces),
and a bare "▁" piece is an empty span where the next piece starts.
"""

from __future__ import annotations

import importlib
import re
import unicodedata

import pytest
import tensorflow as tf
import transformers
from helpers.tokenizer_inputs import HARD_INPUTS, LONG_INPUT, random_inputs, shared_paragraphs
from transformers.utils import sentencepiece_model_pb2_new

from albert_tf.tokenizers.normalization import normalize_chars, normalize_text
from albert_tf.tokenizers.sentencepiece import WORD_START, SentencePieceTokenizer

# The module, not the function of the same name that transformers exports.
convert_slow_tokenizer = importlib.import_module("transformers.convert_slow_tokenizer")


@pytest.fixture(scope="module")
def hf_albert_slow(sp_dir):
    return transformers.AlbertTokenizer(vocab_file=str(sp_dir / "spiece.model"))


@pytest.fixture(scope="module")
def hf_albert_fast(hf_albert_slow):
    module = convert_slow_tokenizer.import_protobuf
    convert_slow_tokenizer.import_protobuf = lambda error_message="": sentencepiece_model_pb2_new
    try:
        return convert_slow_tokenizer.convert_slow_tokenizer(hf_albert_slow)
    finally:
        convert_slow_tokenizer.import_protobuf = module


def _deleted(slow, char: str) -> bool:
    """Whether the model's normaliser deletes ``char`` (a control character)."""
    return unicodedata.category(char) == "Cc" and slow.tokenize(f"a{char}a") == slow.tokenize("aa")


def _spaced(slow, char: str) -> bool:
    """Whether it turns the control or format character ``char`` into a space (U+200B)."""
    return unicodedata.category(char) in ("Cc", "Cf") and slow.tokenize(
        f"a{char}a"
    ) == slow.tokenize("a a")


def _expected(slow, text: str, tokens: list[str], offsets: list[tuple[int, int]]) -> list[tuple]:
    """The fast tokenizer's spans with our two conventions (module docstring)."""
    spans = []
    for start, end in offsets:
        # (The fast tokenizer counts deleted control characters into the next piece.)
        while start < end and (
            text[start].isspace() or _deleted(slow, text[start]) or _spaced(slow, text[start])
        ):
            start += 1
        spans.append((start, end))
    following = [start for start, _ in spans[1:]] + [end for _, end in spans[-1:]]
    return [
        (after, after) if token == WORD_START else span
        for token, span, after in zip(tokens, spans, following, strict=True)
    ]


def _assert_same_offsets(tokenizer, fast, slow, texts: list[str], least: float = 0.9) -> None:
    """Ids and offsets equal the fast tokenizer's wherever its ids are the slow
    reference's (ours are the slow one's, `test_tokenizer_parity`; the fast one
    keeps a trailing "▁" and skips the digit-comma re-split)."""
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(texts))
    assert ids.to_list() == tokenizer.tokenize(tf.constant(texts)).to_list()
    compared = 0
    for i, text in enumerate(texts):
        # Deleted characters that begin a text shift all of the fast tokenizer's
        # spans by their count: it is asked about the rest, and its spans shifted.
        skip = len(text) - len(text.lstrip("".join(c for c in text if _deleted(slow, c))))
        want = fast.encode(text[skip:], add_special_tokens=False)
        if want.ids != slow.encode(text, add_special_tokens=False):
            continue
        compared += 1
        got = list(zip(starts[i].numpy().tolist(), ends[i].numpy().tolist(), strict=True))
        assert ids[i].numpy().tolist() == want.ids, f"ids differ on {text[:60]!r}"
        expected = _expected(slow, text[skip:], want.tokens, want.offsets)
        assert got == [(a + skip, b + skip) for a, b in expected], f"offsets on {text[:60]!r}"
    assert compared >= least * len(texts), f"only {compared} of {len(texts)} texts compared"


def test_sentencepiece_offsets_match_hf_fast_on_hard_inputs(
    sp_tokenizer, hf_albert_fast, hf_albert_slow
):
    texts = HARD_INPUTS + [LONG_INPUT, "— x", "```x'''", "a \u00a0 b", " lead", "\x01\x02In x"]
    _assert_same_offsets(sp_tokenizer, hf_albert_fast, hf_albert_slow, texts, least=0.7)


def test_sentencepiece_offsets_match_hf_fast_on_mutated_corpus(
    sp_tokenizer, hf_albert_fast, hf_albert_slow, english_lines
):
    texts = random_inputs(english_lines, 300, seed=7)
    _assert_same_offsets(sp_tokenizer, hf_albert_fast, hf_albert_slow, texts, least=0.35)


@pytest.mark.parametrize("name", ["en_austen.jsonl.gz", "en_sotu.jsonl.gz"])
def test_sentencepiece_offsets_match_hf_fast_on_shared_corpora(
    sp_tokenizer, hf_albert_fast, hf_albert_slow, name
):
    texts = shared_paragraphs(name)
    _assert_same_offsets(sp_tokenizer, hf_albert_fast, hf_albert_slow, texts, least=0.35)


def test_digit_comma_pieces_split_the_span_of_the_piece_they_replace(sp_tokenizer, english_lines):
    # Without the re-split, a piece such as "▁1,000," keeps its span (the tests above
    # check those spans against the fast tokenizer, which has no such rule). With it,
    # its digits' pieces and its comma must partition that span, the comma last.
    plain = SentencePieceTokenizer(sp_tokenizer._model_proto, split_digit_comma=False)
    texts = ["1,000,000 and 9,5", "In 1999, 2,500, 12,345,678,", LONG_INPUT[:3000]]
    texts += [line for line in english_lines if "," in line][-300:]
    whole = [_pieces(plain, texts), _spans(plain, texts)]
    split_pieces, split_spans = _pieces(sp_tokenizer, texts), _spans(sp_tokenizer, texts)
    replaced = 0
    for i, text in enumerate(texts):
        k = 0
        for piece, span in zip(whole[0][i], whole[1][i], strict=True):
            if not re.fullmatch(r"(?s).*\d,", piece):
                assert (split_pieces[i][k], split_spans[i][k]) == (piece, span), text
                k += 1
                continue
            parts = [split_spans[i][k]]
            while parts[-1][1] < span[1]:
                k += 1
                parts.append(split_spans[i][k])
            assert split_pieces[i][k] == "," and parts[-1] == (span[1] - 1, span[1]), text
            assert parts[0][0] == span[0] and len(parts) >= 2, (text, piece, parts)
            assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False)), parts
            k += 1
            replaced += 1
        assert k == len(split_pieces[i])
    assert replaced >= 20


def _pieces(tokenizer, texts: list[str]) -> list[list[str]]:
    ids = tokenizer.tokenize_with_offsets(tf.constant(texts))[0]
    return [[p.decode() for p in row] for row in tokenizer.id_to_token(ids).to_list()]


def _spans(tokenizer, texts: list[str]) -> list[list[tuple[int, int]]]:
    _, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(texts))
    return [
        list(zip(s, e, strict=True)) for s, e in zip(starts.to_list(), ends.to_list(), strict=True)
    ]


def test_per_character_normalisation_joins_to_the_whole_texts(english_lines):
    texts = HARD_INPUTS + random_inputs(english_lines, 200, seed=3)
    for options in ({}, {"keep_accents": True}, {"lower_case": False}, {"fold_punctuation": True}):
        joined = tf.strings.reduce_join(normalize_chars(tf.constant(texts), **options), axis=1)
        assert (
            joined.numpy().tolist()
            == normalize_text(tf.constant(texts), **options).numpy().tolist()
        )


def test_sentencepiece_offsets_run_in_a_graph(sp_tokenizer):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def offsets(texts):
        return sp_tokenizer.tokenize_with_offsets(texts)

    texts = ["Café 1,000, ok", "", "   "]
    got = offsets(tf.constant(texts))
    want = sp_tokenizer.tokenize_with_offsets(tf.constant(texts))
    for g, w in zip(got, want, strict=True):
        assert g.to_list() == w.to_list()
    assert want[0].to_list()[1:] == [[], []]
