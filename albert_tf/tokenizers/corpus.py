"""Reading tokenizer-training text: plain lines or JSON Lines, gzip or not.

Bad input is never dropped silently: lines that are not valid UTF-8 (and
JSON Lines records that do not parse or lack a ``sentences`` list) are
skipped and counted in :class:`CorpusStats`, which the caller reports.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = path.write_bytes(b"first line\\n\\xff\\xfe bad\\n\\nsecond\\n")
    >>> stats = CorpusStats()
    >>> list(iter_sentences([path], stats))
    ['first line', 'second']
    >>> stats.invalid_utf8_lines
    1
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path


@dataclasses.dataclass
class CorpusStats:
    """Counts gathered while reading a corpus."""

    files: int = 0
    lines: int = 0
    sentences: int = 0
    invalid_utf8_lines: int = 0
    malformed_json_lines: int = 0

    def summary(self) -> str:
        return (
            f"{self.files} file(s), {self.lines} line(s), {self.sentences} sentence(s); "
            f"skipped {self.invalid_utf8_lines} invalid UTF-8 line(s) and "
            f"{self.malformed_json_lines} malformed JSON line(s)"
        )


def _is_jsonl(path: Path) -> bool:
    name = path.name.lower().removesuffix(".gz")
    return name.endswith((".jsonl", ".json"))


def iter_sentences(
    paths: Iterable[str | os.PathLike[str]], stats: CorpusStats | None = None
) -> Iterator[str]:
    """Yields non-blank sentences from text or JSON Lines files.

    ``*.jsonl`` / ``*.json`` (optionally ``.gz``) files hold one JSON object a
    line with a ``"sentences"`` list; any other file is one sentence a line.
    A ``.gz`` suffix means gzip.

    Raises:
      FileNotFoundError: a path does not exist.
    """
    stats = stats if stats is not None else CorpusStats()
    for raw_path in paths:
        path = Path(raw_path)
        if not path.is_file():
            raise FileNotFoundError(f"training input not found: {path}")
        stats.files += 1
        opener = gzip.open if path.suffix == ".gz" else open
        jsonl = _is_jsonl(path)
        with opener(path, "rb") as handle:
            for raw in handle:
                stats.lines += 1
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    stats.invalid_utf8_lines += 1
                    continue
                if jsonl:
                    if not line.strip():
                        continue
                    try:
                        sentences = json.loads(line)["sentences"]
                        if not isinstance(sentences, list):
                            raise TypeError("sentences is not a list")
                    except (ValueError, KeyError, TypeError):
                        stats.malformed_json_lines += 1
                        continue
                    for sentence in sentences:
                        if isinstance(sentence, str) and sentence.strip():
                            stats.sentences += 1
                            yield sentence
                else:
                    line = line.rstrip("\r\n")
                    if line.strip():
                        stats.sentences += 1
                        yield line
