"""Reading corpora into documents (lists of sentences), robustly.

Two file formats are read, gzip-compressed or not (detected from the gzip magic
bytes, not the file name):

* **text** — BERT's format: one sentence per line, a blank line between
  documents.
* **jsonl** — JSON Lines, one document per line: ``{"sentences": [str, ...]}``
  (an ``"id"`` and other keys are allowed and ignored). A record with a
  ``"text"`` string instead of ``"sentences"`` is split with `split_sentences`.

Bad input never crashes a run halfway and is never dropped silently: every
skipped unit is counted by reason in a `ReadStats`, which the tools print at
the end. What is skipped, and why:

=====================  =====================================================
reason                 what happened
=====================  =====================================================
``invalid_utf8``       a line that is not valid UTF-8 (the line is skipped)
``line_too_long``      a physical line longer than ``max_line_bytes``
``invalid_json``       a jsonl line that does not parse
``invalid_record``     a jsonl record without a list of strings in
                       ``"sentences"`` (or a ``"text"`` string)
``sentence_too_long``  a sentence still longer than ``max_sentence_chars``
                       after re-splitting it with `split_sentences`
``empty_sentence``     an empty / whitespace-only sentence inside a jsonl
                       record (blank lines in text files are separators)
``empty_document``     a document left with no sentences
=====================  =====================================================

Files are named as `albert_tf.data.inputs.resolve_inputs` explains (files,
globs, folders, ``sample:en``); missing files (or a glob matching nothing) raise
`FileNotFoundError` before any work starts. Tokenizer training
(`iter_sentences`), pretraining data and ``pretrain --corpus`` all read through
`read_documents`, so a file is read the same way everywhere.

>>> from albert_tf.data import sample_path
>>> stats = ReadStats()
>>> docs = list(read_documents(sample_path("en"), stats=stats))
>>> len(docs), stats.documents
(42, 42)
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import json
import re
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import BinaryIO

from albert_tf import storage
from albert_tf.data.inputs import PathSpec, resolve_inputs

#: A document is its sentences, in order.
Document = list[str]

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_SENTENCE_CHARS = 20_000


@dataclasses.dataclass
class ReadStats:
    """Counts of what was read and of what was skipped, by reason."""

    documents: int = 0
    sentences: int = 0
    skipped: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] += count

    def merge(self, other: ReadStats) -> None:
        self.documents += other.documents
        self.sentences += other.sentences
        self.skipped.update(other.skipped)

    def summary(self) -> str:
        """One human-readable line per count, for the end of a run."""
        lines = [f"documents: {self.documents}", f"sentences: {self.sentences}"]
        if self.skipped:
            for reason, n in sorted(self.skipped.items()):
                lines.append(f"skipped ({reason}): {n}")
        else:
            lines.append("skipped: none")
        return "\n".join(lines)


# --------------------------------------------------------------------------
# Sentence splitting
# --------------------------------------------------------------------------

# Terminators that end a sentence wherever they occur (Chinese / full-width).
_CJK_TERMINATORS = "。！？；"
# Terminators that end a sentence only before whitespace + a non-lowercase char.
_ASCII_TERMINATORS = ".!?"
_ELLIPSIS = "…"
# Closing quotes/brackets that stay with the sentence they close.
_CLOSERS = "\"'”’」』》〉）)]】"
_TERMINATOR_RUN = re.compile(
    "([" + re.escape(_CJK_TERMINATORS + _ASCII_TERMINATORS + _ELLIPSIS) + "]+)"
    "([" + re.escape(_CLOSERS) + "]*)"
)
# Words after which "." does not end a sentence.
_ABBREVIATIONS = frozenset(
    ("mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "e.g", "i.e")
    + ("no", "fig", "vol", "mt", "gen", "col", "lt", "capt", "rev", "hon")
)
_CJK_CHAR = re.compile("[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


def split_sentences(text: str) -> list[str]:
    """Splits running text into sentences (English and Chinese punctuation).

    Rules, in order:

    * A newline is always a boundary (paragraphs never share a sentence).
    * ``。！？；`` end a sentence wherever they occur, as does ``…``/``……``
      when a CJK character or whitespace + a non-lowercase character follows.
    * ``. ! ?`` end a sentence only when followed by whitespace and then a
      character that is not lower-case — so ``3.5``, ``e.g. this`` and
      ``example.com`` stay whole — and ``.`` not after a known abbreviation
      (``Mr.``, ``Dr.``, ``etc.``...) or a single capital initial (``J.``).
    * Closing quotes and brackets (``" ' ” ’ 」 』 》 ） ) ]``) after a
      terminator stay with the sentence they close.

    >>> split_sentences('Mr. Smith said "Stop!" Then he left. It cost 3.50 dollars.')
    ['Mr. Smith said "Stop!"', 'Then he left.', 'It cost 3.50 dollars.']
    >>> split_sentences("他说：“你好！”然后走了。真的吗？是的……我们走吧；好。")
    ['他说：“你好！”', '然后走了。', '真的吗？', '是的……', '我们走吧；', '好。']
    """
    sentences: list[str] = []
    for paragraph in text.splitlines():
        start = 0
        for m in _TERMINATOR_RUN.finditer(paragraph):
            end = m.end()
            if _is_boundary(paragraph, m, end):
                piece = paragraph[start:end].strip()
                if piece:
                    sentences.append(piece)
                start = end
        piece = paragraph[start:].strip()
        if piece:
            sentences.append(piece)
    return sentences


def _is_boundary(text: str, m: re.Match[str], end: int) -> bool:
    run = m.group(1)
    rest = text[end:]
    if not rest.strip():
        return True
    if any(c in _CJK_TERMINATORS for c in run):
        return True
    nxt = rest.lstrip()
    if _ELLIPSIS in run and _CJK_CHAR.match(rest[0]):
        return True
    if not rest[0].isspace():
        return False
    if nxt[0].islower():
        return False
    if run == ".":
        word = text[: m.start()].rsplit(None, 1)[-1] if text[: m.start()].strip() else ""
        word = word.lstrip(_CLOSERS + "(").lower()
        if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
            return False
    return True


def split_lines(text: str) -> list[str]:
    """Treats each non-blank line as one sentence (for pre-split text).

    >>> split_lines("One.\\n\\nTwo.")
    ['One.', 'Two.']
    """
    return [s.strip() for s in text.splitlines() if s.strip()]


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------


def open_binary(path: str) -> BinaryIO:
    """Opens ``path`` (local or in a bucket) for reading bytes, decompressing if
    it starts with the gzip magic bytes (whatever its name)."""
    with storage.open_file(path, "rb") as fh:
        magic = fh.read(2)
    raw = storage.open_file(path, "rb")
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw  # type: ignore[return-value]


def detect_format(path: str) -> str:
    """``"jsonl"`` if the first non-blank line starts with ``{``, else ``"text"``."""
    with open_binary(path) as fh:
        for raw in fh:
            stripped = raw.strip()
            if stripped:
                return "jsonl" if stripped.startswith(b"{") else "text"
    return "text"


class _Lines:
    """Iterates ``(offset, line, skip_reason)`` over the physical lines of ``fh``.

    ``line`` is None for a skipped line and ``skip_reason`` says why; the caller
    counts it (a line it does not own is not counted). Reading with a size
    limit keeps one enormous line from exhausting memory. ``offset`` is where
    reading has got to, for error messages.
    """

    def __init__(self, fh: BinaryIO, max_line_bytes: int, offset: int = 0) -> None:
        self.fh, self.max_line_bytes, self.offset = fh, max_line_bytes, offset

    def __iter__(self) -> Iterator[tuple[int, str | None, str | None]]:
        fh = self.fh
        while True:
            raw = fh.readline(self.max_line_bytes + 1)
            if not raw:
                return
            at = self.offset
            self.offset += len(raw)
            if len(raw) > self.max_line_bytes and not raw.endswith(b"\n"):
                # Drain the rest of the over-long line without holding it.
                while True:
                    more = fh.readline(1 << 20)
                    self.offset += len(more)
                    if not more or more.endswith(b"\n"):
                        break
                yield at, None, "line_too_long"
                continue
            try:
                yield at, raw.decode("utf-8"), None
            except UnicodeDecodeError:
                yield at, None, "invalid_utf8"


def _skip_to_line_start(fh: BinaryIO, start: int) -> int:
    """Seeks to the first line that starts at or after ``start``; returns it."""
    if start == 0:
        fh.seek(0)
        return 0
    fh.seek(start - 1)
    while True:  # bounded reads: the line may be enormous
        chunk = fh.readline(1 << 20)
        if not chunk or chunk.endswith(b"\n"):
            return fh.tell()


def _previous_line_is_blank(fh: BinaryIO, position: int, window: int = 4096) -> bool:
    """Whether the line ending just before ``position`` (a line start) is blank,
    by the same rule the text reader applies (a skipped line is not blank)."""
    if position == 0:
        return True
    back = min(position, window)
    fh.seek(position - back)
    body = fh.read(back)[:-1]  # without the newline that ends the line
    cut = body.rfind(b"\n")
    if cut < 0 and position - back > 0:
        return False  # longer than the window: not a blank line
    fh.seek(position)
    try:
        return not body[cut + 1 :].decode("utf-8").strip()
    except UnicodeDecodeError:
        return False


def clean_sentences(
    sentences: Iterable[str],
    stats: ReadStats,
    *,
    max_sentence_chars: int = DEFAULT_MAX_SENTENCE_CHARS,
    count_empty: bool = True,
) -> list[str]:
    """Strips sentences; re-splits over-long ones; drops (and counts) the rest."""
    out: list[str] = []
    for s in sentences:
        s = s.strip()
        if not s:
            if count_empty:
                stats.skip("empty_sentence")
            continue
        if len(s) > max_sentence_chars:
            for piece in split_sentences(s):
                if len(piece) > max_sentence_chars:
                    stats.skip("sentence_too_long")
                else:
                    out.append(piece)
            continue
        out.append(s)
    return out


def _emit(doc: list[str], stats: ReadStats) -> Iterator[Document]:
    if doc:
        stats.documents += 1
        stats.sentences += len(doc)
        yield doc
    else:
        stats.skip("empty_document")


#: A document and its position in its source: the byte offset where it starts
#: (in the uncompressed stream), or its example index in a tfds split.
LocatedDocument = tuple[int, Document]


def read_documents(
    path: str,
    *,
    stats: ReadStats | None = None,
    file_format: str = "auto",
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_sentence_chars: int = DEFAULT_MAX_SENTENCE_CHARS,
) -> Iterator[Document]:
    """Yields the documents of one file (text or jsonl, gzip or not).

    Args:
      path: the file. Missing → `FileNotFoundError`.
      stats: filled with counts of documents, sentences and skips.
      file_format: ``"text"``, ``"jsonl"`` or ``"auto"`` (`detect_format`).
      max_line_bytes: longer physical lines are skipped (``line_too_long``).
      max_sentence_chars: longer sentences are re-split, then skipped.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "c.txt")
    >>> _ = open(p, "w").write("A one.\\nA two.\\n\\n\\nB one.\\n")
    >>> list(read_documents(p))
    [['A one.', 'A two.'], ['B one.']]
    """
    for _, doc in read_located_documents(
        path,
        stats=stats,
        file_format=file_format,
        max_line_bytes=max_line_bytes,
        max_sentence_chars=max_sentence_chars,
    ):
        yield doc


def read_located_documents(
    path: str,
    *,
    start: int = 0,
    end: int | None = None,
    stats: ReadStats | None = None,
    file_format: str = "auto",
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_sentence_chars: int = DEFAULT_MAX_SENTENCE_CHARS,
) -> Iterator[LocatedDocument]:
    """``(offset, document)`` for the documents that *start* in bytes
    ``[start, end)`` of ``path``; a document that starts inside the range is
    read to its end, past ``end`` if need be.

    Byte ranges let one huge file be read as many bounded tasks that together
    read every document exactly once, whatever the cut points (a cut inside a
    line or a document is fine). Ranges need an uncompressed file; a
    compressed one is read whole (``start=0``, ``end=None``), with offsets
    counted in its uncompressed stream. Memory stays bounded by one document.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "c.txt")
    >>> _ = open(p, "w").write("A one.\\nA two.\\n\\nB one.\\n")
    >>> list(read_located_documents(p, start=0, end=3))
    [(0, ['A one.', 'A two.'])]
    >>> list(read_located_documents(p, start=3))
    [(15, ['B one.'])]
    """
    if not storage.isfile(path):
        raise FileNotFoundError(f"input file not found: {path}")
    stats = stats if stats is not None else ReadStats()
    if file_format == "auto":
        file_format = detect_format(path)
    if file_format not in ("text", "jsonl"):
        raise ValueError(f"file_format must be 'text', 'jsonl' or 'auto', got {file_format!r}")
    clean = dict(max_sentence_chars=max_sentence_chars)
    with open_binary(path) as fh:
        compressed = isinstance(fh, gzip.GzipFile)
        if compressed and (start or end is not None):
            raise ValueError(f"{path} is compressed: it can only be read whole, not by byte range")
        position = _skip_to_line_start(fh, start)
        lines = _Lines(fh, max_line_bytes, position)
        try:
            if file_format == "text":
                after_blank = _previous_line_is_blank(fh, position)
                yield from _text_documents(lines, after_blank, end, stats, clean)
            else:
                yield from _jsonl_documents(lines, end, stats, clean)
        except (EOFError, OSError, zlib.error) as e:
            if not compressed:
                raise
            raise ValueError(
                f"{path}: the compressed data is truncated or damaged after "
                f"{lines.offset:,} uncompressed bytes ({e}). Check it with "
                "`gzip -t`, re-create it, or leave it out of the inputs."
            ) from e


def _text_documents(
    lines: _Lines,
    after_blank: bool,
    end: int | None,
    stats: ReadStats,
    clean: dict,
) -> Iterator[LocatedDocument]:
    """BERT's format: a document starts at a non-blank line after a blank one
    (or at the file's first line); runs of blank lines are one separator."""
    doc: list[str] = []
    doc_at: int | None = None  # None: in the tail of a document an earlier range owns
    for at, line, reason in lines:
        if line is not None and not line.strip():
            if doc_at is not None and doc:
                yield from emit_located(doc_at, doc, stats)
            doc, doc_at, after_blank = [], None, True
            continue
        if after_blank:  # a document starts here
            if end is not None and at >= end:
                return
            doc_at, doc = at, []
        after_blank = False
        if doc_at is None:
            continue
        if line is None:
            stats.skip(reason or "unreadable_line")
            continue
        doc.extend(clean_sentences([line], stats, **clean))
    if doc_at is not None and doc:
        yield from emit_located(doc_at, doc, stats)


def _jsonl_documents(
    lines: _Lines,
    end: int | None,
    stats: ReadStats,
    clean: dict,
) -> Iterator[LocatedDocument]:
    """One document per line."""
    for at, line, reason in lines:
        if end is not None and at >= end:
            return
        if line is None:
            stats.skip(reason or "unreadable_line")
            continue
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            stats.skip("invalid_json")
            continue
        sentences = _record_sentences(record)
        if sentences is None:
            stats.skip("invalid_record")
            continue
        yield from emit_located(at, clean_sentences(sentences, stats, **clean), stats)


def emit_located(at: int, doc: list[str], stats: ReadStats) -> Iterator[LocatedDocument]:
    """``doc``'s documents (`ReadStats` counts what is skipped), each at position ``at``."""
    for document in _emit(doc, stats):
        yield at, document


def _record_sentences(record: object) -> list[str] | None:
    if not isinstance(record, dict):
        return None
    sentences = record.get("sentences")
    if isinstance(sentences, list) and all(isinstance(s, str) for s in sentences):
        return sentences
    text = record.get("text")
    if sentences is None and isinstance(text, str):
        return split_sentences(text)
    return None


def read_corpus(
    specs: PathSpec | Sequence[PathSpec],
    *,
    stats: ReadStats | None = None,
    what: str = "input",
    **kwargs,
) -> Iterator[Document]:
    """`read_documents` over every file of `resolve_inputs(specs)`, in order.

    ``specs`` are files, globs, folders or ``sample:en`` / ``sample:zh``;
    ``what`` names them in the error for a missing one.
    """
    for path in resolve_inputs(specs, what=what):
        yield from read_documents(path, stats=stats, **kwargs)


def iter_sentences(
    specs: PathSpec | Sequence[PathSpec], stats: ReadStats | None = None, **kwargs
) -> Iterator[str]:
    """Every sentence of `read_corpus(specs)`, in order: tokenizer-training text.

    Tokenizer training and pretraining read a file through this one reader, so
    they see the same sentences.

    >>> from albert_tf.data import sample_path
    >>> stats = ReadStats()
    >>> sum(1 for _ in iter_sentences([sample_path("en")], stats)) == stats.sentences
    True
    """
    for document in read_corpus(specs, stats=stats, **kwargs):
        yield from document
