"""Shared fixtures: a SentencePiece model and a WordPiece vocab built by the
tests themselves from the in-repo sample corpora plus text written here."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from helpers.paths import REPO

from albert_tf.data.corpus import iter_sentences
from albert_tf.tokenizers.sentencepiece import SentencePieceTokenizer
from albert_tf.tokenizers.sentencepiece_training import train_sentencepiece
from albert_tf.tokenizers.wordpiece import WordPieceTokenizer, train_wordpiece

SAMPLE_DIR = REPO / "albert_tf" / "data" / "sample"


def _sample(name: str, limit: int) -> list[str]:
    path = SAMPLE_DIR / name
    if not path.is_file():  # the sample corpora are optional for these tests
        return []
    return list(iter_sentences([path]))[:limit]


def numeric_lines(n: int, seed: int = 0) -> list[str]:
    """English-ish lines dense in comma-grouped numbers, so that pieces such
    as "000," enter the vocabulary and the digit-comma rule has work to do."""
    rng = random.Random(seed)
    # Non-ASCII snippets, so parity failures in case/accent handling show up
    # as different ids rather than as [UNK] on both sides.
    extras = ["ΟΔΟΣ σοφίας ΣΟΦΟΣ", "Ångström façade", "ﬁne Ⅻ ½", "İstanbul"]
    words = ["total", "budget", "people", "votes", "miles", "tons", "sales", "cost"]
    lines = []
    for _ in range(n):
        a, b = rng.randrange(1000, 10**7), rng.randrange(1, 99)
        w = rng.choice(words)
        lines.append(
            f"In {rng.randrange(1900, 2030)}, the {w} was {a:,}, up {b},{rng.randrange(100, 999)}, "
            f"or {rng.randrange(1, 9)},{rng.randrange(0, 9)} percent; Café naïve résumé. "
            + rng.choice(extras)
        )
    return lines


@pytest.fixture(scope="session")
def english_lines() -> list[str]:
    return _sample("en_sample.jsonl", 3000) + numeric_lines(1500)


@pytest.fixture(scope="session")
def chinese_lines() -> list[str]:
    return (
        _sample("zh_sample.jsonl", 600)
        + _sample("en_sample.jsonl", 150)
        + ["我爱ALBERT模型，它在2024年发布。", "中文分词：每个汉字单独成词。"] * 20
        + numeric_lines(100)
    )


@pytest.fixture(scope="session")
def sp_dir(tmp_path_factory: pytest.TempPathFactory, english_lines: list[str]) -> Path:
    out = tmp_path_factory.mktemp("spm")
    # The reference recipe, as an imported model has it: no folding.
    train_sentencepiece(english_lines, out, vocab_size=1500, fold_punctuation=False)
    return out


@pytest.fixture(scope="session")
def sp_tokenizer(sp_dir: Path) -> SentencePieceTokenizer:
    return SentencePieceTokenizer.from_file(sp_dir / "spiece.model")


@pytest.fixture(scope="session")
def wp_dir(tmp_path_factory: pytest.TempPathFactory, chinese_lines: list[str]) -> Path:
    out = tmp_path_factory.mktemp("wordpiece")
    # As an imported Google/HF vocabulary: no NFKC, full-width characters kept.
    train_wordpiece(chinese_lines, out, vocab_size=2000, num_unused=20, nfkc=False)
    return out


@pytest.fixture(scope="session")
def wp_tokenizer(wp_dir: Path) -> WordPieceTokenizer:
    return WordPieceTokenizer(wp_dir / "vocab.txt")
