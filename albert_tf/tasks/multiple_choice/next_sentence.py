""" "Which option continues the context?" items, made from running text.

No labels are needed: the context is a document's sentences up to some point, the
right option is the sentence that follows, and the distractors are sentences of
*other* documents of the same source (so style alone does not give the answer).
``finetune --train_files=sample:<lang>`` trains on such items from the embedded
samples; the demo models (`albert_tf.recipes.demo_models`) are fine-tuned and
scored on them, built from documents held out of pretraining.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from albert_tf.tasks.multiple_choice.data import MultipleChoiceExample


def _context(sentences: Sequence[str], end: int, max_chars: int, joiner: str) -> str:
    """The sentence before ``end`` and as many earlier ones as fit in ``max_chars``."""
    start = end - 1
    used = len(sentences[start])
    while start > 0 and used + len(sentences[start - 1]) <= max_chars:
        start -= 1
        used += len(sentences[start])
    return joiner.join(sentences[start:end])


def next_sentence_items(
    documents: Sequence[Sequence[str]],
    *,
    num_options: int = 4,
    seed: int = 0,
    lang: str = "",
    prefix: str = "next",
    context_chars: int = 0,
    vary_context: bool = False,
    groups: Sequence[str] | None = None,
) -> list[MultipleChoiceExample]:
    """One item per sentence that has a predecessor, in document order.

    Args:
        documents: lists of sentences, in order.
        num_options: options per item (the true next sentence and distractors).
        seed: the distractors and the right option's position.
        lang: stored on each item.
        prefix: item ids are ``{prefix}-{document}-{sentence}``.
        context_chars: the context is the previous sentence plus earlier ones
            while the total stays within this many characters (0: only the
            previous sentence).
        vary_context: draw each item's budget uniformly from 0 to
            ``context_chars`` instead, so contexts run from the previous sentence
            alone (as people type into the demo) up to the full budget.
        groups: one label per document (e.g. its source corpus); distractors come
            only from other documents of the same group. Default: one group.

    >>> docs = [["A1.", "A2.", "A3."], ["B1.", "B2."], ["C1.", "C2."]]
    >>> item = next_sentence_items(docs, num_options=3)[0]
    >>> item.context, item.options[item.label]
    ('A1.', 'A2.')
    >>> next_sentence_items(docs, num_options=3, context_chars=6)[1].context
    'A1. A2.'
    >>> long = [["A1.", "A2.", "A3.", "A4.", "A5."], *docs[1:]] * 20
    >>> def sentences(**kw):
    ...     items = next_sentence_items(long, num_options=3, context_chars=20, **kw)
    ...     return sorted({i.context.count(".") for i in items if i.id.endswith("-3")})
    >>> sentences(), sentences(vary_context=True)
    ([4], [1, 2, 3, 4])
    """
    if groups is not None and len(groups) != len(documents):
        raise ValueError(f"{len(groups)} groups for {len(documents)} documents")
    group_of = list(groups) if groups is not None else [""] * len(documents)
    pools: dict[str, list[tuple[int, str]]] = {}
    for d, doc in enumerate(documents):
        pools.setdefault(group_of[d], []).extend((d, s) for s in doc)
    joiner = "" if lang == "zh" else " "
    rng = random.Random(seed)
    items: list[MultipleChoiceExample] = []
    for d, doc in enumerate(documents):
        pool = pools[group_of[d]]
        for i in range(1, len(doc)):
            distractors: list[str] = []
            for _ in range(100 * num_options):
                if len(distractors) == num_options - 1:
                    break
                other_doc, sentence = rng.choice(pool)
                if other_doc != d and sentence not in distractors and sentence != doc[i]:
                    distractors.append(sentence)
            if len(distractors) < num_options - 1:
                continue  # too few other documents in this group
            label = rng.randrange(num_options)
            options = distractors[:label] + [doc[i]] + distractors[label:]
            budget = rng.randint(0, context_chars) if vary_context else context_chars
            context = _context(doc, i, budget, joiner)
            items.append(
                MultipleChoiceExample(
                    f"{prefix}-{d}-{i - 1}", context, "", options, label, lang, "next_sentence"
                )
            )
    return items
