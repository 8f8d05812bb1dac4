"""The demo models' data: documents split by a stable hash, pretraining text and
"which option continues the context?" items."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import random
import zlib
from collections.abc import Sequence

from albert_tf.storage import write_json_atomic

#: `document_split` buckets: of 100, these go to test and to fine-tuning; the
#: rest are pretraining text.
TEST_PERCENT = 10
FINETUNE_PERCENT = 30
# The context of an item: the previous sentence and earlier ones within this budget.
CONTEXT_CHARS = {"zh": 150, "en": 300}
#: The languages there is a demo model for.
LANGUAGES = tuple(CONTEXT_CHARS)
MAX_TEST_ITEMS, MAX_DEV_ITEMS = 2000, 600
#: The test items again with only the sentence before the options as context.
ONE_SENTENCE = "test_one_sentence"
#: What prepare.json records of how items are made: 2 = training contexts of varying
#: length and the one-sentence test items (and, for pretraining, folding tokenizers).
ITEMS_VERSION = 2


def document_split(
    key: str, *, test_percent: int = TEST_PERCENT, finetune_percent: int = FINETUNE_PERCENT
) -> str:
    """``"test"``, ``"finetune"`` or ``"pretrain"`` for a document, from its key alone.

    A stable hash (CRC-32 of ``key``, e.g. ``"source/document-id"``), so the split
    is the same on every machine and for any subset or order of the corpus.

    >>> [document_split(k) for k in ("a", "b", "d")]
    ['test', 'pretrain', 'finetune']
    """
    bucket = zlib.crc32(key.encode("utf-8")) % 100
    if bucket < test_percent:
        return "test"
    if bucket < test_percent + finetune_percent:
        return "finetune"
    return "pretrain"


def source_name(path: str) -> str:
    """A corpus or set's name in document keys and reports: its file name up to the
    first dot."""
    name = os.path.basename(path)
    return name.split(".", 1)[0]


def prepare(
    lang: str,
    corpora: Sequence[str],
    out: str,
    *,
    seed: int = 0,
    pretrain_on_finetune_text: bool = False,
) -> dict:
    """Splits the documents of ``corpora`` and writes, into ``out``, the pretraining
    text (``pretrain.jsonl``), the next-sentence items (``train``, ``dev``, ``test``
    and `ONE_SENTENCE` ``.jsonl``) and ``prepare.json``, which it returns.

    Args:
        lang: ``"zh"`` or ``"en"`` (the context budget, how sentences are joined).
        corpora: resolved corpus files.
        out: the data folder to write.
        seed: the items' distractors and answer positions, and the dev documents.
        pretrain_on_finetune_text: also pretrain on the fine-tuning documents no dev
            item comes from.
    """
    from albert_tf.data import read_documents
    from albert_tf.tasks.multiple_choice.next_sentence import next_sentence_items

    parts: dict[str, list[list[str]]] = {"pretrain": [], "finetune": [], "test": []}
    groups: dict[str, list[str]] = {"pretrain": [], "finetune": [], "test": []}
    for path in corpora:
        source = source_name(path)
        for index, doc in enumerate(read_documents(path)):
            part = document_split(f"{source}/{index}")
            parts[part].append(doc)
            groups[part].append(source)
    os.makedirs(out, exist_ok=True)
    common = dict(lang=lang, context_chars=CONTEXT_CHARS[lang])
    # Training contexts run from the previous sentence alone (what people type into
    # the demo) up to the full budget; test items come twice, with the same options
    # and answers: one-sentence contexts, and contexts filling the budget.
    items = {
        part: next_sentence_items(
            parts[part],
            groups=groups[part],
            seed=seed + k,
            prefix=part,
            vary_context=part != "test",
            **common,
        )
        for k, part in enumerate(("finetune", "test", "pretrain"))
    }
    one_sentence = next_sentence_items(
        parts["test"], groups=groups["test"], seed=seed + 1, prefix="test", lang=lang
    )
    # Dev items come from fine-tuning documents that no training item comes
    # from; training items from the other fine-tuning documents and from the
    # pretraining documents (the task is new to the model, the text is not).
    # Test documents are never seen.
    rng = random.Random(seed)
    order = list(range(len(parts["finetune"])))
    rng.shuffle(order)
    per_doc = collections.Counter(_document_of(i) for i in items["finetune"])
    dev_docs: set[int] = set()
    for d in order[: len(order) // 2]:  # at most half: a small corpus trains too
        if sum(per_doc[x] for x in dev_docs) >= MAX_DEV_ITEMS:
            break
        dev_docs.add(d)
    pretraining_text = list(parts["pretrain"])
    if pretrain_on_finetune_text:
        pretraining_text += [d for k, d in enumerate(parts["finetune"]) if k not in dev_docs]
    with open(os.path.join(out, "pretrain.jsonl"), "w", encoding="utf-8") as f:
        for doc in pretraining_text:
            f.write(json.dumps({"sentences": doc}, ensure_ascii=False) + "\n")
    dev = [i for i in items["finetune"] if _document_of(i) in dev_docs]
    train = [i for i in items["finetune"] if _document_of(i) not in dev_docs]
    train += items["pretrain"]
    for split in (dev, train):
        rng.shuffle(split)
    order = list(range(len(items["test"])))
    rng.shuffle(order)
    order = order[:MAX_TEST_ITEMS]
    splits = {
        "dev": dev[:MAX_DEV_ITEMS],
        "train": train,
        "test": [items["test"][i] for i in order],
        ONE_SENTENCE: [one_sentence[i] for i in order],
    }
    for name, split in splits.items():
        with open(os.path.join(out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            for item in split:  # the JSON Lines layout read_multiple_choice reads
                f.write(json.dumps(dataclasses.asdict(item), ensure_ascii=False) + "\n")
    summary = {
        "items_version": ITEMS_VERSION,
        "corpora": [os.path.basename(p) for p in corpora],
        "documents": {k: len(v) for k, v in parts.items()},
        "pretrain_on_finetune_text": pretrain_on_finetune_text,
        "pretraining_documents": len(pretraining_text),
        "pretraining_sentences": sum(len(d) for d in pretraining_text),
        "items": {k: len(v) for k, v in splits.items()},
    }
    write_json_atomic(os.path.join(out, "prepare.json"), summary)
    return summary


def _document_of(item) -> int:
    """The document index in an item id ``{prefix}-{document}-{sentence}``."""
    return int(item.id.split("-")[-2])
