"""Public datasets by name: ``tfds:NAME[/CONFIG][:SPLIT]`` and Hugging Face ``datasets`` folders.

The fine-tuning readers read files. A dataset named here is turned once into a
file in the layout its task reader already reads, cached, and read like any other
file, so bad rows are counted the same way and nothing downstream knows where the
items came from:

* ``tfds:squad/v2.0:train``: a tensorflow-datasets dataset (prepared in TFDS's own
  data folder, ``TFDS_DATA_DIR``; this package downloads nothing itself). The split
  defaults to ``train``.
* a folder written by Hugging Face ``datasets``: ``Dataset.save_to_disk``
  (``state.json`` and ``.arrow`` files) or one split of a ``DatasetDict`` saved the
  same way (``FOLDER/train``); ``.parquet`` and ``.arrow`` files (``Dataset.to_parquet``).
  Read with pyarrow; ``datasets`` itself is not needed.
  (``Dataset.to_json`` exports are JSON Lines: the readers read those directly.)

Which task a dataset serves is told by its columns (`LAYOUTS`):

============== ========================================================= ======================
layout         columns                                                   written as
============== ========================================================= ======================
span_qa        ``context``, ``question``, ``answers`` (SQuAD, CMRC 2018)  JSON Lines
multiple_choice ``article``, ``questions``, ``options``, ``answers`` (RACE) JSON Lines
tagging        ``tokens`` and ``ner_tags`` / ``ner`` / ``tags``           CoNLL columns
classification a ``label`` and GLUE/CLUE text columns (``sentence``...)   JSON Lines
============== ========================================================= ======================

An unanswerable SQuAD 2.0 question (TFDS's ``is_impossible``, or Hugging Face's
empty ``answers``) stays a question with no answer. Class labels are written as
their index (the published label order, e.g. SST-2's 0 = negative); a missing label
(GLUE's test splits, ``-1``) leaves the row unlabelled.

>>> parse_tfds_name("tfds:glue/sst2:validation")
('glue/sst2', 'validation')
>>> parse_tfds_name("tfds:squad")
('squad', 'train')
>>> layout_of({"context", "question", "answers", "id"})
'span_qa'
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from albert_tf import storage

TFDS_PREFIX = "tfds:"
#: Where converted datasets are cached (``ALBERT_TF_CACHE`` overrides it).
DEFAULT_CACHE = os.path.join("~", ".cache", "albert_tf", "datasets")

#: Task layouts, tried in order: the columns each needs.
LAYOUTS: dict[str, tuple[str, ...]] = {
    "span_qa": ("context", "question", "answers"),
    "multiple_choice": ("article", "questions", "options", "answers"),
    "tagging": ("tokens",),
    "classification": (),
}
#: Tag columns of a token-tagging dataset, in the order they are looked for.
TAG_COLUMNS = ("ner_tags", "ner", "tags")
#: Text columns of a classification dataset: one text, or a text pair.
TEXT_COLUMNS = (
    ("sentence1", "sentence2"),
    ("question1", "question2"),
    ("premise", "hypothesis"),
    ("question", "sentence"),
    ("text", "text_pair"),
    ("sentence", None),
    ("text", None),
    ("content", None),
)
LABEL_COLUMNS = ("label", "labels")
ID_COLUMNS = ("id", "idx", "example_id", "guid")


class DatasetLayoutError(ValueError):
    """A dataset whose columns fit no fine-tuning task."""


def is_tfds_name(spec: str) -> bool:
    return spec.startswith(TFDS_PREFIX)


def parse_tfds_name(spec: str) -> tuple[str, str]:
    """``tfds:NAME[/CONFIG][:SPLIT]`` → ``(NAME[/CONFIG], SPLIT)``; SPLIT defaults to train."""
    body = spec[len(TFDS_PREFIX) :] if is_tfds_name(spec) else spec
    name, _, split = body.partition(":")
    if not name:
        raise ValueError(f"{spec!r}: give a dataset name, e.g. tfds:glue/sst2:validation")
    return name, split or "train"


def is_hf_dataset(path: str) -> bool:
    """Whether ``path`` is something Hugging Face ``datasets`` wrote: a saved dataset
    folder, a saved ``DatasetDict`` (which needs a split: ``FOLDER/train``), or a
    ``.parquet`` / ``.arrow`` file."""
    if path.endswith((".parquet", ".arrow")):
        return storage.isfile(path)
    return storage.isdir(path) and (
        storage.exists(os.path.join(path, "state.json"))
        or storage.exists(os.path.join(path, "dataset_dict.json"))
    )


def layout_of(columns: Iterable[str]) -> str:
    """The task layout of a dataset with these columns (`LAYOUTS`)."""
    columns = set(columns)
    for layout, needed in LAYOUTS.items():
        if layout == "tagging":
            if "tokens" in columns and any(c in columns for c in TAG_COLUMNS):
                return layout
        elif layout == "classification":
            has_label = any(c in columns for c in LABEL_COLUMNS)
            if has_label and any(a in columns for a, _ in TEXT_COLUMNS):
                return layout
        elif all(c in columns for c in needed):
            return layout
    raise DatasetLayoutError(
        f"columns {sorted(columns)} fit no fine-tuning task: expected "
        "context/question/answers (span QA), article/questions/options/answers (RACE), "
        f"tokens with one of {'/'.join(TAG_COLUMNS)} (tagging), or a label with "
        "sentence/text columns (classification)"
    )


def _text(value: Any) -> Any:
    """Bytes (TFDS) → str, recursively through lists and dicts; numpy → Python."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {k: _text(v) for k, v in value.items()}
    if hasattr(value, "to_list"):  # a ragged feature (RACE's options), as TFDS gives it
        value = value.to_list()
    elif hasattr(value, "tolist"):  # numpy arrays and scalars
        value = value.tolist()
    if isinstance(value, list):
        return [_text(v) for v in value]
    return value


def _item_id(record: Mapping[str, Any], source: str, number: int) -> str:
    for column in ID_COLUMNS:
        if record.get(column) not in (None, ""):
            return str(record[column])
    return f"{source}:{number}"


def _qa_row(record: Mapping[str, Any], item_id: str) -> dict:
    answers = record.get("answers") or {}
    if isinstance(answers, dict):  # columns: {"text": [...], "answer_start": [...]}
        answers = [
            {"text": t, "answer_start": s}
            for t, s in zip(answers.get("text", []), answers.get("answer_start", []), strict=False)
        ]
    row = {"id": item_id, "context": record["context"], "question": record["question"]}
    # SQuAD 2.0: TFDS marks an unanswerable question, Hugging Face leaves its answers empty.
    impossible = bool(record.get("is_impossible")) or not answers
    row["answers"] = [] if impossible else answers
    row["is_impossible"] = impossible
    return row


def _classification_row(
    record: Mapping[str, Any], item_id: str, label_column: str, label_names: Sequence[str] | None
) -> dict:
    first, second = next(
        (a, b) for a, b in TEXT_COLUMNS if a in record and (b is None or b in record)
    )
    row: dict[str, Any] = {"id": item_id, "text": record[first]}
    if second is not None:
        row["text_pair"] = record[second]
    label = record.get(label_column)
    # -1: GLUE's unlabelled test rows; keep them unlabelled, not as a class.
    if label is not None and label != -1:
        row["label"] = label
    return row


def _conll_lines(
    record: Mapping[str, Any], tag_column: str, tag_names: Sequence[str] | None
) -> list[str]:
    tokens, tags = record["tokens"], record[tag_column]
    if len(tokens) != len(tags):
        # A sentence whose tags do not line up: written with no tags would make the
        # reader treat the file as unlabelled, so it is dropped here and counted.
        return []
    lines = []
    for token, tag in zip(tokens, tags, strict=True):
        if isinstance(tag, int):
            if not tag_names:
                raise DatasetLayoutError(
                    f"{tag_column} holds tag numbers but the dataset names no tags "
                    "(a ClassLabel feature); save it with its features"
                )
            tag = tag_names[tag]
        token = "".join(str(token).split()) or "_"  # a token is one column
        lines.append(f"{token}\t{tag}")
    return lines + [""]


def write_task_file(
    records: Iterable[Mapping[str, Any]],
    columns: Iterable[str],
    class_names: Mapping[str, Sequence[str]],
    path_stem: str,
    source: str,
) -> tuple[str, dict[str, int]]:
    """Writes ``records`` as a file its task's reader reads: ``path_stem`` + ``.jsonl``
    or ``.conll``. Returns the path and counts (``rows``, ``dropped``)."""
    columns = list(columns)
    layout = layout_of(columns)
    suffix = ".conll" if layout == "tagging" else ".jsonl"
    path = path_stem + suffix
    counts = {"rows": 0, "dropped": 0}
    if layout == "tagging":
        tag_column = next(c for c in TAG_COLUMNS if c in columns)

        def lines(record: Mapping[str, Any], number: int) -> list[str]:
            return _conll_lines(record, tag_column, class_names.get(tag_column))

    else:
        label_column = next((c for c in LABEL_COLUMNS if c in columns), "label")

        def lines(record: Mapping[str, Any], number: int) -> list[str]:
            item_id = _item_id(record, source, number)
            if layout == "span_qa":
                row = _qa_row(record, item_id)
            elif layout == "multiple_choice":
                row = {k: record[k] for k in LAYOUTS["multiple_choice"]} | {"id": item_id}
            else:
                row = _classification_row(
                    record, item_id, label_column, class_names.get(label_column)
                )
            return [json.dumps(row, ensure_ascii=False)]

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    temporary = f"{path}.partial"  # the cache holds whole files only
    with open(temporary, "w", encoding="utf-8") as f:
        for number, record in enumerate(records, 1):
            written = lines(_text(dict(record)), number)
            counts["rows" if written else "dropped"] += 1
            for line in written:
                f.write(line + "\n")
    os.replace(temporary, path)
    return path, counts


def cache_dir() -> str:
    return os.path.expanduser(os.environ.get("ALBERT_TF_CACHE") or DEFAULT_CACHE)


def _cached(
    key: str,
    label: str,
    name: str,
    produce: Callable[[str], tuple[str, dict[str, int]]],
    log: Callable[[str], None],
) -> str:
    """The cached file for ``key``, made by ``produce(path_stem)`` the first time."""
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    stem = os.path.join(cache_dir(), f"{name}-{digest}")
    for suffix in (".jsonl", ".conll"):
        if os.path.exists(stem + suffix):
            return stem + suffix
    path, counts = produce(stem)
    dropped = f", {counts['dropped']} dropped (tags not one per token)" if counts["dropped"] else ""
    log(f"{label}: {counts['rows']:,} rows{dropped}, cached as {path}")
    return path


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def tfds_file(spec: str, log: Callable[[str], None] = print) -> str:
    """The task file of a ``tfds:`` dataset (converted once, then cached)."""
    import tensorflow_datasets as tfds

    name, split = parse_tfds_name(spec)
    try:
        builder = tfds.builder(name)
    except tfds.core.registered.DatasetNotFoundError as e:
        raise ValueError(f"{spec}: tensorflow-datasets has no dataset {name!r}") from e
    features = builder.info.features
    class_names = {}
    for column, feature in features.items():
        inner = getattr(feature, "feature", feature)  # Sequence(ClassLabel) → ClassLabel
        if isinstance(inner, tfds.features.ClassLabel):
            class_names[column] = list(inner.names)

    def produce(stem: str) -> tuple[str, dict[str, int]]:
        try:
            dataset = tfds.load(name, split=split)
        except (ValueError, KeyError) as e:
            raise ValueError(f"{spec}: {e}") from e
        return write_task_file(tfds.as_numpy(dataset), features.keys(), class_names, stem, spec)

    key = f"{TFDS_PREFIX}{name}:{split}@{builder.info.version}"
    return _cached(key, spec, _safe(f"tfds_{name}_{split}"), produce, log)


def _hf_arrow_files(path: str) -> list[str]:
    if not storage.isdir(path):
        return [path]
    if storage.exists(os.path.join(path, "dataset_dict.json")):
        splits = json.loads(storage.read_text(os.path.join(path, "dataset_dict.json")))
        splits = splits.get("splits", [])
        raise ValueError(
            f"{path} holds a DatasetDict: name one of its splits, e.g. "
            + ", ".join(os.path.join(path, s) for s in splits)
        )
    state = json.loads(storage.read_text(os.path.join(path, "state.json")))
    return [os.path.join(path, entry["filename"]) for entry in state.get("_data_files", [])]


def _hf_class_names(features: Mapping[str, Any]) -> dict[str, list[str]]:
    """ClassLabel names of ``datasets``' serialised features (``dataset_info.json``)."""
    names = {}
    for column, feature in features.items():
        inner = feature
        while isinstance(inner, dict) and inner.get("_type") in ("Sequence", "List"):
            inner = inner.get("feature")
        if isinstance(inner, list) and inner:  # an older list-of-one Sequence
            inner = inner[0]
        if isinstance(inner, dict) and inner.get("_type") == "ClassLabel":
            names[column] = list(inner.get("names") or [])
    return names


def _hf_table(files: Sequence[str]):
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for file in files:
        if file.endswith(".parquet"):
            tables.append(pq.read_table(pa.BufferReader(storage.read_bytes(file))))
            continue
        data = pa.py_buffer(storage.read_bytes(file))
        try:  # save_to_disk writes Arrow streams; other writers, Arrow files
            tables.append(pa.ipc.open_stream(data).read_all())
        except pa.ArrowInvalid:
            tables.append(pa.ipc.open_file(data).read_all())
    return pa.concat_tables(tables)


def hf_file(path: str, log: Callable[[str], None] = print) -> str:
    """The task file of a Hugging Face ``datasets`` folder or file (converted once, cached)."""
    files = _hf_arrow_files(path)
    if not files:
        raise ValueError(f"{path}: a saved dataset with no data files")
    table = _hf_table(files)
    features: Mapping[str, Any] = {}
    info = os.path.join(path, "dataset_info.json")
    if storage.isdir(path) and storage.exists(info):
        features = json.loads(storage.read_text(info)).get("features") or {}
    elif table.schema.metadata and b"huggingface" in table.schema.metadata:
        features = json.loads(table.schema.metadata[b"huggingface"]).get("info", {})
        features = features.get("features") or {}
    stamps = [f"{f}:{storage.version(f)}" for f in files]

    def produce(stem: str) -> tuple[str, dict[str, int]]:
        return write_task_file(
            table.to_pylist(), table.column_names, _hf_class_names(features), stem, path
        )

    name = _safe(pathlib.PurePath(os.path.abspath(path)).name or "dataset")
    key = "|".join([os.path.abspath(path), *stamps])
    return _cached(key, path, f"hf_{name}", produce, log)


def dataset_file(spec: str, log: Callable[[str], None] = print) -> str | None:
    """The task file of ``spec`` if it names a public dataset (``tfds:`` or a
    Hugging Face folder/file), else None (an ordinary file, glob or folder)."""
    if is_tfds_name(spec):
        return tfds_file(spec, log)
    if is_hf_dataset(spec):
        return hf_file(spec, log)
    return None


def dataset_files(specs: Iterable[str], log: Callable[[str], None] = print) -> Iterator[str]:
    """Each spec, a public dataset replaced by its task file."""
    for spec in specs:
        yield dataset_file(spec, log) or spec
