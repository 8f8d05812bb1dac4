"""No path of one machine in what the repository ships: docs, docstrings, configs,
tests, the app, and the metadata and graphs of shipped models.

The rule, on the tracked files of README.md, docs/, albert_tf/, configs/, apps/, tests/
and models/ (text files whole; of ``saved_model.pb`` and ``*.model`` files, their
printable strings):

* an absolute path under one of the roots in ``_ROOTS`` (work, home, root, Users) is
  never allowed: it names a folder of the machine that wrote it (a checkout, a run, a user);
* an absolute path under ``/tmp/`` is allowed only where the example makes that folder
  itself: in tests/ (scratch folders and placeholders of tests) and on the doctest lines
  (``>>>`` / ``...``) of Python files; anywhere else (docs, configs, a recorded run, a
  model's metadata) it is the scratch folder of the machine that made it;
* a path starts a token (or follows ``_``, as in a graph's ``hash_table_`` names):
  ``runs/tmp/x``, ``gs://bucket/home/x`` and the Windows path in
  ``file:///C:/Users/...`` (sample text) are not one.

Relative paths (``runs/...``, ``models/...``) or placeholders (``PATH/TO/...``) say the same
without the machine.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from helpers.paths import REPO

#: What the repository ships, as paths from its root.
SCANNED = ("README.md", "docs", "albert_tf", "configs", "apps", "tests", "models")
#: Binary files whose strings are scanned (graphs, SentencePiece models with their trainer
#: spec); other binary files (weights) are skipped.
STRING_FILES = ("saved_model.pb", ".model")
# Built from parts, so this file does not hold the paths it looks for.
_ROOTS = "|".join(["work", "home", "root", "Users"])
_TMP = "t" + "mp"
#: An absolute path under a root: at the start of a token (not after a letter, digit,
#: ``. ~ -`` or ``:``, so relative paths, bucket paths and ``C:/Users`` do not count; after
#: ``_`` it does: a graph's ``hash_table_`` name followed by a root names a machine's file).
MACHINE_PATH = re.compile(rf"(?<![A-Za-z0-9.~:-])/(?:{_ROOTS})/")
TMP_PATH = re.compile(rf"(?<![A-Za-z0-9.~:-])/{_TMP}/")
DOCTEST_LINE = re.compile(r"^\s*(>>>|\.\.\.)(\s|$)")


def machine_paths(text: str, path: str) -> list[str]:
    """The lines of ``text`` (the file at ``path``, from the repository's root) that name a
    path of one machine, by the rule of this module's docstring."""
    tmp_allowed_file = path.startswith("tests/")
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        bad = MACHINE_PATH.search(line)
        if not bad and not tmp_allowed_file and TMP_PATH.search(line):
            bad = not (path.endswith(".py") and DOCTEST_LINE.match(line))
        if bad:
            found.append(f"{path}:{number}: {line.strip()[:160]}")
    return found


def strings_of(data: bytes, shortest: int = 6) -> str:
    """The printable ASCII runs of a binary file, one a line (as ``strings`` prints them)."""
    return "\n".join(m.decode("ascii") for m in re.findall(rb"[\x20-\x7e]{%d,}" % shortest, data))


def shipped_files() -> list[str]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--", *SCANNED],
            cwd=REPO,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout.decode()
        files = [f for f in listed.split("\0") if f]
    except (OSError, subprocess.SubprocessError):  # not a git checkout: what is on disk
        files = []
        for top in SCANNED:
            if (REPO / top).is_file():  # README.md
                files.append(top)
            for root, dirs, names in os.walk(REPO / top):
                dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
                files += [os.path.relpath(os.path.join(root, n), REPO) for n in names]
    return sorted(f for f in files if (REPO / f).is_file())


def file_text(path: str) -> str | None:
    """The text to scan in a shipped file, or None for a binary file that is not scanned."""
    data = (REPO / path).read_bytes()
    if path.endswith(STRING_FILES):
        return strings_of(data)
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")


FILES = shipped_files()


def test_the_scan_sees_the_repository():
    assert "README.md" in FILES and any(f.startswith("albert_tf/") for f in FILES)
    assert any(f.endswith("saved_model.pb") for f in FILES)


@pytest.mark.parametrize("top", SCANNED)
def test_no_machine_paths(top):
    found = []
    for path in FILES:
        if path == top or path.startswith(top + "/"):
            text = file_text(path)
            if text is not None:
                found += machine_paths(text, path)
    assert not found, "paths of one machine (use relative paths or PATH/TO/...):\n" + "\n".join(
        found
    )


def test_the_rule():
    root, tmp = "/" + "work" + "/", "/" + _TMP + "/"
    bad = [
        f"see {root}shared/data/x.jsonl",
        f'"run_dir": "{root}runs_demo/en"',
        f"--checkpoint={'/' + 'home'}/alice/model",
        f"file://{root}x",
        f"shared_name hash_table_{root}runs/zh/best/tokenizer/vocab.txt",
        f"--workdir={tmp}srv5",
    ]
    good = [
        "--data_dir=PATH/TO/shared/data",
        "runs/tmp/x and gs://bucket/home/x",
        "file:///C:/Users/alice/Documents",
        f"    >>> tok = train(lines, '{tmp}spm')  # doctest: +SKIP",
    ]
    for line in bad:
        assert machine_paths(line, "docs/x.md"), line
    for line in good:
        assert not machine_paths(line, "albert_tf/x.py"), line
    # /tmp/ is a scratch folder in tests and doctests, a machine's folder anywhere else
    assert not machine_paths(f"out = '{tmp}x'", "tests/test_x.py")
    assert machine_paths(f"out = '{tmp}x'", "albert_tf/x.py")
    assert machine_paths(f"{root}x", "tests/test_x.py")
    assert machine_paths("\n".join(strings_of(f"\x00\x01{root}x.model\x00".encode()).split()), "m")
