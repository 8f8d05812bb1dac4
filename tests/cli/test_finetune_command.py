"""The finetune command: its flags are FineTuningOptions and each task's settings, with
the same defaults and without TensorFlow; each task's flags are listed under its
settings module; a bad combination ends in one line and exit code 2."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

from helpers.paths import REPO

from albert_tf.tasks import TASKS
from albert_tf.tasks.settings import settings_class

# In a fresh process: the command's flags live in absl's global FlagValues.
_DEFAULTS = """
import sys
from absl import flags
from albert_tf.cli import finetune
from albert_tf.tasks import TASKS
from albert_tf.tasks.settings import settings_class
from albert_tf.training.finetuning.options import FineTuningOptions

for name, spec in TASKS.items():  # each task, its own settings at their defaults
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["prog", "--output_dir=o",
                 "--train_files=a,b", "--init_config=c", "--task=" + name])
    options = finetune._options()
    want = FineTuningOptions("o", ["a", "b"], task=name, init_config="c")
    assert options == want, (options, want)
    assert options.settings == settings_class(spec)(), options.settings
# The settings modules (loaded by name, which -X importtime does not log) need no TensorFlow.
assert "albert_tf.tasks.span_qa.settings" in sys.modules
assert not [m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras")]
print("same")
"""


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("ALBERT_TF_TRACEBACK", None)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=600, env=env, cwd=REPO
    )


def test_unset_flags_are_the_options_defaults():
    result = _run("-c", _DEFAULTS)
    assert result.returncode == 0 and result.stdout.split() == ["same"], result.stderr[-3000:]


def test_each_task_declares_its_own_flags_and_the_command_names_none():
    helpfull = _run("-m", "albert_tf.finetune", "--helpfull")
    assert helpfull.returncode == 0, helpfull.stderr[-2000:]
    sections = dict(re.findall(r"(?m)^(\S+):\n((?:  .*\n?)+)", helpfull.stdout))
    source = (REPO / "albert_tf" / "cli" / "finetune.py").read_text()
    for spec in TASKS.values():
        cls = settings_class(spec)
        names = [field.name for field in dataclasses.fields(cls)]
        assert names, spec.name
        for name in names:
            # absl lists a boolean flag with a default as --[no]name.
            assert re.search(rf"--(\[no\])?{name}\b", sections[cls.__module__]), (
                spec.name,
                name,
            )
            assert not re.search(rf"\b{name}\b", source), name
    # --helpshort, where error messages point, still lists them.
    helpshort = _run("-m", "albert_tf.finetune", "--helpshort")
    assert "--doc_stride" in helpshort.stdout and "--tagger_crf" in helpshort.stdout


def test_options_no_run_can_use_end_in_one_line():
    result = _run(
        "-m",
        "albert_tf.finetune",
        "--checkpoint=models/none",
        "--init_config=none.json",
        "--train_files=sample:en",
        "--output_dir=/tmp/unused",
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last == "finetune: error: give exactly one of --checkpoint and --init_config", last
