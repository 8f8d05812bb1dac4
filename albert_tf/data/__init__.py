"""Corpora, pretraining examples and the dynamic-masking input pipeline."""

from __future__ import annotations

import pathlib

_SAMPLE_DIR = pathlib.Path(__file__).resolve().parent / "sample"


def sample_path(language: str = "en") -> str:
    """Path of the embedded sample corpus (JSON Lines) for ``"en"`` or ``"zh"``.

    >>> sample_path("en").endswith("en_sample.jsonl")
    True
    """
    if language not in ("en", "zh"):
        raise ValueError(
            f"no embedded sample for language {language!r}; use 'en' or 'zh'"
        )
    return str(_SAMPLE_DIR / f"{language}_sample.jsonl")


__all__ = ["sample_path"]
