"""Tagging (named entities) data: the readers, files of any format → `TaggingExample` items,
and `pack_sentences`, which joins neighbouring training sentences into longer texts.

An item is a text and its entities, each an `Entity` span of character
offsets (code points, end exclusive) and a label. Formats, detected per file
(gzip or not) from the first non-blank line, then the file name:

* **JSON Lines** (the first line starts with ``{``), told apart row by row:
  ours (the repository's shared tagging data, see docs/finetuning.md): ``{"id",
  "lang", "source", "text", "entities": [{"start", "end", "label", "text"?}]}``, an
  entity's ``"text"`` checked against ``text[start:end]``; CLUENER2020: ``{"id"?,
  "text", "label": {type: {surface: [[start, end], ...]}}}``, its ends *inclusive*
  (made exclusive here) and every surface checked;
* **CoNLL columns** (a ``.conll``, ``.bio``, ``.iob``, ``.tsv`` or ``.txt``
  name, or a first line that is ``-DOCSTART-`` or ends in a tag): one token a
  line, whitespace-separated columns, the first the token and the last its tag
  (BIO, IOB1 or BIOES, chunked as conlleval does:
  `albert_tf.tasks.tagging.decoding.chunks_batch`); a blank line ends a sentence,
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
    >>> dict(skipped)
    {'bad_tag': 1}
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from albert_tf.data.chinese_wwm import is_cjk_char
from albert_tf.data.corpus import open_binary
from albert_tf.data.inputs import DATA_SUFFIXES, resolve_inputs

# check_tag_names and tag_names also here: task.py imports them with the readers.
from albert_tf.tasks.tagging.decoding import check_tag_names as check_tag_names
from albert_tf.tasks.tagging.decoding import chunks_batch
from albert_tf.tasks.tagging.decoding import tag_names as tag_names

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
# CJK punctuation and full-width punctuation join without spaces too (full-width letters
# and digits do not: "１９９８" and "１２月" run together would read as one number).
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


# -- training texts from neighbouring sentences -------------------------------


def _separator(before: str, after: str) -> str:
    """What joins two texts: nothing beside a CJK character or punctuation (Chinese and
    Japanese run on without spaces) or existing whitespace, else one space."""

    def close(char: str) -> bool:
        punctuation = bool(_CJK_PUNCTUATION.match(char)) and not char.isalnum()
        return is_cjk_char(char) or punctuation or char.isspace()

    if not before or not after:
        return ""
    return "" if close(before[-1]) or close(after[0]) else " "


def pack_sentences(
    items: Sequence[TaggingExample], max_chars: int, max_items: int | None = None
) -> list[TaggingExample]:
    """Consecutive items joined, in order, into texts of at most ``max_chars``
    characters (and at most ``max_items`` items), their entities shifted with them:
    training texts in which each sentence has its neighbours, as in the paragraphs a
    tagger is sent.

    Items are joined by `_separator` (nothing in Chinese, one space between words of
    space-separated scripts), decided from the two characters at the join, so any
    tokenizer reads the text as it reads the sentences. Only labelled items of the
    same ``lang`` are joined; an unlabelled one, or one longer than ``max_chars``,
    stays alone in its place: no item is dropped. A joined item's id is its items'
    ids joined by ``+``.

    >>> a = TaggingExample("1", "王明在北京。", (Entity(0, 2, "PER"), Entity(3, 5, "LOC")), "zh")
    >>> b = TaggingExample("2", "李华来了。", (Entity(0, 2, "PER"),), "zh")
    >>> c = TaggingExample("3", "Smith left.", (Entity(0, 5, "PER"),))
    >>> d = TaggingExample("4", "Jones came.", (Entity(0, 5, "PER"),))
    >>> [(x.id, x.text, [(e.start, e.label) for e in x.entities])
    ...  for x in pack_sentences([a, b, c, d], 30)]
    [('1+2', '王明在北京。李华来了。', [(0, 'PER'), (3, 'LOC'), (6, 'PER')]), \
('3+4', 'Smith left. Jones came.', [(0, 'PER'), (12, 'PER')])]
    """
    if max_chars < 1 or (max_items is not None and max_items < 1):
        raise ValueError(
            f"max_chars and max_items must be at least 1, got {max_chars}, {max_items}"
        )
    packed: list[TaggingExample] = []
    group: list[TaggingExample] = []
    text = ""
    entities: list[Entity] = []

    def close() -> None:
        if len(group) == 1:
            packed.append(group[0])  # as it was
        elif group:
            first = group[0]
            ids = "+".join(item.id for item in group)
            packed.append(TaggingExample(ids, text, tuple(entities), first.lang, True))
        group.clear()
        entities.clear()

    for item in items:
        joinable = bool(group) and item.labelled and item.lang == group[0].lang
        separator = _separator(text, item.text) if joinable else ""
        full = max_items is not None and len(group) >= max_items
        if not joinable or full or len(text) + len(separator) + len(item.text) > max_chars:
            close()
            text, separator = "", ""
        offset = len(text) + len(separator)
        text += separator + item.text
        group.append(item)
        entities += [Entity(e.start + offset, e.end + offset, e.label) for e in item.entities]
        if not item.labelled:
            close()  # never joined to what follows
    close()
    return packed


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
    good = [
        not labelled or all(len(f) > 1 and _TAG.fullmatch(f[-1]) for _, f in sentence)
        for sentence in sentences
    ]
    # Every tagged sentence of the file chunked at once: one call of the decoder.
    tagged = [i for i, ok in enumerate(good) if ok] if labelled else []
    found = chunks_batch([[fields[-1] for _, fields in sentences[i]] for i in tagged])
    sentence_chunks = dict(zip(tagged, found, strict=True))
    for i, sentence in enumerate(sentences):
        if not good[i]:
            yield "bad_tag", None
            continue
        tokens = [fields[0] for _, fields in sentence]
        text, starts = _joined(tokens, single_characters)
        entities = tuple(
            Entity(starts[first], starts[last] + len(tokens[last]), kind)
            for kind, first, last in sentence_chunks.get(i, ())
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
