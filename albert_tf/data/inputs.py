"""Naming inputs: files, globs, folders and the embedded ``sample:`` corpora.

Every command and library function that takes input files resolves them here,
with one set of rules, so ``--input`` of `train_tokenizer`, ``--corpus`` of
`pretrain`, ``--train_files`` of `finetune` and ``inputs=`` of
`write_pretraining_data` accept the same things:

* a path to a file (any name: gzip and format are detected from the content);
* a glob (``corpus/*.jsonl.gz``), matches in sorted order;
* a folder, searched recursively for ``.jsonl``, ``.json``, ``.txt`` and
  ``.gz`` files (hidden files and folders are skipped);
* ``sample:en`` / ``sample:zh``, the small corpora shipped with the package;
* several of these, as a list or comma-separated.

Anything that matches nothing raises `FileNotFoundError` naming it, before any
work starts.

>>> resolve_inputs("sample:en") == [sample_path("en")]
True
>>> sample_language("sample:zh"), sample_language("corpus.txt")
('zh', None)
"""

from __future__ import annotations

import glob
import os
import pathlib
from collections.abc import Sequence

from albert_tf import storage

#: Languages of the embedded sample corpora.
SAMPLE_LANGUAGES = ("en", "zh")
SAMPLE_PREFIX = "sample:"
#: File name endings picked up when a folder is given.
DATA_SUFFIXES = (".jsonl", ".json", ".txt", ".gz")

_SAMPLE_DIR = pathlib.Path(__file__).resolve().parent / "sample"

PathSpec = str | os.PathLike[str]


def sample_path(language: str = "en") -> str:
    """Path of the embedded sample corpus (JSON Lines) for ``"en"`` or ``"zh"``.

    >>> sample_path("en").endswith("en_sample.jsonl")
    True
    """
    if language not in SAMPLE_LANGUAGES:
        raise ValueError(
            f"no embedded sample for {language!r}; use "
            + " or ".join(repr(lang) for lang in SAMPLE_LANGUAGES)
        )
    return str(_SAMPLE_DIR / f"{language}_sample.jsonl")


def sample_language(spec: str) -> str | None:
    """The language of a ``sample:<lang>`` name, or None for anything else.

    Raises `ValueError` for a ``sample:`` name with no embedded corpus.

    >>> sample_language("sample:en")
    'en'
    """
    if not spec.startswith(SAMPLE_PREFIX):
        return None
    language = spec[len(SAMPLE_PREFIX) :]
    sample_path(language)  # validates, with the message that names the choices
    return language


def _folder_files(folder: str, suffixes: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    for root, dirs, names in storage.walk(folder):
        # Sorted in place so the walk descends in a stable order; hidden
        # folders (.git, .parts of an interrupted write) are not data.
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [
            os.path.join(root, n)
            for n in sorted(names)
            if n.endswith(suffixes) and not n.startswith(".")
        ]
    return found


def in_data_dir(spec: str, data_dir: str | None) -> str:
    """``spec`` taken from ``data_dir`` when it is a relative path.

    Names with a prefix or scheme (``sample:en``, ``tfds:squad``, ``gs://...``),
    absolute paths and ``~`` paths stay as they are; so does everything when
    ``data_dir`` is empty. The recipes in ``configs/`` name their data relative
    to ``--data_dir`` rather than to one machine's folders.

    >>> in_data_dir("corpus/a.jsonl.gz", "/data")
    '/data/corpus/a.jsonl.gz'
    >>> [in_data_dir(s, "/data") for s in ("sample:en", "tfds:glue/sst2", "gs://b/t.json",
    ...                                     "/abs/t.json", "~/t.json")]
    ['sample:en', 'tfds:glue/sst2', 'gs://b/t.json', '/abs/t.json', '~/t.json']
    """
    if not data_dir or ":" in spec.split("/", 1)[0] or os.path.isabs(spec):
        return spec
    return spec if spec.startswith("~") else os.path.join(data_dir, spec)


def _split(specs: PathSpec | Sequence[PathSpec]) -> list[str]:
    if isinstance(specs, str | os.PathLike):
        specs = [specs]
    parts: list[str] = []
    for spec in specs:
        parts += [p.strip() for p in os.fspath(spec).split(",") if p.strip()]
    return parts


def resolve_inputs(
    specs: PathSpec | Sequence[PathSpec],
    *,
    what: str = "input",
    samples: bool = True,
    suffixes: tuple[str, ...] = DATA_SUFFIXES,
) -> list[str]:
    """Expands files, globs, folders and ``sample:`` names into file paths.

    Paths may be local or in a bucket (``gs://...``: `albert_tf.storage`).

    Args:
      specs: one spec or a list of them; each may be comma-separated.
      what: names the inputs in the error message (``"corpus"``,
        ``"multiple-choice data"``...).
      samples: whether ``sample:en`` / ``sample:zh`` name the embedded
        corpora (off where a sample means something else, e.g. fine-tuning).
      suffixes: file name endings collected from folders.

    Returns:
      Paths in the order given (sorted within a glob or folder), each once.

    Raises:
      FileNotFoundError: a spec matches no file (all such specs are named), or
        no spec is given.
      ValueError: ``sample:`` with a language that has no embedded corpus.
    """
    files: list[str] = []
    missing: list[str] = []
    for part in _split(specs):
        language = sample_language(part) if samples else None
        if language is not None:
            files.append(sample_path(language))
            continue
        path = part if storage.is_remote(part) else os.path.expanduser(part)
        # A path that exists is taken literally, even if it holds glob
        # characters such as "[".
        literal = not glob.has_magic(path) or storage.exists(path)
        matches = [path] if literal else storage.glob(path)
        found: list[str] = []
        for match in matches:
            if storage.isdir(match):
                found += _folder_files(match, suffixes)
            elif storage.isfile(match):
                found.append(match)
        if not found:
            missing.append(part)
        files += found
    if missing:
        raise FileNotFoundError(
            f"{what} file not found: {', '.join(missing)} (give existing files, globs, "
            f"folders holding {'/'.join(suffixes)} files"
            + (", or sample:en / sample:zh" if samples else "")
            + ")"
        )
    if not files:
        raise FileNotFoundError(f"no {what} files given")
    return list(dict.fromkeys(files))
