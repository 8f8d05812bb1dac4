"""Token tagging (named entities) data: reading, with entities as character spans.

An example is a text and its entities, each a `Entity` span of character
offsets (code points, end exclusive) and a label. Formats, detected per file
(gzip or not) from the first non-blank line, then the file name:

* **JSON Lines** (the first line starts with ``{``), told apart row by row:
  ours (``/work/shared/data/tagging``): ``{"id", "lang", "source", "text",
  "entities": [{"start", "end", "label", "text"?}]}``, an entity's ``"text"``
  checked against ``text[start:end]``; CLUENER2020: ``{"id"?, "text", "label":
  {type: {surface: [[start, end], ...]}}}``, its ends *inclusive* (made
  exclusive here) and every surface checked;
* **CoNLL columns** (a ``.conll``, ``.bio``, ``.iob``, ``.tsv`` or ``.txt``
  name, or a first line that is ``-DOCSTART-`` or ends in a tag): one token a
  line, whitespace-separated columns, the first the token and the last its tag
  (BIO, IOB1 or BIOES, chunked by `bio_chunks`); a blank line ends a sentence,
  ``-DOCSTART-`` lines are ignored. The text is the tokens joined by ``" "``,
  or by ``""`` between two single CJK characters, and everywhere in a file whose
  tokens are all single characters (Chinese per-character files such as People's
  Daily or MSRA NER). A file is labelled if a line has two columns or more and a
  tag last; otherwise each line's first column is its token. A sentence with a
  CJK character gets ``lang="zh"`` (as CLUENER rows do).

A row without annotation (a JSON row without ``"entities"`` or ``"label"``, an
unlabelled CoNLL file) gets ``labelled=False`` when no row of its file has one
(a test file); elsewhere it is skipped. Bad rows are skipped and counted by
reason (`SKIP_REASONS`), never fatal.

Example:
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with open(os.path.join(folder, "train.conll"), "w") as f:
    ...     _ = f.write("-DOCSTART- O\\n\\nEU B-ORG\\nrejects O\\nGerman I-MISC\\ncall O\\n\\n"
    ...                 "中 B-LOC\\n国 I-LOC\\n人 O\\n\\nbad\\n")
    >>> examples, skipped = read_tagging([os.path.join(folder, "train.conll")])
    >>> [(e.id, e.text, [(s.start, s.end, s.label) for s in e.entities]) for e in examples]
    [('train.conll:3', 'EU rejects German call', [(0, 2, 'ORG'), (11, 17, 'MISC')]), \
('train.conll:8', '中国人', [(0, 2, 'LOC')])]
    >>> dict(skipped), tag_names(["ORG", "LOC"])
    ({'bad_tag': 1}, ['O', 'B-LOC', 'I-LOC', 'B-ORG', 'I-ORG'])
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.data.batching import bucketed_batches, padded
from albert_tf.data.chinese_wwm import is_cjk_char
from albert_tf.data.corpus import open_binary
from albert_tf.data.inputs import DATA_SUFFIXES, resolve_inputs

#: Why `read_tagging` skips a row (the keys of its ``skipped`` counter).
SKIP_REASONS = (
    "invalid_json",  # a JSON line that does not parse to an object
    "invalid_text",  # a text that is not valid Unicode (a lone surrogate escape)
    "missing_text",  # no string "text"
    "empty_text",  # a blank "text"
    "bad_entity",  # an entity that is not an object / span with int offsets inside the text
    "entity_text_mismatch",  # an entity's surface is not text[start:end]
    "overlapping_entities",  # two entities share a character
    "missing_entities",  # no annotation, in a file whose other rows have one
    "bad_tag",  # a CoNLL token line without a tag last, in a labelled file
)
CONLL_SUFFIXES = (".conll", ".bio", ".iob", ".tsv", ".txt")
ACCEPTED_FORMATS = (
    "JSON Lines with character spans (ours, or CLUENER2020), or CoNLL columns "
    f"(one 'token ... tag' line per token; named {'/'.join(CONLL_SUFFIXES)})"
)
_TAG = re.compile(r"O|[BIES]-\S+")
# CJK punctuation and full-width forms join without spaces too.
_CJK_PUNCTUATION = re.compile("[\u3000-\u303f\uff00-\uffef]")


@dataclasses.dataclass(frozen=True)
class Entity:
    """A labelled span: character offsets (code points) into a text, ``end`` exclusive."""

    start: int
    end: int
    label: str


@dataclasses.dataclass(frozen=True)
class TaggingExample:
    """One text and its entities (sorted by start, never overlapping)."""

    id: str
    text: str
    entities: tuple[Entity, ...]
    lang: str = ""
    labelled: bool = True  # False: its source had no annotation (a test file)


def tag_names(labels: Iterable[str]) -> list[str]:
    """The BIO tags of entity labels: ``O``, then ``B-`` and ``I-`` of each, sorted.

    >>> tag_names(["PER", "LOC", "PER"])
    ['O', 'B-LOC', 'I-LOC', 'B-PER', 'I-PER']
    """
    return ["O"] + [f"{prefix}-{label}" for label in sorted(set(labels)) for prefix in "BI"]


def _chunk_ends(prev: str, prefix: str, prev_type: str, kind: str) -> bool:
    return (
        prev in ("E", "S")
        or (prev in ("B", "I") and prefix in ("B", "S", "O"))
        or (prev not in ("O", ".") and prev_type != kind)
    )


def _chunk_starts(prev: str, prefix: str, prev_type: str, kind: str) -> bool:
    return (
        prefix in ("B", "S")
        or (prev in ("E", "S", "O") and prefix in ("E", "I"))
        or (prefix not in ("O", ".") and prev_type != kind)
    )


def bio_chunks(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """``(type, first index, last index)`` of each chunk, the last *inclusive*.

    conlleval's chunking, as seqeval's default (not strict) ``get_entities``
    does it, rule for rule: a chunk starts at ``B-X`` or ``S-X``, at ``I-X`` or
    ``E-X`` after an ``O``, an ``E-`` or an ``S-``, and at any tag whose type
    differs from the previous one; it ends before a tag that starts one, an
    ``O``, or a change of type, and after ``E-X`` or ``S-X``. So BIO, IOB1
    (``I-X`` after ``O`` begins an entity) and BIOES all read, and ill-formed
    sequences read as conlleval reads them.

    >>> bio_chunks(["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG", "S-ORG"])
    [('PER', 0, 1), ('LOC', 3, 3), ('LOC', 4, 4), ('ORG', 5, 5), ('ORG', 6, 6)]
    """
    chunks = []
    prev, prev_type, begin = "O", "", 0
    for i, tag in enumerate([*tags, "O"]):
        prefix, kind = tag[:1], tag[1:].split("-", 1)[-1] or "_"
        if _chunk_ends(prev, prefix, prev_type, kind):
            chunks.append((prev_type, begin, i - 1))
        if _chunk_starts(prev, prefix, prev_type, kind):
            begin = i
        prev, prev_type = prefix, kind
    return chunks


# -- reading -----------------------------------------------------------------

_Result = tuple[str | None, TaggingExample | None]  # (skip reason, example)


def _numbered_lines(path: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)``, blank lines included, split on "\\n" only."""
    with open_binary(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            yield number, line.removeprefix("\ufeff") if number == 1 else line


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entity(
    start: Any, end: Any, label: Any, surface: Any, text: str
) -> tuple[str | None, Entity | None]:
    """``(skip reason, Entity)`` of one raw span, ``end`` exclusive."""
    if not (_is_int(start) and _is_int(end) and 0 <= start < end <= len(text)):
        return "bad_entity", None
    if not isinstance(label, str) or not label.strip():
        return "bad_entity", None
    if surface is not None and not isinstance(surface, str):
        return "bad_entity", None
    if surface is not None and text[start:end] != surface:
        return "entity_text_mismatch", None
    return None, Entity(start, end, label.strip())


def _raw_spans(record: dict) -> list[tuple[Any, Any, Any, Any]] | None:
    """``(start, exclusive end, label, surface)`` of a row's spans, None if it has no
    annotation; a malformed structure gives one span that `_entity` rejects."""
    bad = [(None, None, None, None)]
    if "entities" in record:  # ours
        entities = record["entities"]
        if not isinstance(entities, list) or not all(isinstance(e, dict) for e in entities):
            return bad
        return [(e.get("start"), e.get("end"), e.get("label"), e.get("text")) for e in entities]
    if "label" not in record:
        return None
    label, spans = record["label"], []  # CLUENER2020: {type: {surface: [[start, end], ...]}}
    if not isinstance(label, dict):
        return bad
    for kind, mentions in label.items():
        if not isinstance(mentions, dict):
            return bad
        for surface, found in mentions.items():
            for span in found if isinstance(found, list) else [None]:
                if not (isinstance(span, list) and len(span) == 2 and _is_int(span[1])):
                    return bad
                spans.append((span[0], span[1] + 1, kind, surface))  # its end is inclusive
    return spans


def _sorted_entities(entities: Iterable[Entity]) -> tuple[Entity, ...] | None:
    """Sorted by start (exact repeats dropped); None if two overlap."""
    ordered = sorted(set(entities), key=lambda e: (e.start, e.end, e.label))
    if any(b.start < a.end for a, b in zip(ordered, ordered[1:], strict=False)):
        return None
    return tuple(ordered)


def _json_rows(path: str) -> Iterator[_Result]:
    name = os.path.basename(path)
    for number, line in _numbered_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            yield "invalid_json", None
            continue
        text = record.get("text")
        if not isinstance(text, str):
            yield "missing_text", None
            continue
        if not text.strip():
            yield "empty_text", None
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate ("\ud800") that JSON lets through
            yield "invalid_text", None
            continue
        spans = _raw_spans(record)
        entities: list[Entity] = []
        reason = None
        for start, end, label, surface in spans or ():
            reason, entity = _entity(start, end, label, surface, text)
            if entity is None:
                break
            entities.append(entity)
        checked = _sorted_entities(entities)
        if reason is None and checked is None:
            reason = "overlapping_entities"
        if reason is not None:
            yield reason, None
            continue
        item_id = record.get("id")
        item_id = f"{name}:{number}" if item_id is None or item_id == "" else str(item_id)
        lang = str(record.get("lang", "zh" if "label" in record else ""))
        yield None, TaggingExample(item_id, text, checked or (), lang, spans is not None)


def _joined(tokens: Sequence[str], single_characters: bool) -> tuple[str, list[int]]:
    """The text of a sentence's tokens and where each starts in it."""

    def cjk(token: str) -> bool:
        return len(token) == 1 and (is_cjk_char(token) or bool(_CJK_PUNCTUATION.match(token)))

    parts: list[str] = []
    starts: list[int] = []
    length = 0
    for i, token in enumerate(tokens):
        if i and not (single_characters or (cjk(tokens[i - 1]) and cjk(token))):
            parts.append(" ")
            length += 1
        starts.append(length)
        parts.append(token)
        length += len(token)
    return "".join(parts), starts


def _conll_rows(path: str) -> Iterator[_Result]:
    name = os.path.basename(path)
    sentences: list[list[tuple[int, list[str]]]] = [[]]
    for number, line in _numbered_lines(path):
        fields = line.split()
        if fields and fields[0] != "-DOCSTART-":
            sentences[-1].append((number, fields))
        elif sentences[-1]:
            sentences.append([])
    sentences = [s for s in sentences if s]
    rows = [fields for sentence in sentences for _, fields in sentence]
    labelled = any(len(f) > 1 and _TAG.fullmatch(f[-1]) for f in rows)
    single_characters = all(len(f[0]) == 1 for f in rows)
    for sentence in sentences:
        if labelled and not all(len(f) > 1 and _TAG.fullmatch(f[-1]) for _, f in sentence):
            yield "bad_tag", None
            continue
        tokens = [fields[0] for _, fields in sentence]
        text, starts = _joined(tokens, single_characters)
        entities = (
            tuple(
                Entity(starts[first], starts[last] + len(tokens[last]), kind)
                for kind, first, last in bio_chunks([fields[-1] for _, fields in sentence])
            )
            if labelled
            else ()
        )
        lang = "zh" if any(map(is_cjk_char, text)) else ""
        yield None, TaggingExample(f"{name}:{sentence[0][0]}", text, entities, lang, labelled)


def _rows(path: str) -> Iterator[_Result]:
    """The rows of one file, by its format."""
    first = next((line for _, line in _numbered_lines(path) if line.strip()), None)
    if first is None:
        return iter(())
    fields = first.split()
    if first.lstrip().startswith("{"):
        return _json_rows(path)
    conll_name = path.removesuffix(".gz").lower().endswith(CONLL_SUFFIXES)
    if conll_name or fields[0] == "-DOCSTART-" or (len(fields) > 1 and _TAG.fullmatch(fields[-1])):
        return _conll_rows(path)
    raise ValueError(
        f"{path}: cannot recognise the format of its first line {first[:200]!r}; "
        f"accepted: {ACCEPTED_FORMATS}"
    )


def read_tagging(files: Sequence[str]) -> tuple[list[TaggingExample], collections.Counter]:
    """Reads examples in any of the formats above; bad rows are skipped and counted.

    Args:
        files: files, globs or folders, as `albert_tf.data.inputs.resolve_inputs`
            expands them (folders: JSON Lines, CoNLL and ``.gz`` files).

    Returns:
        ``(examples, skipped)``: ``skipped`` counts dropped rows (a CoNLL
        sentence is a row) by reason (`SKIP_REASONS`). A JSON row without an id
        gets ``"<file name>:<line>"``, a CoNLL sentence the line of its first token.

    Raises:
        ValueError: a path matching no file, a file of no known format, or a
            file with no readable row.
    """
    suffixes = tuple(dict.fromkeys((*DATA_SUFFIXES, *CONLL_SUFFIXES)))
    try:
        paths = resolve_inputs(files, what="tagging data", samples=False, suffixes=suffixes)
    except FileNotFoundError as error:
        raise ValueError(str(error)) from error
    examples: list[TaggingExample] = []
    skipped: collections.Counter = collections.Counter()
    for path in paths:
        file_skipped: collections.Counter = collections.Counter()
        file_examples = []
        for reason, example in _rows(path):
            if example is None:
                file_skipped[reason] += 1
            else:
                file_examples.append(example)
        # A file with no annotation at all is a test file: its rows are kept, unlabelled.
        if any(example.labelled for example in file_examples):
            unlabelled = sum(not example.labelled for example in file_examples)
            if unlabelled:
                file_skipped["missing_entities"] += unlabelled
            file_examples = [example for example in file_examples if example.labelled]
        if not file_examples:
            raise ValueError(
                f"{path}: no readable rows ({sum(file_skipped.values())} skipped: "
                f"{dict(file_skipped) or 'the file is empty'}); give a file in one of: "
                f"{ACCEPTED_FORMATS}"
            )
        examples += file_examples
        skipped.update(file_skipped)
    return examples, skipped


# -- packing for the model ---------------------------------------------------


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
        tokenizer: a tokenizer with ``tokenize_with_offsets`` (`check_tokenizer`).
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
    check_tokenizer(tokenizer)
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


def check_tokenizer(tokenizer, task: str = "tagging") -> None:
    """Refuses a tokenizer that cannot give character offsets (a ValueError that names
    ``task`` and says which can): a cased WordPiece vocabulary."""
    if not getattr(tokenizer, "has_offsets", False):
        kind = getattr(tokenizer, "kind", type(tokenizer).__name__)
        cased = " (cased)" if hasattr(tokenizer, "tokenize_with_offsets") else ""
        raise ValueError(
            f"{task} needs each piece's characters, which a {kind}{cased} tokenizer does "
            "not give: use a SentencePiece model or an uncased WordPiece vocabulary "
            "(Chinese ALBERT/BERT vocabularies, uncased English BERT ones)"
        )


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


def decode_entities(
    word_tags: Sequence[str],
    word_start_chars: np.ndarray,
    word_end_chars: np.ndarray,
    with_words: bool = False,
) -> list:
    """Entities (character spans) from the tags of a text's words (`bio_chunks`);
    ``with_words``: ``(entity, (first_word, last_word))`` pairs.

    >>> decode_entities(["B-PER", "I-PER", "O", "I-LOC"], np.array([0, 1, 2, 4]),
    ...                 np.array([1, 2, 3, 6]))
    [Entity(start=0, end=2, label='PER'), Entity(start=4, end=6, label='LOC')]
    """
    found = [
        (Entity(int(word_start_chars[first]), int(word_end_chars[last]), label), (first, last))
        for label, first, last in bio_chunks(list(word_tags))
    ]
    return found if with_words else [entity for entity, _ in found]


@dataclasses.dataclass(frozen=True)
class TagScheme:
    """How a tagger's outputs decode, whatever their order and scheme (BIO, IOB1,
    BIOES): the entity types, and per tag its type's index (-1 for ``O``), whether
    it opens an entity (``B-``, ``S-``) and whether an entity ends with it (``E-``,
    ``S-``). The in-graph decoding of `TaggerServingModule` reads these; they give
    `bio_chunks`' chunks (conlleval's rules).

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
    batches = bucketed_batches(
        [len(w["token_ids"]) for w in windows],
        batch_size,
        shuffle=shuffle,
        seed=seed,
        bucket_batches=BUCKET_BATCHES,
    )
    for batch in batches:
        rows = [windows[i] for i in batch]
        features = {key: padded(rows, key) for key in ("token_ids", "segment_ids", "padding_mask")}
        yield features, padded(rows, "tags", fill=IGNORED)  # a window's tags: as long as its ids
