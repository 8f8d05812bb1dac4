"""The demo models' document split (`albert_tf.recipes.demo_models.items`)."""

from __future__ import annotations

from albert_tf.recipes.demo_models import document_split


def test_document_split_is_stable_and_proportional():
    keys = [f"corpus/doc-{i}" for i in range(20_000)]
    parts = [document_split(k) for k in keys]
    assert parts == [document_split(k) for k in keys]  # no hidden state
    share = {p: parts.count(p) / len(parts) for p in ("test", "finetune", "pretrain")}
    assert abs(share["test"] - 0.10) < 0.01 and abs(share["finetune"] - 0.30) < 0.015
    # A key's bucket does not depend on which other documents are in the corpus.
    assert [document_split(k) for k in keys[::7]] == parts[::7]
