"""Tagging's decoding: a tagger's tags, and tag probabilities → entities, in-graph.

The one implementation the SavedModel (`TaggerServingModule`), the trainer's
evaluation and the CoNLL reader's gold tags all run, in steps:

1. `words`: the texts' piece probabilities → their words' (`aggregate_pieces`:
   a word's first piece speaks for it, or the mean of its pieces, or its most
   confident piece; `WORD_AGGREGATIONS`) and each word's characters;
2. `choose_tags`: each word's tag, the most probable one or, with a CRF head,
   the best chain over each text's words (Viterbi);
3. `chunk`: conlleval's chunks of the tags, read through the tagger's
   `TagScheme` (BIO, IOB1 or BIOES, in any order);
4. `entities`: the chunks as character spans, labels and scores (per word, its
   chosen tag's probability, or with a CRF its marginal in the chain,
   `chain_marginals`; per entity, the mean over its words).

`decode_entities` runs 2 to 4; `chunks` runs 3 on tag names (gold CoNLL tags,
tests). A tagger's tags are ``O`` and ``B-X``/``I-X`` (`tag_names`), or any
BIO, IOB1 or BIOES set a converted tagger brings (`tag_scheme`).

Example:
    >>> chunks(["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG", "S-ORG"])
    [('PER', 0, 1), ('LOC', 3, 3), ('LOC', 4, 4), ('ORG', 5, 5), ('ORG', 6, 6)]
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence

import tensorflow as tf

from albert_tf.tasks.tagging.settings import WORD_AGGREGATIONS

# The smallest normal float32: a probability that underflowed to 0 keeps a finite log.
_TINY = 1.1754944e-38


def tag_names(labels: Iterable[str]) -> list[str]:
    """The BIO tags of entity labels: ``O``, then ``B-`` and ``I-`` of each, sorted.

    >>> tag_names(["PER", "LOC", "PER"])
    ['O', 'B-LOC', 'I-LOC', 'B-PER', 'I-PER']
    """
    return ["O"] + [f"{prefix}-{label}" for label in sorted(set(labels)) for prefix in "BI"]


@dataclasses.dataclass(frozen=True)
class TagScheme:
    """How a tagger's outputs decode, whatever their order and scheme (BIO, IOB1,
    BIOES): the entity types, and per tag its type's index (-1 for ``O``), whether
    it opens an entity (``B-``, ``S-``) and whether an entity ends with it (``E-``,
    ``S-``). `chunk` reads these.

    >>> scheme = tag_scheme(["B-PER", "O", "E-PER", "S-LOC", "I-PER"])
    >>> scheme.types, scheme.type_of
    (['PER', 'LOC'], [0, -1, 0, 1, 0])
    >>> scheme.opens, scheme.closes
    ([True, False, False, True, False], [False, False, True, True, False])
    """

    types: list[str]
    type_of: list[int]
    opens: list[bool]
    closes: list[bool]


def tag_scheme(tag_names: Sequence[str]) -> TagScheme:
    """The `TagScheme` of a tagger's tags.

    Raises:
      ValueError: a tag is neither ``O`` nor ``B-X``/``I-X``/``E-X``/``S-X``, a tag
        repeats, or there is no ``O``.
    """
    names = list(tag_names)
    bad = [n for n in names if n != "O" and not (n[:2] in ("B-", "I-", "E-", "S-") and n[2:])]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if bad or repeated or "O" not in names:
        problem = (
            f"tags {bad} are not 'O' or 'B-X', 'I-X', 'E-X', 'S-X'"
            if bad
            else f"tags {repeated} repeat"
            if repeated
            else "there is no 'O' tag"
        )
        raise ValueError(
            f"{problem}: a tagger's tags are 'O' and BIO or BIOES tags of entity types, "
            f"as tag_names() makes them; got {names}"
        )
    types = list(dict.fromkeys(n[2:] for n in names if n != "O"))
    return TagScheme(
        types=types,
        type_of=[-1 if n == "O" else types.index(n[2:]) for n in names],
        opens=[n[:1] in ("B", "S") for n in names],
        closes=[n[:1] in ("E", "S") for n in names],
    )


def check_tag_names(tag_names: Sequence[str]) -> None:
    """Refuses tags a tagger cannot decode (`tag_scheme`).

    >>> check_tag_names(["O", "B-PER", "I-PER"])
    >>> check_tag_names(["PER", "O"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: tags ['PER'] are not 'O' or 'B-X', 'I-X', 'E-X', 'S-X': ...
    """
    tag_scheme(tag_names)


# -- the steps, in-graph ---------------------------------------------------------


def check_word_aggregation(aggregation: str) -> None:
    """Refuses a word aggregation that is not one of `WORD_AGGREGATIONS`.

    >>> check_word_aggregation("max")
    >>> check_word_aggregation("mean")
    Traceback (most recent call last):
    ...
    ValueError: word aggregation 'mean' is not one of first, average, max
    """
    if aggregation not in WORD_AGGREGATIONS:
        raise ValueError(
            f"word aggregation {aggregation!r} is not one of {', '.join(WORD_AGGREGATIONS)}"
        )


def aggregate_pieces(
    probabilities: tf.Tensor, word_starts: tf.Tensor, aggregation: str = "first"
) -> tf.Tensor:
    """float32 [words, tags]: each word's tag probabilities from its pieces' rows.

    A word is a word-start piece and the continuation pieces after it. ``"first"``:
    the first piece's row; ``"average"``: the mean of the word's rows; ``"max"``: the
    row of the word's piece whose largest probability is largest (the first such
    piece on a tie). The Hugging Face pipeline's strategies of the same names pick
    the same rows; its "simple" and "none" are not word-level.

    Args:
        probabilities: float32 [pieces, tags], in order (several texts may follow
            one another: each text's first piece starts a word).
        word_starts: bool [pieces], whether each piece begins a word.
        aggregation: one of `WORD_AGGREGATIONS`.

    Example:
        >>> import numpy as np
        >>> p = np.array([[0.6, 0.4], [0.1, 0.9], [0.7, 0.3]], "float32")
        >>> starts = np.array([True, False, True])
        >>> for how in WORD_AGGREGATIONS:
        ...     print(how, aggregate_pieces(p, starts, how).numpy().astype(float).round(2).tolist())
        first [[0.6, 0.4], [0.7, 0.3]]
        average [[0.35, 0.65], [0.7, 0.3]]
        max [[0.1, 0.9], [0.7, 0.3]]
    """
    check_word_aggregation(aggregation)
    probabilities = tf.convert_to_tensor(probabilities)
    is_word = tf.cast(word_starts, tf.bool)
    if aggregation == "first":
        return tf.gather(probabilities, tf.where(is_word)[:, 0])
    word_of_piece = tf.cumsum(tf.cast(is_word, tf.int32)) - 1
    num_words = tf.reduce_sum(tf.cast(is_word, tf.int32))
    if aggregation == "average":
        return tf.math.unsorted_segment_mean(probabilities, word_of_piece, num_words)
    confidence = tf.reduce_max(probabilities, -1)
    most = tf.math.unsorted_segment_max(confidence, word_of_piece, num_words)
    piece = tf.range(tf.shape(confidence)[0])
    candidate = tf.where(confidence == tf.gather(most, word_of_piece), piece, tf.int32.max)
    return tf.gather(
        probabilities, tf.math.unsorted_segment_min(candidate, word_of_piece, num_words)
    )


def words(
    probabilities: tf.Tensor, packed: dict[str, tf.Tensor], aggregation: str = "first"
) -> dict[str, tf.RaggedTensor]:
    """Pieces → words: each word's tag probabilities (`aggregate_pieces`) and characters.

    Each piece has one probability row: the one of the window that owns it (where it
    has the most context, `pack_tagging`'s ``owned``), picked before this step.

    Args:
        probabilities: float32 [pieces of all texts, tags], in the texts' piece order.
        packed: `albert_tf.tasks.tagging.preprocessing.pack_tagging`'s output
            (``piece_ids``, ``piece_starts``, ``piece_ends``, ``word_starts``).
        aggregation: how a word's pieces give its probabilities, one of
            `WORD_AGGREGATIONS` (``"first"``: its first piece's).

    Returns:
        ``probabilities`` float32 ragged [texts, (words), tags]; ``starts``, ``ends``
        int32 ragged [texts, (words)]: each word's characters (end exclusive).
    """
    check_word_aggregation(aggregation)
    is_word = packed["word_starts"].flat_values
    rows = tf.cast(packed["piece_ids"].value_rowids(), tf.int32)
    nrows = packed["piece_ids"].nrows()
    # A word: a word-start piece and the continuation pieces after it.
    word_of_piece = tf.cumsum(tf.cast(is_word, tf.int32)) - 1
    num_words = tf.reduce_sum(tf.cast(is_word, tf.int32))
    first = tf.where(is_word)[:, 0]
    word_rows = tf.cast(tf.gather(rows, first), tf.int64)

    def per_text(values: tf.Tensor) -> tf.RaggedTensor:
        return tf.RaggedTensor.from_value_rowids(values, word_rows, nrows=nrows)

    ends = tf.math.unsorted_segment_max(packed["piece_ends"].flat_values, word_of_piece, num_words)
    return {
        "probabilities": per_text(aggregate_pieces(probabilities, is_word, aggregation)),
        "starts": per_text(tf.gather(packed["piece_starts"].flat_values, first)),
        "ends": per_text(ends),
    }


def _over_chains(run, probabilities: tf.RaggedTensor) -> tf.RaggedTensor:
    """``run(scores [texts, words, tags], mask [texts, words])`` on each text's chain
    of words, scored on the log-probabilities, back to ragged [texts, (words), ...]."""
    scores = tf.math.log(tf.maximum(probabilities, _TINY))
    mask = tf.sequence_mask(scores.row_lengths())
    found = run(scores.to_tensor(), mask)
    return tf.RaggedTensor.from_row_lengths(tf.boolean_mask(found, mask), scores.row_lengths())


def choose_tags(probabilities: tf.RaggedTensor, crf=None) -> tf.RaggedTensor:
    """int32 ragged [texts, (words)]: each word's tag from its probabilities (ragged
    [texts, (words), tags]); with a CRF (`ConditionalRandomField`), the best chain
    over each text's words, scored on the log-probabilities."""
    if crf is None:
        return tf.ragged.map_flat_values(tf.argmax, probabilities, -1, output_type=tf.int32)
    return _over_chains(crf.decode, probabilities)


def chain_marginals(probabilities: tf.RaggedTensor, crf) -> tf.RaggedTensor:
    """float32 ragged [texts, (words), tags]: each word's tag posterior under the CRF
    (`ConditionalRandomField.marginals`) over each text's chain of words, scored as
    `choose_tags` scores it (the log-probabilities), so Viterbi's chain and these
    marginals read one distribution."""
    return _over_chains(crf.marginals, probabilities)


def _chunk(flat_tags, rows, scheme_arrays) -> dict[str, tf.Tensor]:
    """`chunk` on flat tags and their texts (int32 [words], sorted by text): per chunk
    its ``row``, its first and last word's flat indices (``head``, ``last``) and
    ``type``; and each tagged word (``members``, flat indices) with its chunk."""
    type_of, begins, closes = scheme_arrays
    kind = tf.gather(type_of, flat_tags)
    # conlleval's chunks: B-X and S-X open one; so does I-X or E-X after O, E-, S-,
    # another type or another text; any other tagged word continues the open one.
    previous_kind = tf.concat([[-1], kind[:-1]], 0)
    previous_row = tf.concat([[-1], rows[:-1]], 0)
    previous_closes = tf.concat([[False], tf.gather(closes, flat_tags)[:-1]], 0)
    inside = kind >= 0
    opens = inside & (
        tf.gather(begins, flat_tags)
        | previous_closes
        | (previous_kind != kind)
        | (previous_row != rows)
    )
    chunk_of_word = tf.cumsum(tf.cast(opens, tf.int32)) - 1
    num_chunks = tf.reduce_sum(tf.cast(opens, tf.int32))
    members = tf.where(inside)[:, 0]
    heads = tf.where(opens)[:, 0]
    return {
        "row": tf.gather(rows, heads),
        "head": tf.cast(heads, tf.int32),
        "last": tf.math.unsorted_segment_max(
            tf.cast(members, tf.int32), tf.gather(chunk_of_word, members), num_chunks
        ),
        "type": tf.gather(kind, heads),
        "members": members,
        "member_chunk": tf.gather(chunk_of_word, members),
        "num_chunks": num_chunks,
    }


def _scheme_arrays(scheme: TagScheme) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    return (
        tf.constant(scheme.type_of, tf.int32),
        tf.constant(scheme.opens, tf.bool),
        tf.constant(scheme.closes, tf.bool),
    )


def chunk(tags: tf.RaggedTensor, scheme: TagScheme) -> dict[str, tf.Tensor]:
    """conlleval's chunks of each text's tags, as seqeval's default mode reads them.

    A chunk starts at ``B-X`` or ``S-X``, at ``I-X`` or ``E-X`` after an ``O``, an
    ``E-`` or an ``S-``, and at any tag whose type differs from the previous one;
    it ends before a tag that starts one or an ``O``, and after ``E-X`` or ``S-X``.
    So BIO, IOB1 (``I-X`` after ``O`` begins an entity) and BIOES all read, and
    ill-formed sequences read as conlleval reads them.

    Args:
        tags: int32 ragged [texts, (words)]: indices into the tagger's tags.
        scheme: those tags' `TagScheme`.

    Returns:
        One entry per chunk, in text order: ``row`` (its text), ``first`` and
        ``last`` (its words' indices in its text, ``last`` inclusive) and ``type``
        (an index into ``scheme.types``), int32 [chunks].
    """
    rows = tf.cast(tags.value_rowids(), tf.int32)
    found = _chunk(tags.flat_values, rows, _scheme_arrays(scheme))
    row_starts = tf.cast(tags.row_starts(), tf.int32)
    text_start = tf.gather(row_starts, found["row"])
    return {
        "row": found["row"],
        "first": found["head"] - text_start,
        "last": found["last"] - text_start,
        "type": found["type"],
    }


def entities(
    tags: tf.RaggedTensor,
    confidence: tf.RaggedTensor,
    starts: tf.RaggedTensor,
    ends: tf.RaggedTensor,
    scheme: TagScheme,
) -> dict[str, tf.RaggedTensor]:
    """Each text's entities from its words' tags (`chunk`).

    Args:
        tags: int32 ragged [texts, (words)].
        confidence: float32 ragged [texts, (words)]: each word's tag's probability
            (or, with a CRF, its marginal).
        starts, ends: int32 ragged [texts, (words)]: each word's characters.
        scheme: the tags' `TagScheme`.

    Returns:
        Ragged [texts, (entities)], in text order: ``starts``, ``ends`` int32 (the
        characters, end exclusive), ``labels`` string and ``scores`` float32 (the
        mean of the entity's words' ``confidence``).
    """
    rows = tf.cast(tags.value_rowids(), tf.int32)
    found = _chunk(tags.flat_values, rows, _scheme_arrays(scheme))
    members, member_chunk = found["members"], found["member_chunk"]

    def per_entity(reduce, values: tf.Tensor) -> tf.Tensor:
        return reduce(tf.gather(values, members), member_chunk, found["num_chunks"])

    types = tf.constant(scheme.types or [""], tf.string)
    entity_rows = tf.cast(found["row"], tf.int64)

    def per_text(values: tf.Tensor) -> tf.RaggedTensor:
        return tf.RaggedTensor.from_value_rowids(values, entity_rows, nrows=tags.nrows())

    return {
        "starts": per_text(per_entity(tf.math.unsorted_segment_min, starts.flat_values)),
        "ends": per_text(per_entity(tf.math.unsorted_segment_max, ends.flat_values)),
        "labels": per_text(tf.gather(types, found["type"])),
        "scores": per_text(per_entity(tf.math.unsorted_segment_mean, confidence.flat_values)),
    }


def decode_entities(
    probabilities: tf.RaggedTensor,
    starts: tf.RaggedTensor,
    ends: tf.RaggedTensor,
    scheme: TagScheme,
    crf=None,
) -> dict[str, tf.RaggedTensor]:
    """Words' tag probabilities → each text's entities: `choose_tags`, then `entities`.

    An entity's score is the mean over its words of each word's chosen tag's
    probability: without a CRF its softmax probability; with a CRF its marginal in
    the chain (`chain_marginals`: p(that word has that tag | the text), every tag
    sequence weighed). The mean of a span's word marginals is not the probability
    of the span as a whole, which is at most its smallest word's.

    Args:
        probabilities: float32 ragged [texts, (words), tags] (`words`).
        starts, ends: int32 ragged [texts, (words)]: each word's characters.
        scheme: the tags' `TagScheme`.
        crf: the tagger's `ConditionalRandomField`, if it has one.

    Returns:
        `entities`' ragged [texts, (entities)] values, and ``tags`` int32 ragged
        [texts, (words)]: the words' chosen tags.
    """
    tags = choose_tags(probabilities, crf)
    flat = (probabilities if crf is None else chain_marginals(probabilities, crf)).flat_values
    confidence = tf.gather(flat, tags.flat_values, batch_dims=1)
    found = entities(tags, tags.with_flat_values(confidence), starts, ends, scheme)
    return found | {"tags": tags}


# -- tag names, outside a graph ------------------------------------------------------


def _chunk_arrays(tags, rows, type_of, begins, closes) -> dict[str, tf.Tensor]:
    return _chunk(tags, rows, (type_of, begins, closes))


@functools.cache
def _traced_chunk():
    """`_chunk` as one graph for every call (`chunks_batch` runs once per file or
    test sequence: eager, each call would dispatch its ops one by one)."""
    vector = tf.TensorSpec([None], tf.int32)
    flags = tf.TensorSpec([None], tf.bool)
    return tf.function(_chunk_arrays, input_signature=[vector, vector, vector, flags, flags])


def chunks_batch(tag_sequences: Sequence[Sequence[str]]) -> list[list[tuple[str, int, int]]]:
    """`chunk` on tag names: per sequence, ``(type, first index, last index)`` of each
    chunk, the last *inclusive* (seqeval's ``get_entities``' tuples).

    >>> chunks_batch([["O", "I-A"], [], ["B-A", "E-A", "S-B"]])
    [[('A', 1, 1)], [], [('A', 0, 1), ('B', 2, 2)]]
    """
    names = ["O", *sorted({t for tags in tag_sequences for t in tags} - {"O"})]
    scheme = tag_scheme(names)
    index = {name: i for i, name in enumerate(names)}
    flat = [index[t] for tags in tag_sequences for t in tags]
    rows = [row for row, tags in enumerate(tag_sequences) for _ in tags]
    found = _traced_chunk()(
        tf.constant(flat, tf.int32), tf.constant(rows, tf.int32), *_scheme_arrays(scheme)
    )
    starts = [0]
    for tags in tag_sequences:
        starts.append(starts[-1] + len(tags))
    out: list[list[tuple[str, int, int]]] = [[] for _ in tag_sequences]
    for row, head, last, kind in zip(
        *(found[key].numpy().tolist() for key in ("row", "head", "last", "type")), strict=True
    ):
        out[row].append((scheme.types[kind], head - starts[row], last - starts[row]))
    return out


def chunks(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """`chunks_batch` of one sequence of tag names."""
    return chunks_batch([tags])[0]
