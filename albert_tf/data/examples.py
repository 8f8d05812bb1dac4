"""Pretraining examples: segment pairs for SOP (or NSP, or none) from a document.

Follows google-research/albert ``create_pretraining_data.py``:

* Target length ``max_seq_length - 3`` (room for [CLS] A [SEP] B [SEP]); with
  probability ``short_seq_prob`` a random shorter target in
  ``[2, max_seq_length - 3]``, so the model also sees short inputs.
* Consecutive sentences of one document fill a chunk up to the target; the
  chunk is split at a random sentence boundary into A and B.
* **sop** — with probability 0.5, A and B swap places; label 1 = swapped.
* **nsp** — with probability 0.5 (always, for a one-sentence chunk), B comes
  from a random other document; label 1 = random. The chunk's unused
  sentences go back to be used again, as in the reference.
* **none** — a single segment, ``[CLS] A [SEP]``, label 0.
* The pair is truncated to fit by removing tokens from the longer side, from
  its front or back at random.

Differences from the reference, on purpose:

* In SOP mode a chunk of a single sentence (a sentence longer than the
  target, or a document's last leftover sentence) is split inside the
  sentence at a random token, instead of taking B from another document —
  which would mix NSP-style negatives into SOP.
* Documents with fewer than two sentences are skipped in sop/nsp mode and
  counted (``one_sentence_document``).
* Masking is not done here: shards hold unmasked pairs; the input pipeline
  masks dynamically (`albert_tf.data.masking`).

Pair building is a pure function of (the document pool, a document index, a
`random.Random`, the options): it reads no files and holds no state, so any
writer — `albert_tf.data.shards` today — can call it. `serialize_example` is
the shard record format.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import random
import threading
from collections.abc import Sequence
from typing import Any

from albert_tf.data.packed_document import PackedDocument

#: Sentence-level tasks: sentence-order prediction, next-sentence prediction,
#: or none (single segments). The one definition; the trainer and the CLIs
#: import it from here.
SENTENCE_TASKS = ("sop", "nsp", "none")
#: How single segments (``sentence_task="none"``) are filled, after RoBERTa
#: (Liu et al. 2019, section 4.2): DOC-SENTENCES stop at the end of a document;
#: FULL-SENTENCES run on into the next one, with a [SEP] between documents.
PACKINGS = ("doc_sentences", "full_sentences")


@dataclasses.dataclass
class PretrainingExample:
    """One unmasked example: ``[CLS] A [SEP] B [SEP]`` and its label."""

    token_ids: list[int]
    segment_ids: list[int]
    sentence_order_label: int
    #: 1 where a piece continues a segmenter word (Chinese whole-word
    #: masking, `albert_tf.data.chinese_wwm`); None when not segmented.
    word_continues: list[int] | None = None


def truncate_seq_pair(
    tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random
) -> None:
    """Truncates in place, one token at a time from the longer list, from its
    front or back at random (avoids always cutting the same end).

    >>> a, b = list(range(6)), [9, 9]
    >>> truncate_seq_pair(a, b, 5, random.Random(0)); len(a), len(b)
    (3, 2)
    """
    # The official loop deletes one token per draw from the longer list (B on
    # a tie). Which list each deletion hits follows from the lengths alone:
    # the longer one until the two are level, then B and A in turn. So the
    # same draws, in the same order, are taken at once and split between them.
    la, lb = len(tokens_a), len(tokens_b)
    excess = la + lb - max_num_tokens
    if excess <= 0:
        return
    draw = rng.random
    fronts = [draw() < 0.5 for _ in range(excess)]
    if la > lb:
        lead = min(excess, la - lb)
        rest = fronts[lead:]
        draws_a, draws_b = fronts[:lead] + rest[1::2], rest[0::2]
    else:
        lead = min(excess, lb - la + 1)
        rest = fronts[lead:]
        draws_a, draws_b = rest[0::2], fronts[:lead] + rest[1::2]
    for tokens, draws in ((tokens_a, draws_a), (tokens_b, draws_b)):
        front = sum(draws)
        del tokens[len(tokens) - (len(draws) - front) :], tokens[:front]


def pack_pair(
    tokens_a: Sequence[int], tokens_b: Sequence[int], cls_id: int, sep_id: int
) -> tuple[list[int], list[int]]:
    """``[CLS] A [SEP] B [SEP]`` (or ``[CLS] A [SEP]`` for empty B), segment
    ids 0 for [CLS] A [SEP] and 1 for B [SEP].

    >>> pack_pair([7, 8], [9], cls_id=2, sep_id=3)
    ([2, 7, 8, 3, 9, 3], [0, 0, 0, 0, 1, 1])
    """
    ids = [cls_id, *tokens_a, sep_id]
    segs = [0] * len(ids)
    if tokens_b:
        ids += [*tokens_b, sep_id]
        segs += [1] * (len(tokens_b) + 1)
    return ids, segs


def create_examples_from_document(
    documents: Sequence[Sequence[Sequence[int]]],
    doc_index: int,
    *,
    max_seq_length: int,
    cls_id: int,
    sep_id: int,
    rng: random.Random,
    sentence_task: str = "sop",
    short_seq_prob: float = 0.1,
    stats: collections.Counter | None = None,
) -> list[PretrainingExample]:
    """Examples from ``documents[doc_index]`` (a list of sentences of ids, or
    a `PackedDocument`, which is faster: segments are then single slices).

    ``documents`` is the whole pool, which NSP draws random B segments from.

    >>> doc = [[10, 11], [12, 13, 14], [15]]
    >>> exs = create_examples_from_document([doc], 0, max_seq_length=16,
    ...     cls_id=2, sep_id=3, rng=random.Random(1), short_seq_prob=0.0)
    >>> [(e.token_ids, e.sentence_order_label) for e in exs]
    [([2, 12, 13, 14, 15, 3, 10, 11, 3], 1)]
    """
    if sentence_task not in SENTENCE_TASKS:
        raise ValueError(f"sentence_task must be one of {SENTENCE_TASKS}")
    stats = stats if stats is not None else collections.Counter()
    document = _packed(documents[doc_index])
    pair = sentence_task != "none"
    if pair and len(document) < 2:
        stats["one_sentence_document"] += 1
        return []
    max_num_tokens = max_seq_length - (3 if pair else 2)
    target = max_num_tokens
    if rng.random() < short_seq_prob:
        target = rng.randint(2, max_num_tokens)

    examples: list[PretrainingExample] = []
    # The official loop adds one sentence at a time until the chunk reaches
    # the target or the document ends; over the running sentence ends, the
    # chunk's last sentence is found by bisection and segments are slices.
    ends = document.ends
    last = len(ends) - 1
    start = 0
    while start <= last:
        before = document.start(start)
        i = min(bisect.bisect_left(ends, before + target, start), last)
        sentences = i - start + 1
        label = 0
        if not pair:
            tokens_a = document.span(start, i + 1)
            tokens_b: list[int] = []
        else:
            a_end = rng.randint(1, sentences - 1) if sentences >= 2 else 1
            tokens_a = document.span(start, start + a_end)
            tokens_b = document.span(start + a_end, i + 1)
            if sentence_task == "nsp" and (sentences == 1 or rng.random() < 0.5):
                label = 1
                tokens_b = _random_segment(documents, doc_index, target - len(tokens_a), rng, stats)
                # Put back the sentences B did not use.
                i -= sentences - a_end
            elif sentence_task == "sop":
                if sentences == 1:
                    if len(tokens_a) < 2:
                        stats["one_token_chunk"] += 1
                        tokens_a = []
                    else:
                        cut = rng.randint(1, len(tokens_a) - 1)
                        tokens_a, tokens_b = tokens_a[:cut], tokens_a[cut:]
                        stats["single_sentence_chunk_split"] += 1
                if rng.random() < 0.5:
                    tokens_a, tokens_b = tokens_b, tokens_a
                    label = 1
        if tokens_a and (tokens_b or not pair):
            truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            ids, segs = pack_pair(tokens_a, tokens_b, cls_id, sep_id)
            examples.append(PretrainingExample(ids, segs, label))
        start = i + 1
    return examples


def create_full_sentence_examples(
    documents: Sequence[Sequence[Sequence[int]]],
    *,
    max_seq_length: int,
    cls_id: int,
    sep_id: int,
) -> list[PretrainingExample]:
    """RoBERTa's FULL-SENTENCES inputs from consecutive ``documents``.

    Single segments ``[CLS] ... [SEP]`` filled with whole sentences in order,
    crossing document boundaries with an extra [SEP] between two documents; a
    sentence longer than a whole input is cut to fit. No randomness: what
    differs between passes is the dynamic masking.

    >>> docs = [[[10, 11], [12]], [[20, 21, 22]]]
    >>> [e.token_ids for e in create_full_sentence_examples(
    ...     docs, max_seq_length=9, cls_id=2, sep_id=3)]
    [[2, 10, 11, 12, 3, 20, 21, 22, 3]]
    >>> [e.token_ids for e in create_full_sentence_examples(
    ...     docs, max_seq_length=7, cls_id=2, sep_id=3)]
    [[2, 10, 11, 12, 3], [2, 20, 21, 22, 3]]
    """
    max_num_tokens = max_seq_length - 2
    examples: list[PretrainingExample] = []
    current: list[int] = []

    def flush() -> None:
        while current and current[-1] == sep_id:
            current.pop()  # a boundary separator does not end an input
        if current:
            ids, segs = pack_pair(current[:max_num_tokens], [], cls_id, sep_id)
            examples.append(PretrainingExample(ids, segs, 0))
        current.clear()

    for d, document in enumerate(documents):
        if d and current:
            current.append(sep_id)
        for sentence in document:
            if current and len(current) + len(sentence) > max_num_tokens:
                flush()
            current.extend(sentence)
            if len(current) >= max_num_tokens:
                flush()
    flush()
    return examples


def _random_segment(
    documents: Sequence[Sequence[Sequence[int]]],
    doc_index: int,
    target_len: int,
    rng: random.Random,
    stats: collections.Counter,
) -> list[int]:
    if len(documents) < 2:
        stats["nsp_single_document_pool"] += 1
        other = documents[doc_index]
    else:
        j = rng.randrange(len(documents) - 1)
        other = documents[j + 1 if j >= doc_index else j]
    start = rng.randrange(len(other))
    # Sentences from ``start`` on, until target_len ids are reached (at least one).
    packed = _packed(other)
    before = packed.start(start)
    stop = min(bisect.bisect_left(packed.ends, before + target_len, start), len(packed) - 1)
    return packed.span(start, stop + 1)


def _packed(document: Sequence[Sequence[int]]) -> PackedDocument:
    if isinstance(document, PackedDocument):
        return document
    return PackedDocument.from_sentences(document)


_FEATURES = ("token_ids", "segment_ids", "sentence_order_label", "word_continues")

# One reusable Example per thread and feature set: replacing the values of its
# repeated fields is 1.6x faster than building a new message per example.
# Thread-local because Beam may run DoFns in threads.
_prototypes = threading.local()


def _prototype(segmented: bool) -> tuple[Any, list[Any]]:
    cache = getattr(_prototypes, "cache", None)
    if cache is None:
        cache = _prototypes.cache = {}
    if segmented not in cache:
        # Imported on first use: TensorFlow is heavy.
        from tensorflow.core.example import example_pb2

        proto = example_pb2.Example()
        feature = proto.features.feature
        names = _FEATURES if segmented else _FEATURES[:3]
        cache[segmented] = (proto, [feature[name].int64_list.value for name in names])
    return cache[segmented]


def serialize_example(example: PretrainingExample) -> bytes:
    """A `tf.train.Example` with int64 lists ``token_ids``, ``segment_ids``
    (unpadded), int64 ``sentence_order_label`` and, for segmented Chinese,
    ``word_continues``; the same example always gives the same bytes."""
    segmented = example.word_continues is not None
    proto, fields = _prototype(segmented)
    fields[0][:] = example.token_ids
    fields[1][:] = example.segment_ids
    fields[2][:] = (example.sentence_order_label,)
    if segmented:
        fields[3][:] = example.word_continues
    # Features is a protobuf map; without deterministic=True its entries are
    # serialized in an order that depends on the process's hash seed, and
    # shards would differ between runs (and between worker processes).
    return proto.SerializeToString(deterministic=True)
