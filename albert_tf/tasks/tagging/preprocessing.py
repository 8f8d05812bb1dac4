"""Tagging's preprocessing: texts → the model's windows, and training tags on them.

`pack_tagging` cuts texts into ``[CLS] pieces [SEP]`` windows in-graph, overlapping
by a stride, keeping where every piece came from and which window owns it (where
it has the most context); the SavedModel runs it, and so does training through
`encode_tagging`, which adds each word's BIO tag (`piece_tags`) in its owner only.
`tagging_batches` batches windows for training and evaluation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import tensorflow as tf

from albert_tf.data.batching import padded, padded_batches
from albert_tf.tasks.tagging.data import Entity, TaggingExample
from albert_tf.tokenizers.offsets import check_offsets

#: The label of a piece that is not scored: [CLS], [SEP], padding, the pieces
#: after a word's first, and a piece in a window that does not own it.
IGNORED = -1
#: Items packed per tokenizer call when encoding for training.
_ENCODE_CHUNK = 256
#: Windows sorted by length inside groups of this many batches when shuffling.
BUCKET_BATCHES = 16


def check_stride(stride: int | None, max_seq_length: int) -> int:
    """The step between the starts of a long text's windows, checked: ``stride``, or
    None for a whole window (``max_seq_length - 2`` pieces: windows that do not
    overlap, as exports made before strides read texts).

    >>> check_stride(None, 16), check_stride(5, 16)
    (14, 5)
    """
    width = max_seq_length - 2
    if stride is None:
        return width
    if not 1 <= stride <= width:
        raise ValueError(
            f"tagging_stride={stride}: a window holds max_seq_length - 2 = {width} pieces "
            f"and the next one starts at most that far on; give --tagging_stride from 1 to "
            f"{width} (or raise --max_seq_length)"
        )
    return stride


def half_window(max_seq_length: int) -> int:
    """The default stride of a fine-tuning run: half a window, rounded up, so that
    every piece away from a text's ends has about a quarter of a window of context
    on each side (31 pieces at 128), for about twice the windows of a long text.

    >>> half_window(128)
    63
    """
    return max(1, (max_seq_length - 1) // 2)


def pack_tagging(
    texts: tf.Tensor, tokenizer, max_seq_length: int, stride: int | None = None
) -> dict[str, tf.Tensor]:
    """Raw text → model inputs in windows, and where every piece came from; in-graph.

    A text of ``L`` pieces longer than a window (``W = max_seq_length - 2``
    pieces) gets ``1 + ceil((L - W) / stride)`` windows, the k-th holding its
    pieces from ``k * stride`` on (the last one up to the text's end), each packed
    as ``[CLS] window [SEP]``; a shorter text gets one window, an empty one none.
    The windows of all texts are the model's batch.

    Where windows overlap, a piece is read by each of them; the one that *owns*
    it is the window where it has the most context (BERT's ``run_squad`` rule: the
    highest ``min(pieces left, pieces right) + 0.01 * window length``, the
    earlier window on a tie). Each piece has one owned slot, and the owned
    slots in window order are the texts' pieces in order, so per-piece outputs
    masked with ``owned`` map straight back.

    Args:
        texts: tf.string [B].
        tokenizer: a tokenizer with character offsets (`check_offsets`).
        max_seq_length: longest packed window, [CLS] and [SEP] included (≥ 3).
        stride: pieces between the starts of a text's windows, 1 to ``W``
            (`check_stride`; None: ``W``, windows that do not overlap).

    Returns:
        ``token_ids``, ``segment_ids``, ``padding_mask``: int32 [windows, S];
        ``owned``: bool [windows, S], the slots whose piece the window owns;
        ``window_text``, ``window_start``: int32 [windows], the text each window
        comes from and its first piece's index among that text's pieces;
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
    step = check_stride(stride, max_seq_length)
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.convert_to_tensor(texts, tf.string))
    lengths = tf.cast(ids.row_lengths(), tf.int32)
    extra = tf.maximum(lengths - width, 0)
    windows_per_text = tf.where(lengths > 0, 1 + (extra + step - 1) // step, 0)
    window_text = tf.repeat(tf.range(tf.size(lengths)), windows_per_text)
    window_start = tf.ragged.range(windows_per_text).flat_values * step
    window_length = tf.minimum(width, tf.gather(lengths, window_text) - window_start)
    first_piece = tf.cast(tf.gather(ids.row_starts(), window_text), tf.int32) + window_start
    # Each window's slots as indices into all texts' pieces (ragged [windows, (length)]).
    slots = tf.ragged.range(first_piece, first_piece + window_length)
    piece = slots.flat_values
    # BERT's score, times 100 to stay in integers: 100 * min(left, right) + length.
    left = piece - tf.repeat(first_piece, window_length)
    length = tf.repeat(window_length, window_length)
    score = 100 * tf.minimum(left, length - 1 - left) + length
    num_pieces = tf.size(ids.flat_values)
    best = tf.math.unsorted_segment_max(score, piece, num_pieces)
    # Of a piece's best slots, the first: slots are in window order.
    slot = tf.range(tf.size(piece))
    earliest = tf.math.unsorted_segment_min(
        tf.where(score == tf.gather(best, piece), slot, tf.int32.max), piece, num_pieces
    )
    owned = slots.with_flat_values(tf.equal(slot, tf.gather(earliest, piece)))
    windows = slots.with_flat_values(tf.gather(ids.flat_values, piece))
    num_windows = tf.size(window_text)
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
    unowned = tf.RaggedTensor.from_tensor(tf.zeros([num_windows, 1], tf.bool))  # [CLS], [SEP]
    return {
        "token_ids": token_ids,
        "segment_ids": tf.zeros_like(token_ids),
        "padding_mask": tf.sequence_mask(packed.row_lengths(), tf.shape(token_ids)[1], tf.int32),
        "owned": tf.concat([unowned, owned, unowned], axis=1).to_tensor(
            default_value=False, shape=tf.shape(token_ids)
        ),
        "window_text": window_text,
        "window_start": window_start,
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
    stride: int | None = None,
) -> list[dict]:
    """Packs every item once (`pack_tagging`, windows ``stride`` pieces apart): its
    windows with their tags, and its pieces' spans.

    Returns one dict per item: ``windows``, a list of dicts of 1-D int32
    ``token_ids``, ``segment_ids``, ``padding_mask`` and ``tags``, and bool
    ``owned``, of the window's own length: a piece's tag is in the one window that
    owns it (`IGNORED` in the others, so that training counts its loss once, where
    it has the most context) and `IGNORED` where not scored; ``word_pieces`` (the pieces
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
    encoded: list[dict] = []
    for begin in range(0, len(items), _ENCODE_CHUNK):
        chunk = items[begin : begin + _ENCODE_CHUNK]
        texts = tf.constant([item.text for item in chunk])
        packed = pack_tagging(texts, tokenizer, max_seq_length, stride)
        arrays = {k: packed[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask")}
        lengths = arrays["padding_mask"].sum(-1)
        owned = packed["owned"].numpy()
        window_text = packed["window_text"].numpy()
        window_start = packed["window_start"].numpy()
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
            for w in np.flatnonzero(window_text == row):
                n, begin = lengths[w], window_start[w]
                window = {key: value[w, :n] for key, value in arrays.items()}
                window["owned"] = owned[w, :n]
                inside = np.where(owned[w, 1 : n - 1], tags[begin : begin + n - 2], IGNORED)
                window["tags"] = np.concatenate([[IGNORED], inside, [IGNORED]]).astype(np.int32)
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
