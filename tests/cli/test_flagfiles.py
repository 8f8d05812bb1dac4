"""Every shipped flagfile parses with its command's flags and names files that exist.

A renamed flag or a removed model version (the reviews config once pointed at a demo
model version that had been deleted) otherwise only shows when a user runs the file.
Data is named relative to ``--data_dir`` (no folder of one machine in a recipe): the
recipes on the shared data folder are checked against ``../shared/data`` where it is
there, and the public-dataset recipes give the commands that make their start and data.
"""

from __future__ import annotations

import glob
import json
import pathlib
import re
import subprocess
import sys

import pytest
from helpers.paths import REPO, SHARED_DATA

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
# Inputs named relative to --data_dir, not to the repository.
DATA_FLAGS = ("corpus", "train_files", "dev_files", "test_files")
# How a recipe on the shared data folder says so in its comments.
SHARED_DATA_DIR = "--data_dir=PATH/TO/shared/data"


def command_of(flagfile: pathlib.Path) -> str:
    """The command the file's comments run it with, else the one its name says."""
    run = re.search(
        rf"python -m albert_tf\.(pretrain|finetune) --flagfile=configs/{re.escape(flagfile.name)}",
        flagfile.read_text(),
    )
    if run:
        return run.group(1)
    name = flagfile.stem
    if name.startswith(("classify_", "finetune_", "tag_", "qa_")) or name.endswith("_finetune"):
        return "finetune"
    return "pretrain"


def comments_of(flagfile: pathlib.Path) -> str:
    return "\n".join(line for line in flagfile.read_text().splitlines() if line.startswith("#"))


def items_of(value) -> list[str]:
    items = [value] if isinstance(value, str) else list(value or [])
    return [part for item in items for part in item.split(",") if part]


def is_data_name(item: str) -> bool:
    """A dataset named by prefix or URL (``sample:en``, ``tfds:squad``, ``gs://``)."""
    return ":" in item.split("/", 1)[0]


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


def made_by_its_comments(flagfile: pathlib.Path, item: str) -> bool:
    """Whether the file's comments give the command that makes ``item`` (a run of an
    earlier step, or a converted start: ``python -m albert_tf.convert ... --output=ITEM``)."""
    comments = comments_of(flagfile)
    if "python -m albert_tf." not in comments:
        return False
    if item.startswith("runs/"):
        return "/".join(item.split("/")[:2]) in comments
    return re.search(rf"--output(_dir)?={re.escape(item)}(\s|$)", comments) is not None


@pytest.mark.parametrize("flagfile", FLAGFILES, ids=lambda p: p.name)
def test_flagfile_parses_and_its_inputs_exist(flagfile, parsed):
    values = parsed[str(flagfile)]
    missing = []
    for name, value in values.items():
        for item in items_of(value):
            if name in DATA_FLAGS or is_data_name(item) or item.startswith("gs://"):
                continue  # data: test_recipe_data_is_in_the_shared_folder
            if item.startswith(("/", "~", "../")):
                missing.append(f"--{name}={item} (a path outside the repository)")
            elif not glob.glob(str(REPO / item)) and not made_by_its_comments(flagfile, item):
                missing.append(f"--{name}={item}")
    assert not missing, f"{flagfile.name} names files that do not exist: {missing}"


@pytest.mark.parametrize("flagfile", FLAGFILES, ids=lambda p: p.name)
def test_recipe_data_is_relative_to_data_dir(flagfile, parsed):
    """Data flags name public datasets or paths relative to --data_dir, whose value the
    comments give: the shared data folder, or a folder the comments' commands fill."""
    relative = [
        item
        for name in DATA_FLAGS
        for item in items_of(parsed[str(flagfile)].get(name))
        if not is_data_name(item)
    ]
    assert not [i for i in relative if i.startswith(("/", "~", "../"))], relative
    if not relative:
        return
    comments = comments_of(flagfile)
    assert "--data_dir=PATH/TO/" in comments, f"{flagfile.name}: say which --data_dir to give"
    if SHARED_DATA_DIR not in comments:  # a public dataset saved by the command it gives
        for item in relative:
            assert item.split("/")[0] in comments and "save_to_disk" in comments, item


@pytest.mark.parametrize(
    "flagfile",
    [f for f in FLAGFILES if SHARED_DATA_DIR in comments_of(f)],
    ids=lambda p: p.name,
)
def test_recipe_data_is_in_the_shared_folder(flagfile, parsed):
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is not here (the shared data folder, docs/data.md)")
    missing = [
        f"--{name}={item}"
        for name in DATA_FLAGS
        for item in items_of(parsed[str(flagfile)].get(name))
        if not is_data_name(item) and not glob.glob(str(SHARED_DATA / item))
    ]
    assert not missing, f"{flagfile.name}: not in {SHARED_DATA}: {missing}"


def test_the_public_recipes_are_there():
    """SQuAD v1.1 and v2.0, SST-2 and CoNLL-2003 from albert-base-v2 by their TFDS names,
    CMRC 2018 from albert_chinese_base; each says what is published for its start."""
    texts = {f.name: f.read_text() for f in FLAGFILES}
    for name, data, start in (
        ("squad_v1_albert_base.flags", "tfds:squad/v1.1", "albert_base_v2"),
        ("squad_v2_albert_base.flags", "tfds:squad/v2.0", "albert_base_v2"),
        ("sst2_albert_base.flags", "tfds:glue/sst2", "albert_base_v2"),
        ("conll2003_albert_base.flags", "tfds:conll2003", "albert_base_v2"),
        ("cmrc2018_albert_chinese_base.flags", "cmrc2018/", "albert_chinese_base"),
    ):
        text = texts[name]
        assert f"--train_files={data}" in text and f"--checkpoint=models/{start}" in text
        prose = " ".join(
            line.lstrip("# ") for line in comments_of(REPO / "configs" / name).split("\n")
        )
        assert "ALBERT paper" in prose and "python -m albert_tf.convert --source=hf" in prose
