"""Texts that exercise every normalisation step of the tokenizers, shared by the
id parity and the offset tests."""

from __future__ import annotations

import gzip
import itertools
import json
import random

import pytest

from helpers.paths import REPO

SHARED_CORPORA = REPO.parent / "shared" / "data" / "corpus"

# Inputs that exercise every normalisation step. Literal special tokens such
# as "[MASK]" are left out on purpose: HF matches them in raw text, the
# in-graph tokenizers do not (documented in docs/tokenizers.md).
HARD_INPUTS = [
    "Hello, World! This is ALBERT.",
    "MiXeD CaSe and UPPER lower",
    "Café naïve résumé — Ångström, Zoë, façade, São Paulo",
    "1,000,000 and 9,5",
    "In 1999, 2,500, 12,345,678, ٣,٤ and ½, ², 3⁴,",
    "我爱ALBERT模型2024年",
    "中文，English混合；テスト 한국어",
    "emoji 😀🎉 👩‍👩‍👧 ok",
    "ctrl\x01\x02 chars\x7f and \x1b[0m escape",
    "tab\there\nnew line\r\nwindows\x0bvertical\x0cform\x85nel\u2028ls\u2029ps",
    "zero\u200bwidth\u200djoiner\ufeffbom\u00a0nbsp\u3000ideographic space",
    "",
    "   ",
    "\t\n",
    "``quoted'' text and \"straight\" and ‘curly’ “quotes”",
    "ΟΔΟΣ σοφίας ΣΟΦΟΣ",
    "İstanbul ǅ ﬁne Ⅻ ² … ＡＢＣ①",
    "NUL\x00inside",
    "x" * 150 + " " + "中" * 120,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "e\u0301 a\u0300 combining marks, and lone \u0301 mark",
    "Private\ue000use and \U0010fffd plane 16, and unassigned \u0378",
    "a-b (c) [d] {e} <f> @g #h $i %j ^k &l *m _n +o =p |q \\r ~s `t",
]
LONG_INPUT = ("The year 1,999, café, 我爱模型. " * 400)[:10_000]


def random_inputs(lines: list[str], n: int, seed: int) -> list[str]:
    """Corpus lines mutated with case, accents, numbers, CJK and noise."""
    rng = random.Random(seed)
    extras = ["é", "Ü", "ñ", "1,234,", "9,", "😀", "\t", "\x01", "中文", "  ", "Σ", "ﬁ", "’"]
    out = []
    for _ in range(n):
        chars = list(rng.choice(lines))
        for _ in range(rng.randrange(0, 6)):
            chars.insert(rng.randrange(0, len(chars) + 1), rng.choice(extras))
        text = "".join(chars)
        if rng.random() < 0.3:
            text = text.upper()
        out.append(text)
    return out


def shared_paragraphs(name: str, n: int = 200, chars: int = 400) -> list[str]:
    """The first ``n`` documents of a shared corpus, each its sentences joined and cut
    to ``chars`` characters (full-width forms, quotes, long CJK runs); the test is
    skipped where ../shared/data is not there."""
    path = SHARED_CORPORA / name
    if not path.is_file():
        pytest.skip(f"{path} is not here (../shared/data holds the shared corpora)")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        docs = [json.loads(line)["sentences"] for line in itertools.islice(fh, n)]
    return [" ".join(sentences)[:chars] for sentences in docs]
