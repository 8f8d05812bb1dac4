"""The pretrained encoders shipped in models/pretrained/: small, loadable, their
tokenizer theirs, and their card's figures those of the run that made them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
from helpers.paths import REPO

import albert_tf
from albert_tf.tokenizers import load_tokenizer

ENCODERS = sorted(p for p in (REPO / "models" / "pretrained").glob("*") if p.is_dir())
MAX_BYTES = 10 * 2**20  # issue 32: at most 10 MB each


@pytest.mark.parametrize("language", ["zh", "en"])
def test_there_is_an_encoder_for_each_language(language):
    cards = [json.loads((p / "card.json").read_text()) for p in ENCODERS]
    assert any(card["language"] == language for card in cards)


@pytest.mark.parametrize("folder", ENCODERS, ids=lambda p: p.name)
def test_shipped_encoder_loads_with_its_tokenizer_and_card(folder):
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    assert size <= MAX_BYTES, f"{folder.name}: {size / 2**20:.1f} MB"
    card = json.loads((folder / "card.json").read_text())
    assert {"language", "data", "steps", "held_out", "rebuild"} <= set(card)
    model = albert_tf.load(folder)
    tokenizer = load_tokenizer(folder / "tokenizer")
    assert tokenizer.vocabulary_size == model.config.vocab_size
    assert card["steps"] > 0 and 0 < card["held_out"]["mlm_accuracy"] < 1
    # Its MLM head, not random weights: a masked piece of news text is among the head's
    # top 10 of the vocabulary far more often than the 10 / vocab_size of chance (a
    # tiny model: held-out top-1 is the card's mlm_accuracy, near 0.14).
    assert _top10_rate(model, tokenizer, SENTENCES[card["language"]]) >= 0.1


SENTENCES = {
    "zh": [
        "中华人民共和国的首都是北京",
        "我们要坚持改革开放，发展社会主义市场经济。",
        "江泽民主席在北京会见了美国总统。",
    ],
    "en": ["the president said that the united states would help the people of the world."],
}


def _top10_rate(model, tokenizer, texts: list[str]) -> float:
    """How often a masked piece is among the MLM head's 10 best guesses (one piece
    masked at a time, every piece of every text)."""
    hits = total = 0
    for text in texts:
        pieces = tokenizer.tokenize(tf.constant([text]))[0].numpy()
        ids = np.concatenate([[tokenizer.cls_id], pieces, [tokenizer.sep_id]]).astype("int32")
        positions = np.arange(1, len(ids) - 1)
        masked = np.tile(ids, (len(positions), 1))
        masked[np.arange(len(positions)), positions] = tokenizer.mask_id
        batch = {
            "token_ids": masked,
            "segment_ids": np.zeros_like(masked),
            "padding_mask": np.ones_like(masked),
            "mask_positions": positions[:, None].astype("int32"),
        }
        logits = np.asarray(model(batch)["mlm_logits"])[:, 0]
        truth = logits[np.arange(len(positions)), ids[positions]]
        hits += int(((logits > truth[:, None]).sum(-1) < 10).sum())
        total += len(positions)
    return hits / total
