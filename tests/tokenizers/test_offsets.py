"""Character offsets of WordPiece pieces against Hugging Face's fast tokenizer.

`WordPieceTokenizer.tokenize_with_offsets` gives each piece's start and end in
code points of the original text, through lower-casing, accent stripping,
removed characters and Chinese character spacing. ``BertTokenizerFast`` tracks
the same alignment in Rust (its normaliser keeps an alignment per character):
ids and ``offset_mapping`` must match, on the hard inputs the id parity tests
use, on mutated corpus lines, and on the shared People's Daily and Austen text.
"""

from __future__ import annotations

import pytest
import tensorflow as tf
import transformers
from helpers.tokenizer_inputs import HARD_INPUTS, LONG_INPUT, random_inputs, shared_paragraphs


@pytest.fixture(scope="module")
def hf_bert_fast(wp_dir):
    return transformers.BertTokenizerFast(
        vocab_file=str(wp_dir / "vocab.txt"), do_lower_case=True, tokenize_chinese_chars=True
    )


@pytest.fixture(scope="module")
def hf_bert_slow(wp_dir):
    return transformers.BertTokenizer(vocab_file=str(wp_dir / "vocab.txt"), do_lower_case=True)


def _assert_same_offsets(tokenizer, fast, slow, texts: list[str]) -> None:
    """Ids and offsets equal the fast tokenizer's wherever its ids are the slow
    reference's. (Our ids are the slow one's, `test_tokenizer_parity`; the fast one's
    Rust character tables differ on a few private-use and unassigned code points.)"""
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(texts))
    assert ids.to_list() == tokenizer.tokenize(tf.constant(texts)).to_list()
    compared = 0
    for i, text in enumerate(texts):
        want = fast(text, add_special_tokens=False, return_offsets_mapping=True)
        if want["input_ids"] != slow.encode(text, add_special_tokens=False):
            continue
        compared += 1
        got = list(zip(starts[i].numpy().tolist(), ends[i].numpy().tolist(), strict=True))
        assert ids[i].numpy().tolist() == want["input_ids"], f"ids differ on {text[:60]!r}"
        assert got == [tuple(o) for o in want["offset_mapping"]], f"offsets on {text[:60]!r}"
    assert compared >= 0.9 * len(texts), f"only {compared} of {len(texts)} texts compared"


def test_wordpiece_offsets_match_hf_fast_on_hard_inputs(wp_tokenizer, hf_bert_fast, hf_bert_slow):
    _assert_same_offsets(wp_tokenizer, hf_bert_fast, hf_bert_slow, HARD_INPUTS + [LONG_INPUT])


def test_wordpiece_offsets_match_hf_fast_on_mutated_corpus(
    wp_tokenizer, hf_bert_fast, hf_bert_slow, chinese_lines
):
    texts = random_inputs(chinese_lines, 300, seed=5)
    _assert_same_offsets(wp_tokenizer, hf_bert_fast, hf_bert_slow, texts)


@pytest.mark.parametrize(
    "name", ["zh_peoples_daily_1998.jsonl.gz", "en_austen.jsonl.gz", "en_sotu.jsonl.gz"]
)
def test_wordpiece_offsets_match_hf_fast_on_shared_corpora(
    wp_tokenizer, hf_bert_fast, hf_bert_slow, name
):
    texts = shared_paragraphs(name)
    _assert_same_offsets(wp_tokenizer, hf_bert_fast, hf_bert_slow, texts)


def test_offsets_point_at_the_text_each_piece_came_from(wp_tokenizer):
    # Independent of Hugging Face: every piece's characters, normalised, hold the piece.
    texts = ["Crème BRÛLÉE, naïve café!", "我爱ALBERT模型，2024年。", "  ＡＢＣ  x\u00ady  "]
    ids, starts, ends = wp_tokenizer.tokenize_with_offsets(tf.constant(texts))
    pieces = wp_tokenizer.id_to_token(ids).to_list()
    for i, text in enumerate(texts):
        for piece, start, end in zip(pieces[i], starts[i].numpy(), ends[i].numpy(), strict=True):
            piece = piece.decode().removeprefix("##")
            source = text[start:end]
            assert 0 <= start < end <= len(text)
            if piece != "[UNK]":
                words = wp_tokenizer.tokenize_to_words(tf.constant([source])).to_list()[0]
                assert piece in b"".join(words).decode(), (piece, source)


def test_offsets_run_in_a_graph(wp_tokenizer):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def offsets(texts):
        return wp_tokenizer.tokenize_with_offsets(texts)

    texts = ["Café 世界", ""]
    got = offsets(tf.constant(texts))
    want = wp_tokenizer.tokenize_with_offsets(tf.constant(texts))
    for g, w in zip(got, want, strict=True):
        assert g.to_list() == w.to_list()
    assert want[0].to_list()[1] == []


def test_cased_vocabularies_refuse_offsets_rather_than_misalign(wp_dir):
    # Per-character NFC cannot compose "e" + U+0301 as the whole-text NFC does.
    from albert_tf.tokenizers import WordPieceTokenizer

    cased = WordPieceTokenizer(wp_dir / "vocab.txt", lower_case=False)
    with pytest.raises(NotImplementedError, match="uncased vocabulary"):
        cased.tokenize_with_offsets(tf.constant(["Cafe\u0301"]))
