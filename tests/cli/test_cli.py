"""The command-line layer: names that resolve, console scripts, one-line user errors."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from helpers.paths import REPO

from albert_tf.cli import COMMAND_MODULES, COMMANDS

CLI_DIR = REPO / "albert_tf" / "cli"


def _run(*args: str, executable: list[str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("ALBERT_TF_TRACEBACK", None)
    return subprocess.run(
        [*(executable or [sys.executable, "-m"]), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )


def test_every_command_is_a_module_with_run_and_main():
    # Helpers beside the commands: the runner, start-up, the shared hardware flags.
    helpers = {"__init__", "runner", "startup", "scale_flags"}
    files = {p.stem for p in CLI_DIR.glob("*.py")} - helpers
    assert files == set(COMMANDS)
    for name in COMMANDS:
        tree = ast.parse((CLI_DIR / f"{name}.py").read_text())
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert {"main", "run"} <= functions, name


def test_each_command_has_a_thin_python_m_module_that_imports_nothing_at_import():
    assert len(COMMAND_MODULES) == len(COMMANDS)
    for name in COMMANDS:
        spec = importlib.util.find_spec(f"albert_tf.{name}")
        assert spec is not None and spec.origin == str(REPO / "albert_tf" / f"{name}.py"), name
        # Imported (not run as __main__), it runs nothing: no command, no flags.
        tree = ast.parse(Path(spec.origin).read_text())
        assert [type(n).__name__ for n in tree.body] == ["Expr", "If"], name


def test_help_answers_without_importing_tensorflow():
    # --helpshort and --helpfull are parsed before the command imports the library:
    # Python's own import log (-X importtime) of the real command shows no TensorFlow.
    for flag in ("--helpshort", "--helpfull"):
        command = ["-X", "importtime", "-m", "albert_tf.pretrain", flag]
        result = _run(*command, executable=[sys.executable])
        # absl ends --helpshort with status 1; our --helpfull with 0.
        assert result.returncode == (0 if flag == "--helpfull" else 1), result.stderr[-2000:]
        assert "--model_dir" in result.stdout and "--strategy" in result.stdout, flag
        imported = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()]
        assert "absl" in imported  # the log is there
        assert not [m for m in imported if m.split(".")[0] in ("tensorflow", "keras")], flag
        if flag == "--helpfull":
            # Ours, not absl's or TensorFlow's internals.
            for internal in ("--test_srcdir", "--tt_check_filter", "--pdb_post_mortem"):
                assert internal not in result.stdout, internal
            assert "--flagfile" in result.stdout and "--verbosity" in result.stdout


def test_console_scripts_cover_every_command():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    expected = {
        f"albert-{name.replace('_', '-')}": f"albert_tf.cli.{name}:run" for name in COMMANDS
    }
    assert scripts == expected


def test_console_script_runs():
    script = Path(sys.executable).parent / "albert-params"
    if not script.exists():
        pytest.skip("the package is not pip-installed into this interpreter's environment")
    result = _run("--preset=albert_base_v2", executable=[str(script)])
    assert result.returncode == 0, result.stderr[-2000:]
    # ALBERT-base's published size (Hugging Face's albert-base-v2 reports 11,683,584).
    assert result.stdout.strip().splitlines()[-1] == "total_parameters: 11683584"


@pytest.mark.parametrize(
    ("args", "command", "needle"),
    [
        (["albert_tf.params", "--no_such_flag"], "params", "no_such_flag"),
        (["albert_tf.params", "stray"], "params", "unexpected arguments ['stray']"),
        (["albert_tf.params", "--preset=albert_base_v2", "--config=x.json"], "params", "not both"),
        (["albert_tf.export", "--checkpoint=/nonexistent"], "export", "--export_dir is required"),
        (
            ["albert_tf.cli.evaluate_pretraining", "--model=/nonexistent", "--eval_files=x"],
            "evaluate_pretraining",
            "no model directory at /nonexistent",
        ),
        (
            ["albert_tf.convert", "--source=hf", "--input=/nonexistent", "--output=/tmp/x"],
            "convert",
            "/nonexistent",
        ),
        (
            [
                "albert_tf.analyze_layers",
                "--model=/nonexistent",
                "--corpus=sample:en",
                "--output=/tmp/x",
            ],
            "analyze_layers",
            "no model directory at /nonexistent",
        ),
        (["albert_tf.build_corpus"], "build_corpus", "--manual_dir is required"),
        (["albert_tf.params", "--preset=nope"], "params", "Unknown preset 'nope'. Known presets"),
        (
            ["albert_tf.data_service", "--port=0"],
            "data_service",
            "exactly one of --dispatcher or --worker",
        ),
    ],
)
def test_user_errors_end_in_one_line_and_exit_code_2(args, command, needle):
    result = _run(*args)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{command}: error: ") and needle in last, last
