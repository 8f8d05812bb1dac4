"""Files that may live on this machine or in a bucket (``gs://``, ``s3://``, ``hdfs://``).

The bottom of the house: every area that writes files may use it. Pretraining data
for many machines lives in object storage: Beam workers on Dataflow read their
input from ``gs://`` and write shards back there. A path
with a scheme goes through ``tf.io.gfile`` (every file system TensorFlow
has, ``ram://`` included, which the tests use); a local path keeps the plain
``os`` calls, so local work needs no TensorFlow import and keeps its atomic
renames and fsyncs.

>>> is_remote("gs://bucket/corpus.jsonl"), is_remote("/data/corpus.jsonl")
(True, False)
"""

from __future__ import annotations

import contextlib
import glob as _glob
import io
import json
import os
import shutil
from collections.abc import Iterator
from typing import IO


def is_remote(path: str) -> bool:
    return "://" in os.fspath(path)


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


class _GFileReader(io.RawIOBase):
    """A `tf.io.gfile.GFile` as a raw stream, so that `io.BufferedReader` gives
    it what readers of local files use (``readline(limit)``, ``peek``)."""

    def __init__(self, path: str):
        self._file = _gfile().GFile(path, "rb")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._file.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._file.seek(offset, whence)
        return self._file.tell()

    def tell(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()
        super().close()


def open_file(path: str, mode: str = "rb") -> IO:
    """``open`` for local paths (text as UTF-8), `tf.io.gfile.GFile` for remote ones
    (buffered, with ``readline(limit)``, when reading bytes)."""
    if is_remote(path):
        if "r" in mode and not _gfile().exists(path):
            # As open() says it, so callers catch one exception for both kinds.
            raise FileNotFoundError(f"No such file: {path!r}")
        if mode == "rb":
            return io.BufferedReader(_GFileReader(path), buffer_size=1 << 20)
        return _gfile().GFile(path, mode)
    if "b" in mode:
        return open(path, mode)  # noqa: SIM115 - the caller closes it
    return open(path, mode, encoding="utf-8")  # noqa: SIM115


def exists(path: str) -> bool:
    return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def isdir(path: str) -> bool:
    return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def isfile(path: str) -> bool:
    if is_remote(path):
        return _gfile().exists(path) and not _gfile().isdir(path)
    return os.path.isfile(path)


def glob(pattern: str) -> list[str]:
    return sorted(_gfile().glob(pattern) if is_remote(pattern) else _glob.glob(pattern))


def walk(folder: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk``; the caller may prune ``dirs`` in place, locally and remotely."""
    if not is_remote(folder):
        yield from os.walk(folder)
        return
    gfile = _gfile()
    pending = [folder]
    while pending:
        root = pending.pop(0)
        entries = gfile.listdir(root)
        if root.startswith("ram://"):
            # TensorFlow's ram:// lists by name prefix: "assets" also lists
            # ".extra" of a sibling "assets.extra". Keep what exists.
            entries = [e for e in entries if gfile.exists(os.path.join(root, e))]
        dirs = sorted(e.rstrip("/") for e in entries if gfile.isdir(os.path.join(root, e)))
        names = sorted(e for e in entries if e.rstrip("/") not in dirs)
        yield root, dirs, names
        pending[:0] = [os.path.join(root, d) for d in dirs]


def makedirs(path: str) -> None:
    if is_remote(path):
        _gfile().makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def make_parent(path: str | os.PathLike[str]) -> None:
    """Creates the folder the file ``path`` goes in (a relative local path's
    is under the working directory; a bucket URL's is cut at its last ``/``).

    >>> import tempfile
    >>> base = tempfile.mkdtemp(); make_parent(os.path.join(base, "a", "b.json"))
    >>> os.path.isdir(os.path.join(base, "a"))
    True
    """
    path = os.fspath(path)
    parent = os.path.dirname(path) if is_remote(path) else os.path.dirname(os.path.abspath(path))
    if parent:
        makedirs(parent)


def remove(path: str) -> None:
    if is_remote(path):
        _gfile().remove(path)
    else:
        os.remove(path)


def rmtree(path: str, ignore_errors: bool = False) -> None:
    if not is_remote(path):
        shutil.rmtree(path, ignore_errors=ignore_errors)
        return
    try:
        _gfile().rmtree(path)
    except Exception:  # tf.errors.NotFoundError and kin
        if path.startswith("ram://"):
            # ram:// lists children by name prefix ("assets" also lists ".extra"
            # of "assets.extra"), and its recursive delete stops at the phantom
            # entry, maybe after deleting the folder itself: delete what `walk`
            # still finds, deepest folders first.
            try:
                _remove_tree_by_walking(path)
                return
            except Exception:
                if not ignore_errors:
                    raise
                return
        if not ignore_errors:
            raise


def _remove_tree_by_walking(path: str) -> None:
    import tensorflow as tf

    gfile = _gfile()
    if not gfile.exists(path):
        return  # the recursive delete got that far
    folders = []
    for root, _, names in walk(path):
        folders.append(root)
        for name in names:
            gfile.remove(os.path.join(root, name))
    for folder in reversed(folders):
        # A folder ram:// kept no entry for is already gone.
        with contextlib.suppress(tf.errors.NotFoundError):
            gfile.rmtree(folder)
    if gfile.exists(path):
        raise OSError(f"could not remove {path}")


def replace(source: str, target: str) -> None:
    """Renames over ``target``: atomic locally; in object storage a copy, then
    a delete (the target appears whole or not at all)."""
    if is_remote(source) or is_remote(target):
        _gfile().rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


def move_tree(source: str, target: str, last: tuple[str, ...] = ()) -> None:
    """Moves the folder ``source`` to ``target`` (which must not exist).

    Locally one atomic rename. Object stores have no folders to rename (a
    ``ram://`` rename moves no children, ``gs://`` copies object by object), so
    remotely every file is copied, the top-level files named in ``last`` after
    all others, then ``source`` is removed. A reader that waits for those (TF
    Serving waits for ``saved_model.pb``) never sees the folder half-copied.
    """
    if not (is_remote(source) or is_remote(target)):
        os.rename(source, target)
        return
    gfile = _gfile()
    copies, final = [], []
    for root, _, names in walk(source):
        relative = os.path.relpath(root, source)
        # No "." segment: object stores do not normalise paths.
        folder = target if relative == "." else os.path.join(target, relative)
        gfile.makedirs(folder)
        for name in names:
            pair = (os.path.join(root, name), os.path.join(folder, name))
            (final if relative == "." and name in last else copies).append(pair)
    for source_file, target_file in copies + final:
        gfile.copy(source_file, target_file, overwrite=False)
    rmtree(source)


def size(path: str) -> int:
    return _gfile().stat(path).length if is_remote(path) else os.path.getsize(path)


def version(path: str) -> str:
    """Size and modification time: what tells a changed file from the one seen before."""
    if is_remote(path):
        stat = _gfile().stat(path)
        return f"{stat.length}|{stat.mtime_nsec}"
    stat = os.stat(path)
    return f"{stat.st_size}|{stat.st_mtime_ns}"


def listdir(path: str) -> list[str]:
    if is_remote(path):
        return sorted(e.rstrip("/") for e in _gfile().listdir(path))
    return sorted(os.listdir(path))


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    with open_file(os.fspath(path), "rb") as fh:
        return fh.read()


def read_text(path: str | os.PathLike[str]) -> str:
    return read_bytes(path).decode("utf-8")


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Writes ``data`` under a temporary name, then renames it over ``path``: a
    killed writer leaves the previous file or none, never half of one."""
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}"
    with open_file(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        if not is_remote(tmp):
            os.fsync(fh.fileno())
    replace(tmp, path)


def append_text(path: str | os.PathLike[str], text: str) -> None:
    """Appends to a text file (object stores rewrite it whole: keep it small)."""
    path = os.fspath(path)
    if is_remote(path):
        with _gfile().GFile(path, "a") as fh:
            fh.write(text)
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def copy(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Copies one file, across file systems (local to bucket and back)."""
    source, target = os.fspath(source), os.fspath(target)
    if is_remote(source) or is_remote(target):
        _gfile().copy(source, target, overwrite=True)
    else:
        shutil.copyfile(source, target)


def write_json_atomic(
    path: str | os.PathLike[str], value: object, *, sort_keys: bool = False
) -> None:
    """Writes ``value`` as indented JSON (UTF-8, non-ASCII kept, a final newline)
    under a temporary name, then renames it over ``path``: a killed writer leaves the
    previous file or none, never half of one. Local files are synced to disk first.

    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "run.json")
    >>> write_json_atomic(path, {"b": 1, "a": "é"}, sort_keys=True)
    >>> open(path, encoding="utf-8").read()
    '{\\n  "a": "é",\\n  "b": 1\\n}\\n'
    """
    text = json.dumps(value, indent=2, sort_keys=sort_keys, ensure_ascii=False) + "\n"
    write_bytes(path, text.encode("utf-8"))
