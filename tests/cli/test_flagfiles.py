"""Every shipped flagfile parses with its command's flags and names files that exist.

A renamed flag or a removed model version (the reviews config once pointed at a demo
model version that had been deleted) otherwise only shows when a user runs the file.
"""

from __future__ import annotations

import glob
import json
import pathlib
import subprocess
import sys

import pytest
from helpers.paths import REPO

FLAGFILES = sorted((REPO / "configs").glob("*.flags"))

# Flags whose values are inputs: files, folders or globs that must exist before the run.
INPUT_FLAGS = (
    "init_config",
    "tokenizer_dir",
    "checkpoint",
    "corpus",
    "train_files",
    "dev_files",
    "test_files",
)


def command_of(flagfile: pathlib.Path) -> str:
    name = flagfile.stem
    if name.startswith(("classify_", "finetune_", "tag_", "qa_")) or name.endswith("_finetune"):
        return "finetune"
    return "pretrain"


# Parses each file with the real absl flags of its command, in a fresh process (the
# commands define flags of the same name, so they cannot share one FlagValues).
_PARSE = """
import json, sys
from absl import flags
import importlib
importlib.import_module("albert_tf.cli." + sys.argv[1])
names = sys.argv[2].split(",")
out = {}
for path in sys.argv[3:]:
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["prog", "--flagfile=" + path])
    out[path] = {name: flags.FLAGS[name].value for name in names if name in flags.FLAGS}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def parsed() -> dict[str, dict]:
    values: dict[str, dict] = {}
    for command in ("pretrain", "finetune"):
        files = [str(f) for f in FLAGFILES if command_of(f) == command]
        proc = subprocess.run(
            [sys.executable, "-c", _PARSE, command, ",".join(INPUT_FLAGS), *files],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        values.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return values


def test_every_flagfile_is_covered():
    assert len(FLAGFILES) >= 10  # the glob did find the configs


@pytest.mark.parametrize("flagfile", FLAGFILES, ids=lambda p: p.name)
def test_flagfile_parses_and_its_inputs_exist(flagfile, parsed):
    values = parsed[str(flagfile)]
    missing = []
    for name, value in values.items():
        for item in [value] if isinstance(value, str) else value or []:
            # ../shared data and sample: corpora live outside the repository.
            if not item or item.startswith(("../", "sample:", "/", "gs://")):
                continue
            if item.startswith("runs/"):
                # Made by an earlier step, whose command the file's comments must give.
                run = "/".join(item.split("/")[:2])
                lines = flagfile.read_text().splitlines()
                comments = "\n".join(line for line in lines if line.startswith("#"))
                assert run in comments and "python -m albert_tf." in comments, item
                continue
            if not glob.glob(str(REPO / item)):
                missing.append(f"--{name}={item}")
    assert not missing, f"{flagfile.name} names files that do not exist: {missing}"
