"""Span QA (extractive question answering) data: the readers, files → `QAExample` items.

An item is a question, its context and its answers, each an `Answer` span
of character offsets (code points, end exclusive) into the context. Formats,
detected per file (gzip or not) from its first non-blank character:

* **SQuAD layout** (a JSON object with ``"data"``): SQuAD 1.1 and 2.0, CMRC 2018
  and DRCD ship in it: ``{"data": [{"title", "paragraphs": [{"context", "qas":
  [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"?}]}]}]}``.
  A SQuAD 2.0 question with ``"is_impossible": true`` has no answer (its
  ``plausible_answers`` are not read).
* **JSON Lines** (the repository's shared QA data, see docs/finetuning.md):
  ``{"id", "lang"?, "context", "question", "answers": [{"text", "answer_start"}],
  "is_impossible"?}`` a line.

Every answer is checked against ``context[answer_start:answer_start + len(text)]``.
A bad answer is dropped and counted; a question left without one (and not
impossible) is skipped. A question without ``"answers"`` in a file where no
question has any is read as unlabelled (a test file to answer). Bad rows are
skipped and counted by reason (`SKIP_REASONS`), never fatal.

Their windows for the model are `albert_tf.tasks.span_qa.preprocessing`'s; the
answer's choice over those windows is `albert_tf.tasks.span_qa.decoding`'s.

Example:
    >>> import json, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.json")
    >>> squad = {"data": [{"title": "t", "paragraphs": [{"context": "ALBERT shares layers.",
    ...     "qas": [{"id": "q1", "question": "What does ALBERT share?",
    ...              "answers": [{"text": "layers", "answer_start": 14}]},
    ...             {"id": "q2", "question": "Who?", "answers": [],
    ...              "is_impossible": True},
    ...             {"id": "q3", "question": "Bad?",
    ...              "answers": [{"text": "nope", "answer_start": 0}]}]}]}]}
    >>> with open(path, "w") as f:
    ...     json.dump(squad, f)
    >>> examples, skipped = read_span_qa([path])
    >>> [(e.id, [(a.start, a.end, a.text) for a in e.answers], e.impossible) for e in examples]
    [('q1', [(14, 20, 'layers')], False), ('q2', [], True)]
    >>> dict(skipped)
    {'answer_text_mismatch': 1, 'no_valid_answer': 1}
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from albert_tf.data.chinese_wwm import is_cjk_char
from albert_tf.data.corpus import open_binary
from albert_tf.data.inputs import resolve_inputs

#: Why `read_span_qa` skips a question, or drops one of its answers.
SKIP_REASONS = (
    "invalid_json",  # a line (or file) that does not parse to an object
    "invalid_text",  # a question or context that is not valid Unicode
    "missing_context",  # no string "context"
    "missing_question",  # no string "question"
    "empty_context",  # a blank context
    "empty_question",  # a blank question
    "bad_answer",  # not {"text": non-blank str, "answer_start": int} inside the context (dropped)
    "answer_text_mismatch",  # an answer's text is not the context at answer_start (dropped)
    "no_valid_answer",  # every answer of a question that is not impossible was dropped
    "missing_answers",  # no "answers", in a file whose other questions have them
)
ACCEPTED_FORMATS = (
    'the SQuAD layout (a JSON object with "data": SQuAD 1.1/2.0, CMRC 2018, DRCD) or '
    'JSON Lines with "context", "question" and "answers": [{"text", "answer_start"}]'
)


@dataclasses.dataclass(frozen=True)
class Answer:
    """A span of the context: code points, ``end`` exclusive; ``text`` is the span."""

    start: int
    end: int
    text: str


@dataclasses.dataclass(frozen=True)
class QAExample:
    """A question about a context, and its answers (none: impossible or unlabelled)."""

    id: str
    question: str
    context: str
    answers: tuple[Answer, ...]
    impossible: bool = False
    lang: str = ""
    labelled: bool = True  # False: its source had no answers (a test file)
    article: str = ""  # the SQuAD layout's article (its title); "" in JSON Lines

    @property
    def group(self) -> str:
        """What a split keeps in one part (`albert_tf.data.splits`): the article where
        the file has one, else the context."""
        return f"article:{self.article}" if self.article else f"context:{self.context}"


# -- reading -----------------------------------------------------------------

_Row = tuple[str, dict, Any, str]  # (fallback id, question record, context, article)


def _valid_text(value: Any) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800") that JSON lets through
        return False
    return True


def _example(
    item_id: str,
    record: dict,
    context: Any,
    labelled_file: bool,
    skipped: collections.Counter,
    article: str = "",
) -> QAExample | None:
    """One question, or None (its reason counted in ``skipped``)."""
    question = record.get("question")
    for name, value in (("context", context), ("question", question)):
        if not isinstance(value, str):
            skipped[f"missing_{name}"] += 1
            return None
        if not value.strip():
            skipped[f"empty_{name}"] += 1
            return None
        if not _valid_text(value):
            skipped["invalid_text"] += 1
            return None
    impossible = record.get("is_impossible") is True
    raw = record.get("answers")
    if raw is None and not impossible:
        if labelled_file:
            skipped["missing_answers"] += 1
            return None
        raw_answers: list = []
        labelled = False
    else:
        raw_answers = _answer_list(raw)
        labelled = True
        # Hugging Face's squad_v2 (``Dataset.to_json``) marks an unanswerable question by
        # empty answer columns alone, with no "is_impossible".
        if isinstance(raw, dict) and raw.get("text") == [] and raw.get("answer_start") == []:
            impossible = True
    answers: dict[tuple[int, int], Answer] = {}
    for answer in [] if impossible else raw_answers:
        text = answer.get("text") if isinstance(answer, dict) else None
        start = answer.get("answer_start") if isinstance(answer, dict) else None
        if not (
            isinstance(text, str)
            and text.strip()
            and isinstance(start, int)
            and not isinstance(start, bool)
            and start >= 0
            and start + len(text) <= len(context)
        ):
            skipped["bad_answer"] += 1
            continue
        if context[start : start + len(text)] != text:
            skipped["answer_text_mismatch"] += 1
            continue
        answers.setdefault((start, start + len(text)), Answer(start, start + len(text), text))
    if labelled and not impossible and not answers:
        skipped["no_valid_answer"] += 1
        return None
    item_id = str(record.get("id")) if record.get("id") not in (None, "") else item_id
    lang = record.get("lang")
    if not isinstance(lang, str):
        lang = "zh" if any(map(is_cjk_char, context[:200])) else "en"
    return QAExample(
        item_id, question, context, tuple(answers.values()), impossible, lang, labelled, article
    )


def _answer_list(raw: Any) -> list:
    """A question's answers as a list of ``{"text", "answer_start"}``; Hugging Face
    ``datasets``' columns (``{"text": [...], "answer_start": [...]}``) become one."""
    if isinstance(raw, list):
        return raw
    if isinstance(raw, dict) and isinstance(raw.get("text"), list):
        starts = raw.get("answer_start")
        if isinstance(starts, list) and len(starts) == len(raw["text"]):
            return [
                {"text": t, "answer_start": s} for t, s in zip(raw["text"], starts, strict=True)
            ]
    return [None]  # one bad answer, counted


def _squad_rows(data: Any, name: str, skipped: collections.Counter) -> Iterator[_Row]:
    """The questions of a SQuAD-layout object; a malformed article or paragraph is
    counted as ``invalid_json``."""
    articles = data.get("data")
    if not isinstance(articles, list):
        raise ValueError(f'{name}: "data" is not a list; expected {ACCEPTED_FORMATS}')
    for a, article in enumerate(articles):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            skipped["invalid_json"] += 1
            continue
        # The article keeps its questions together in a split: by its title, which
        # SQuAD, CMRC 2018 and DRCD give; else by its place in the file.
        title = article.get("title")
        key = title.strip() if isinstance(title, str) and title.strip() else f"{name}#{a}"
        for p, paragraph in enumerate(paragraphs):
            if not isinstance(paragraph, dict):
                skipped["invalid_json"] += 1
                continue
            questions = paragraph.get("qas")
            if not isinstance(questions, list):
                skipped["invalid_json"] += 1
                continue
            for q, record in enumerate(questions):
                if not isinstance(record, dict):
                    skipped["invalid_json"] += 1
                    continue
                yield f"{name}:{a}.{p}.{q}", record, paragraph.get("context"), key


def _json_lines(text: str, name: str, skipped: collections.Counter) -> Iterator[_Row]:
    """The questions of a JSON Lines file's text (split on "\n" only, as files are read)."""
    for number, line in enumerate(text.split("\n"), 1):
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            skipped["invalid_json"] += 1
            continue
        yield f"{name}:{number}", record, record.get("context"), ""


def _read_file(path: str) -> tuple[list[QAExample], collections.Counter]:
    name = os.path.basename(path)
    skipped: collections.Counter = collections.Counter()
    with open_binary(path) as f:
        text = f.read().decode("utf-8", errors="replace").lstrip("\ufeff")
    stripped = text.lstrip()
    if not stripped:
        raise ValueError(f"{path}: the file is empty; give {ACCEPTED_FORMATS}")
    rows: list[_Row]
    squad = None
    if stripped.startswith("{"):
        try:
            squad = json.loads(text)
        except ValueError as error:
            if len(stripped.splitlines()) == 1:  # one line that is not JSON: not JSON Lines
                raise ValueError(
                    f"{path}: not valid JSON ({error}); expected {ACCEPTED_FORMATS}"
                ) from None
            squad = None  # several objects: JSON Lines
    if isinstance(squad, dict) and "data" in squad:
        rows = list(_squad_rows(squad, name, skipped))
    elif stripped.startswith("{"):
        rows = list(_json_lines(text, name, skipped))
    else:
        raise ValueError(
            f"{path}: cannot recognise the format of {stripped[:80]!r}; accepted: "
            f"{ACCEPTED_FORMATS}"
        )
    labelled_file = any("answers" in r or r.get("is_impossible") is True for _, r, _, _ in rows)
    examples = []
    for fallback, record, context, article in rows:
        example = _example(fallback, record, context, labelled_file, skipped, article)
        if example is not None:
            examples.append(example)
    if not examples:
        raise ValueError(
            f"{path}: no readable questions ({sum(skipped.values())} skipped: "
            f"{dict(skipped) or 'none found'}); give {ACCEPTED_FORMATS}"
        )
    return examples, skipped


def read_span_qa(files: Sequence[str]) -> tuple[list[QAExample], collections.Counter]:
    """Reads questions in either layout above; bad ones are skipped and counted.

    Args:
        files: files, globs or folders (`albert_tf.data.inputs.resolve_inputs`).

    Returns:
        ``(examples, skipped)``: ``skipped`` counts dropped questions and answers
        by reason (`SKIP_REASONS`). A question without an id gets
        ``"<file name>:<line>"`` (JSON Lines) or ``"<file name>:<article>.<paragraph>.<question>"``.

    Raises:
        ValueError: a path matching no file, a file of no known format, or a
            file with no readable question.
    """
    try:
        paths = resolve_inputs(files, what="question answering data", samples=False)
    except FileNotFoundError as error:
        raise ValueError(str(error)) from error
    examples: list[QAExample] = []
    skipped: collections.Counter = collections.Counter()
    for path in paths:
        file_examples, file_skipped = _read_file(path)
        examples += file_examples
        skipped.update(file_skipped)
    return examples, skipped
