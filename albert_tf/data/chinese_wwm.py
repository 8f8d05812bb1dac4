"""Chinese whole-word masking: word boundaries from a segmenter.

BERT-style WordPiece makes every Chinese character its own piece, and so its
own "word" for masking. Chinese BERT-wwm instead masks whole *words* found by
a segmenter. Here a segmenter (any ``str -> list[str]``; ``"jieba"`` uses
`jieba.lcut` if jieba is installed) marks each single-character CJK piece that
continues a segmenter word; the flags are stored with the example
(``word_continues``) and the input pipeline treats flagged pieces as
continuation pieces. Non-CJK pieces keep the tokenizer's own word starts.

Alignment is by character, in order: the n-th single-CJK-character piece is
matched to the n-th CJK character of the segmented text. When a piece does
not match its character (normalisation changed it), alignment stops for the
rest of the sentence and those pieces stay word starts — a safe fallback.

>>> pieces = ["我", "爱", "北", "京", "天", "安", "门", "ok"]
>>> word_continuation(pieces, ["我", "爱", "北京", "天安门", " ok"])
[False, False, False, True, False, True, True, False]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def is_cjk_char(ch: str) -> bool:
    """CJK Unified Ideographs (and extensions / compatibility), as BERT does."""
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def word_continuation(pieces: Sequence[str], words: Sequence[str]) -> list[bool]:
    """Per piece: True if it is a CJK character continuing a segmenter word."""
    # (character, continues-a-word) for every CJK character, in text order.
    chars: list[tuple[str, bool]] = []
    for word in words:
        first = True
        for ch in word:
            if is_cjk_char(ch):
                chars.append((ch, not first))
                first = False
            elif not ch.isspace():
                first = True  # a non-CJK character inside a "word" breaks it
    out: list[bool] = []
    k = 0
    aligned = True
    for piece in pieces:
        if aligned and len(piece) == 1 and is_cjk_char(piece):
            if k < len(chars) and chars[k][0] == piece:
                out.append(chars[k][1])
                k += 1
                continue
            aligned = False
        out.append(False)
    return out


def get_segmenter(segmenter: str | Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """A callable segmenter; ``"jieba"`` imports jieba (an optional extra)."""
    if callable(segmenter):
        return segmenter
    if segmenter == "jieba":
        try:
            import jieba
        except ImportError as e:
            raise ImportError(
                "Chinese whole-word masking with 'jieba' needs `pip install jieba`"
            ) from e
        jieba.setLogLevel(60)  # silence its start-up banner
        return jieba.lcut
    raise ValueError(f"unknown segmenter {segmenter!r}; use 'jieba' or a callable")
