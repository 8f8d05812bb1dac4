"""Tagging's preprocessing: texts → the model's windows, and training tags on them.

`pack_tagging` cuts texts into ``[CLS] pieces [SEP]`` windows in-graph, keeping
where every piece came from (the SavedModel runs it; so does training through
`encode_tagging`, which adds each word's BIO tag, `piece_tags`).
`tagging_batches` batches windows for training and evaluation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import tensorflow as tf

from albert_tf.data.batching import padded, padded_batches
from albert_tf.tasks.tagging.data import Entity, TaggingExample
from albert_tf.tokenizers.offsets import check_offsets

#: The label of a piece that is not scored: [CLS], [SEP], padding and the
#: pieces after a word's first.
IGNORED = -1
#: Items packed per tokenizer call when encoding for training.
_ENCODE_CHUNK = 256
#: Windows sorted by length inside groups of this many batches when shuffling.
BUCKET_BATCHES = 16


def pack_tagging(texts: tf.Tensor, tokenizer, max_seq_length: int) -> dict[str, tf.Tensor]:
    """Raw text → model inputs in windows, and where every piece came from; in-graph.

    A text longer than ``max_seq_length - 2`` pieces is cut into consecutive
    windows of that many pieces, each packed as ``[CLS] window [SEP]``; the
    windows of all texts are the model's batch. Their pieces, in window order,
    are the texts' pieces in order, so per-piece outputs map straight back.

    Args:
        texts: tf.string [B].
        tokenizer: a tokenizer with character offsets (`check_offsets`).
        max_seq_length: longest packed window, [CLS] and [SEP] included (≥ 3).

    Returns:
        ``token_ids``, ``segment_ids``, ``padding_mask``: int32 [windows, S];
        ``window_text``: int32 [windows], the text each window comes from;
        ``piece_ids``, ``piece_starts``, ``piece_ends``: int32 ragged [B, (pieces)],
        each piece's id and its characters' span in its text (end exclusive);
        ``word_starts``: bool ragged [B, (pieces)], whether a piece begins a word
        (only those are tagged; a text's first piece always does).
    """
    if max_seq_length < 3:
        raise ValueError(
            f"max_seq_length must be at least 3 ([CLS] text [SEP]), got {max_seq_length}"
        )
    check_offsets(tokenizer, "tagging")
    width = max_seq_length - 2
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.convert_to_tensor(texts, tf.string))
    lengths = tf.cast(ids.row_lengths(), tf.int32)
    windows_per_text = (lengths + width - 1) // width
    first_window = tf.cumsum(windows_per_text, exclusive=True)
    position = tf.ragged.range(lengths).flat_values
    window_of_piece = tf.gather(first_window, tf.cast(ids.value_rowids(), tf.int32)) + (
        position // width
    )
    num_windows = tf.reduce_sum(windows_per_text)
    windows = tf.RaggedTensor.from_value_rowids(
        ids.flat_values, tf.cast(window_of_piece, tf.int64), nrows=tf.cast(num_windows, tf.int64)
    )
    column = tf.ones([num_windows, 1], tf.int32)
    packed = tf.concat(
        [
            tf.RaggedTensor.from_tensor(column * tokenizer.cls_id),
            windows,
            tf.RaggedTensor.from_tensor(column * tokenizer.sep_id),
        ],
        axis=1,
    )
    token_ids = packed.to_tensor(default_value=tokenizer.pad_id)
    return {
        "token_ids": token_ids,
        "segment_ids": tf.zeros_like(token_ids),
        "padding_mask": tf.sequence_mask(packed.row_lengths(), tf.shape(token_ids)[1], tf.int32),
        "window_text": tf.repeat(tf.range(tf.size(lengths)), windows_per_text),
        "piece_ids": ids,
        "piece_starts": starts,
        "piece_ends": ends,
        "word_starts": tokenizer.word_starts(ids),
    }


def piece_tags(
    starts: np.ndarray,
    word_starts: np.ndarray,
    word_bounds: tuple[np.ndarray, np.ndarray],
    entities: Sequence[Entity],
    tag_index: dict[str, int],
    text_length: int,
) -> tuple[np.ndarray, int]:
    """BIO tag ids of a text's pieces: the first piece of each word gets the tag of
    the entity its first character lies in (``B-`` for the entity's first word),
    other pieces `IGNORED`. ``word_bounds``: the words' first characters and ends
    (`word_spans`). An entity whose start or end falls inside a word cannot be
    tagged (no tag sequence decodes to it): its words are `IGNORED` too, and the
    second value returned counts such entities.

    >>> tags, lost = piece_tags(np.array([0, 1, 2, 3]), np.array([True] * 4),
    ...     (np.array([0, 1, 2, 3]), np.array([1, 2, 3, 4])), [Entity(1, 3, "PER")],
    ...     {"O": 0, "B-PER": 1, "I-PER": 2}, 4)
    >>> tags.tolist(), lost
    ([0, 1, 2, 0], 0)
    >>> tags, lost = piece_tags(np.array([0, 2]), np.array([True, False]),
    ...     (np.array([0]), np.array([4])), [Entity(0, 3, "PER")],
    ...     {"O": 0, "B-PER": 1, "I-PER": 2}, 4)
    >>> tags.tolist(), lost
    ([-1, -1], 1)
    """
    starts_set, ends_set = (set(bounds.tolist()) for bounds in word_bounds)
    owner = np.full(text_length + 1, -1)
    lost = 0
    for index, entity in enumerate(entities):
        aligned = entity.start in starts_set and entity.end in ends_set
        owner[entity.start : entity.end] = index if aligned else -2
        lost += not aligned
    tags = np.full(len(starts), IGNORED, np.int32)
    tagged: set[int] = set()
    for i in np.flatnonzero(word_starts):
        entity = owner[starts[i]]
        if entity == -2:
            continue  # inside an entity no word boundary matches: not scored
        if entity < 0:
            tags[i] = tag_index["O"]
            continue
        prefix = "I" if entity in tagged else "B"
        tags[i] = tag_index[f"{prefix}-{entities[entity].label}"]
        tagged.add(entity)
    return tags, lost


def word_spans(
    starts: np.ndarray, ends: np.ndarray, word_starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pieces that start words, and each word's characters (start, end exclusive).

    >>> word_spans(np.array([0, 2, 5]), np.array([2, 4, 6]), np.array([True, False, True]))
    (array([0, 2]), array([0, 5]), array([4, 6]))
    """
    first = np.flatnonzero(word_starts)
    last = np.append(first[1:] - 1, len(starts) - 1)[: len(first)]  # no words: none
    return first, starts[first], ends[last]


def encode_tagging(
    items: Sequence[TaggingExample],
    tokenizer,
    max_seq_length: int,
    tag_names: Sequence[str],
) -> list[dict]:
    """Packs every item once: its windows with their tags, and its pieces' spans.

    Returns one dict per item: ``windows``, a list of dicts of 1-D int32
    ``token_ids``, ``segment_ids``, ``padding_mask`` and ``tags`` (`IGNORED`
    where not scored) of the window's own length; ``word_pieces`` (the pieces
    that start words), ``word_start_chars`` and ``word_end_chars`` (`word_spans`);
    ``entities``, the gold spans as ``(start, end, label)`` tuples; ``lost``, the
    entities with a boundary inside a word (`piece_tags`); ``labelled``.
    """
    tag_index = {name: i for i, name in enumerate(tag_names)}
    labels = {e.label for item in items for e in item.entities}
    unknown = labels - {n[2:] for n in tag_names}
    if unknown:
        raise ValueError(
            f"entity labels {sorted(unknown)} are not among the model's tags {list(tag_names)}"
        )
    # Training writes BIO tags (`piece_tags`); a BIOES or IOB1 tagger lacks some.
    missing = sorted(
        f"{p}-{label}" for label in labels for p in "BI" if f"{p}-{label}" not in tag_index
    )
    if missing:
        raise ValueError(
            f"training writes BIO tags, and the model has no {missing}: fine-tune from a "
            "tagger with B- and I- tags for each entity type, or from an encoder"
        )
    width = max_seq_length - 2
    encoded: list[dict] = []
    for begin in range(0, len(items), _ENCODE_CHUNK):
        chunk = items[begin : begin + _ENCODE_CHUNK]
        packed = pack_tagging(tf.constant([item.text for item in chunk]), tokenizer, max_seq_length)
        arrays = {k: packed[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask")}
        lengths = arrays["padding_mask"].sum(-1)
        window_text = packed["window_text"].numpy()
        starts, ends = packed["piece_starts"].to_list(), packed["piece_ends"].to_list()
        word_starts = packed["word_starts"].to_list()
        for row, item in enumerate(chunk):
            piece_starts = np.array(starts[row], np.int32)
            is_word = np.array(word_starts[row], bool)
            first, word_start_chars, word_end_chars = word_spans(
                piece_starts, np.array(ends[row], np.int32), is_word
            )
            tags, lost = piece_tags(
                piece_starts,
                is_word,
                (word_start_chars, word_end_chars),
                item.entities,
                tag_index,
                len(item.text),
            )
            windows = []
            for k, w in enumerate(np.flatnonzero(window_text == row)):
                n = lengths[w]
                window = {key: value[w, :n] for key, value in arrays.items()}
                window["tags"] = np.concatenate(
                    [[IGNORED], tags[k * width : k * width + n - 2], [IGNORED]]
                ).astype(np.int32)
                windows.append(window)
            encoded.append(
                {
                    "windows": windows,
                    "word_pieces": first,
                    "word_start_chars": word_start_chars,
                    "word_end_chars": word_end_chars,
                    "entities": {(e.start, e.end, e.label) for e in item.entities},
                    "lost": lost,
                    "labelled": item.labelled,
                }
            )
    return encoded


def tagging_batches(
    windows: Sequence[dict[str, np.ndarray]], batch_size: int, shuffle: bool = False, seed: int = 0
) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray]]:
    """One pass over ``windows`` in batches padded to their own longest window;
    labels int32 [batch, length] (`IGNORED` in the padding).

    With ``shuffle``, windows are shuffled, sorted by length inside groups of
    `BUCKET_BATCHES` batches, and the batches shuffled again, all from ``seed``.
    """
    for features, rows in padded_batches(
        windows, batch_size, shuffle=shuffle, seed=seed, bucket_batches=BUCKET_BATCHES
    ):
        yield features, padded(rows, "tags", fill=IGNORED)  # a window's tags: as long as its ids
