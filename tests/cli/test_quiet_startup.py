"""Commands start without TensorFlow's C++ start-up lines (albert_tf.cli.startup),
unless --verbosity or the user's TF_CPP_MIN_LOG_LEVEL asks for them; real errors,
tracebacks and exit statuses pass through unchanged."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from absl import flags
from helpers.paths import REPO

from albert_tf.cli import COMMAND_MODULES
from albert_tf.cli.startup import StderrFilter, command_name, requested_verbosity

# Any absl C++ log line ("I0000 00:00:1795494502.909365   26296 port.cc:153] ..."),
# written independently of the launcher's own pattern.
CPP_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\]", re.MULTILINE)
NOISE = ["absl::InitializeLog", "oneDNN", "cudart_stub", "cpu_feature_guard", "cuInit"]
PARAMS = ["--preset=albert_base_v2"]
MISSING = (
    "No ALBERT config at '/nonexistent.json'. Pass the albert_config.json that came with "
    "the checkpoint (or a Hugging Face config.json)."
)
TOTAL = "total_parameters: 11683584"  # ALBERT-base (Hugging Face's albert-base-v2 count)


def _env(**extra: str) -> dict[str, str]:
    """A user's environment: none of the test suite's TensorFlow settings."""
    env = dict(os.environ)
    for name in ("TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MAX_VLOG_LEVEL", "CUDA_VISIBLE_DEVICES"):
        env.pop(name, None)
    env.pop("ALBERT_TF_TRACEBACK", None)
    env.pop("ALBERT_TF_STDERR_FILTERED", None)
    return env | extra


def _run(command: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=_env(**env), cwd=REPO
    )


def _module(name: str, *args: str) -> list[str]:
    return [sys.executable, "-m", name, *args]


def _script(name: str) -> Path:
    script = Path(sys.executable).parent / name
    if not script.exists():
        pytest.skip("the package is not pip-installed into this interpreter's environment")
    return script


def _no_nvidia_device() -> bool:
    return not any(Path("/dev").glob("nvidia[0-9]*")) and not Path("/dev/dxg").exists()


@pytest.mark.parametrize("how", ["module", "cli_module", "console_script"])
def test_commands_print_no_tensorflow_cpp_lines(how):
    command = {
        "module": lambda: _module("albert_tf.params", *PARAMS),
        "cli_module": lambda: _module("albert_tf.cli.params", *PARAMS),
        "console_script": lambda: [str(_script("albert-params")), *PARAMS],
    }[how]()
    result = _run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == TOTAL
    assert not CPP_LINE.search(result.stderr), result.stderr[-3000:]
    assert not [word for word in NOISE if word in result.stderr], result.stderr[-3000:]


@pytest.mark.parametrize(
    ("flags", "env"),
    [(["--verbosity=1"], {}), (["-v", "1"], {}), ([], {"TF_CPP_MIN_LOG_LEVEL": "0"})],
    ids=["verbosity", "v", "user_level_0"],
)
def test_verbosity_or_the_users_level_brings_the_lines_back(flags, env):
    result = _run(_module("albert_tf.params", *PARAMS, *flags), **env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == TOTAL
    assert CPP_LINE.search(result.stderr), result.stderr[-3000:]
    assert "absl::InitializeLog" in result.stderr
    if _no_nvidia_device():  # what a CPU machine prints when TensorFlow looks for a GPU
        assert "failed call to cuInit" in result.stderr


def test_verbosity_in_a_flagfile_brings_the_lines_back(tmp_path):
    flagfile = tmp_path / "verbose.flags"
    flagfile.write_text("# a comment, as configs/ have\n--verbosity=1\n")
    result = _run(_module("albert_tf.params", *PARAMS, f"--flagfile={flagfile}"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert CPP_LINE.search(result.stderr), result.stderr[-3000:]


def test_requested_verbosity_reads_flagfiles_as_absl_does(tmp_path):
    inner = tmp_path / "inner.flags"
    inner.write_text("--verbosity=2\n")
    outer = tmp_path / "outer.flags"
    outer.write_text(f"// absl's other comment\n--flagfile={inner}\n--preset=x\n")
    cases = [
        [f"--flagfile={outer}"],
        [f"--flagfile={outer}", "--verbosity=0"],
        ["--verbosity=1", f"--flagfile={outer}"],
        [f"--flagfile={inner}", "-v", "3"],
    ]
    for args in cases:
        absl = flags.FlagValues()  # absl's own parser is the reference
        flags.DEFINE_integer("verbosity", -9, "", short_name="v", flag_values=absl)
        flags.DEFINE_string("preset", None, "", flag_values=absl)
        absl(["prog", *args])
        assert requested_verbosity(args) == absl.verbosity, args


def test_a_user_error_is_its_one_line():
    result = _run(_module("albert_tf.params", *PARAMS, "--config=x.json"))
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["params: error: Pass --preset or --config, not both."]


def test_errors_and_tracebacks_pass_unchanged():
    result = _run([str(_script("albert-params")), "--config=/nonexistent.json"])
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"params: error: {MISSING}"]
    result = _run(
        _module("albert_tf.params", "--config=/nonexistent.json"), ALBERT_TF_TRACEBACK="1"
    )
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):", result.stderr[-3000:]
    assert lines[-1] == f"FileNotFoundError: {MISSING}"
    assert not CPP_LINE.search(result.stderr)


def _gone(pid: str) -> bool:
    try:  # a zombie is dead, only not yet reaped by its new parent
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_killing_the_launcher_kills_the_command():
    # A run killed with SIGKILL is resumed by a new one (tests/training/pretraining): the filtered
    # child must not outlive its launcher and keep writing.
    process = subprocess.Popen(
        _module("albert_tf.data_service", "--dispatcher", "--port=0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=REPO,
    )
    try:
        assert "dispatcher at grpc://" in process.stdout.readline()
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        assert len(children) == 1  # the command itself, under its launcher
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        deadline = time.time() + 10
        while not _gone(children[0]) and time.time() < deadline:
            time.sleep(0.05)
        assert _gone(children[0]), "the command outlived its launcher"
    finally:
        process.kill()
        process.wait()
    assert process.returncode == -signal.SIGKILL


# -- the filter on its own --------------------------------------------------------

STREAM = [  # (line, kept at level 2, kept at level 1), without an NVIDIA device
    (
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
        False,
        False,
    ),
    (
        "I0000 00:00:1795494502.909365   26296 port.cc:153] oneDNN custom operations are on.\n",
        False,
        False,
    ),
    (
        "I0000 00:00:1795494503.036942   26296 cpu_feature_guard.cc:227] This TensorFlow "
        "binary is optimized\n",
        False,
        False,
    ),
    (
        "To enable the following instructions: AVX2 FMA, in other operations, rebuild\n",
        False,
        False,
    ),
    ("W0000 00:00:1795494503.1   26296 x.cc:1] a warning\n", False, True),
    (
        "E0000 00:00:1795494510.004339   26296 cuda_platform.cc:52] failed call to cuInit: "
        "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n",
        False,
        False,
    ),
    (
        "E0000 00:00:1795543666.213389   13687 util.cc:131] oneDNN supports DT_INT64 only on "
        "platforms with AVX-512. Falling back to the default Eigen-based implementation if "
        "present.\n",
        False,
        False,
    ),
    ("E0000 00:00:1795494510.1   26296 x.cc:2] a real error\n", True, True),
    ("To enable the following instructions: kept, its log line was kept\n", True, True),
    ("Traceback (most recent call last):\n", True, True),
    ('  File "x.py", line 1, in <module>\n', True, True),
    ("ValueError: I0000 is not a log line here\n", True, True),
    ("F0000 00:00:1795494510.2   26296 x.cc:3] Check failed: fatal\n", True, True),
    ("params: error: Pass --preset or --config, not both.\n", True, True),
    ("错误：没有这个文件 😀\n", True, True),
    ("Epoch 1/3 50%|#####     | no newline yet", True, True),
]


@pytest.mark.parametrize("level", [2, 1])
def test_filter_drops_only_tensorflow_noise_in_any_chunking(level):
    data = "".join(line for line, *_ in STREAM).encode()
    column = 1 if level == 2 else 2
    expected = "".join(line for line, *kept in STREAM if kept[column - 1]).encode()
    rng = random.Random(level)
    for _ in range(50):  # cut anywhere, even inside a line or a UTF-8 character
        cuts = sorted(rng.sample(range(1, len(data)), rng.randint(0, 30)))
        chunks = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        stream = StderrFilter(level, cuinit_is_info=True)
        out = b"".join(stream.feed(chunk) for chunk in chunks) + stream.close()
        assert out == expected


def test_filter_keeps_cuinit_where_there_is_an_nvidia_device():
    line = b"E0000 00:00:1.5   1 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR\n"
    assert StderrFilter(2, cuinit_is_info=False).feed(line) == line


def test_filter_does_not_hold_back_a_progress_bar():
    stream = StderrFilter(2, cuinit_is_info=True)
    assert stream.feed(b"\r 10%|#") == b"\r 10%|#"  # written before its newline
    assert stream.feed(b"#\r 20%|##\n") == b"#\r 20%|##\n"


def test_every_python_m_name_of_a_command_is_recognised():
    for module, source in COMMAND_MODULES.items():
        for name in (module, source):
            assert command_name(["python", "-X", "utf8", "-m", name, "--x"]) == name
            assert command_name(["python", f"-m{name}"]) == name
    assert command_name(["python", "-m", "albert_tf.cli.runner"]) is None
    assert command_name(["python", "/x/pytest", "-q"]) is None
    assert command_name(["python", "-c", "import albert_tf"]) is None
    assert command_name(["python", "-W", "ignore", "/venv/bin/albert-params"]) == "albert-params"
