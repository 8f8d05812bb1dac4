"""A quiet start-up for every command: TensorFlow's C++ start-up lines are hidden.

Importing TensorFlow prints, on a CPU machine::

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:... port.cc:153] oneDNN custom operations are on. ...
    I0000 00:00:... cudart_stub.cc:31] Could not find cuda drivers on your machine, ...
    I0000 00:00:... cpu_feature_guard.cc:227] This TensorFlow binary is optimized ...
    E0000 00:00:... cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: ...

None of them is a problem. ``TF_CPP_MIN_LOG_LEVEL`` hides the last two (the cuInit
error only at 3, which hides every C++ error), but the first three are written by absl
before TensorFlow applies it (twice: by ``_pywrap_tensorflow_internal`` and by the
profiler plugin, each with its own absl), and no environment variable reaches them
(TensorFlow 2.21 on Linux). So `quiet_start_up`, which every command calls first
(`albert_tf.cli.runner.run`, before its flags are parsed and before anything imports
TensorFlow), does this for a command (``python -m albert_tf.<command>``,
``python -m albert_tf.cli.<command>``, ``albert-<command>``):

* ``TF_CPP_MIN_LOG_LEVEL=2`` (hide C++ info and warnings) unless the user set it;
* the command runs again as a child process whose stderr passes through `StderrFilter`:
  C++ log lines below that level (the early ones), absl's banner above and, on a
  machine with no NVIDIA device, the cuInit failure (there it only means "no GPU": it
  counts as information) are dropped, and so is oneDNN's note that it leaves int64 ops
  to Eigen, logged as an error on every CPU; everything else, Python tracebacks and the
  commands' one-line errors included, passes unchanged. The parent forwards signals
  and exits as the child did; the child dies with the parent.

``--verbosity=1`` (absl's flag, also ``-v 1``) or more, on the command line or in a
``--flagfile``, turns all of this off, and ``--verbosity=N`` with N >= 2 also sets
``TF_CPP_MAX_VLOG_LEVEL=N-1`` (absl's meaning of N) unless it is set.
``TF_CPP_MIN_LOG_LEVEL=0`` shows everything too. Library use (``import albert_tf`` in a
program, a notebook, the tests) is never touched.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence

from albert_tf.cli import COMMAND_MODULES
from albert_tf.hardware import nvidia_device_present

# Set in the child's environment: it (and whatever it starts) must not re-run itself.
FILTERED_ENV = "ALBERT_TF_STDERR_FILTERED"
DEFAULT_MIN_LOG_LEVEL = 2  # TensorFlow's C++ INFO and WARNING hidden, ERROR shown
VERBOSE_FROM = 1  # --verbosity at which TensorFlow's logs come back

# absl's C++ log prefix: severity, MMDD hh:mm:ss.micros, thread id, file:line]
_CPP_LOG = re.compile(rb"([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\s\]]+:\d+\] ")
# What may still become such a prefix (held back until its line is complete).
_CPP_LOG_START = re.compile(
    rb"[IWEF]\d{0,4}( (\d{0,2}(:\d{0,2}(:\d*(\.\d*( +\d*( [^\s\]:]*(:\d*\]?)?)?)?)?)?)?)?)?"
)
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}
_BANNER = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_CUINIT = b"failed call to cuInit"
_CONTINUATION = b"To enable the following instructions:"  # cpu_feature_guard's second line
# Logged as errors, but information: oneDNN leaves int64 ops to Eigen, and (TF 2.21) says
# so at ERROR on every CPU, AVX-512 ones included.
_INFO_LOGGED_AS_ERROR = (b"oneDNN supports DT_INT64 only on platforms with AVX-512",)


class StderrFilter:
    """Drops TensorFlow's C++ log lines below ``min_level`` from a byte stream.

    Args:
        min_level: as ``TF_CPP_MIN_LOG_LEVEL``: 0 info, 1 warning, 2 error, 3 fatal.
        cuinit_is_info: count the "failed call to cuInit" error as information (no
            NVIDIA device here, so it only says there is no GPU).

    >>> f = StderrFilter(2, cuinit_is_info=True)
    >>> f.feed(b"I0000 00:00:17.5 26296 port.cc:153] oneDNN on\\nTraceback (most")
    b'Traceback (most'
    >>> f.feed(b" recent call last):\\nE0000 00:00:17.9 26296 x.cc:5] real\\n") + f.close()
    b' recent call last):\\nE0000 00:00:17.9 26296 x.cc:5] real\\n'
    """

    def __init__(self, min_level: int, cuinit_is_info: bool):
        self.min_level = min_level
        self.cuinit_is_info = cuinit_is_info
        self._held = b""  # the start of a line that may still turn out to be a log line
        self._passing = False  # part of the current line was written: write the rest
        self._dropped = False  # the previous line was dropped

    def _keep(self, line: bytes) -> bool:
        if line.rstrip(b"\r\n") == _BANNER:
            return False
        match = _CPP_LOG.match(line)
        if match is None:
            return not (self._dropped and line.startswith(_CONTINUATION))
        severity = _SEVERITY[match.group(1)]
        if severity == 2 and (
            any(text in line for text in _INFO_LOGGED_AS_ERROR)
            or (self.cuinit_is_info and _CUINIT in line)
        ):
            severity = 0  # information logged as an error
        return severity >= self.min_level

    def feed(self, data: bytes) -> bytes:
        """The part of ``data`` to write now (an incomplete line may be held back)."""
        out = []
        data = self._held + data
        self._held = b""
        while data:
            end = data.find(b"\n") + 1
            if self._passing:  # the rest of a line already being written
                if not end:
                    out.append(data)
                    break
                out.append(data[:end])
                data, self._passing = data[end:], False
                continue
            if not end:
                if (
                    _CPP_LOG.match(data)
                    or _CPP_LOG_START.fullmatch(data)
                    or _BANNER.startswith(data)
                    or (self._dropped and _CONTINUATION.startswith(data[: len(_CONTINUATION)]))
                ):
                    self._held = data
                else:  # a progress bar or a prompt: no reason to wait for its newline
                    out.append(data)
                    self._passing, self._dropped = True, False
                break
            line, data = data[:end], data[end:]
            keep = self._keep(line)
            if keep:
                out.append(line)
            self._dropped = not keep
        return b"".join(out)

    def close(self) -> bytes:
        """What is left at the end of the stream."""
        held, self._held = self._held, b""
        return held if held and self._keep(held) else b""


def _expand_flagfiles(args: Sequence[str]) -> list[str]:
    """``args`` with each ``--flagfile`` replaced by its flags, by absl's own reader
    (nesting, comments, ``--flagfile F``). If a file cannot be read, ``args`` as given:
    absl reports the file when the command parses its flags."""
    if not any("flagfile" in arg for arg in args):
        return list(args)  # the usual case: absl is not even imported here
    from absl import flags

    try:
        return flags.FlagValues().read_flags_from_files(args, force_gnu=True)
    except flags.Error:
        return list(args)


def requested_verbosity(args: Sequence[str]) -> int | None:
    """absl's ``--verbosity`` / ``-v`` as given on the command line or in a
    ``--flagfile`` (the last one, as absl takes it).

    >>> requested_verbosity(["--preset=x", "--verbosity=1"]), requested_verbosity(["-v", "2"])
    (1, 2)
    >>> requested_verbosity(["--flagfile=/no/such/file"]) is None
    True
    """
    args = _expand_flagfiles(args)
    found = None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        name, equals, value = arg.lstrip("-").partition("=")
        if not arg.startswith("-") or name not in ("verbosity", "v"):
            continue
        if not equals:
            value = args[i + 1] if i + 1 < len(args) else ""
        if value.removeprefix("-").isdigit():  # anything else absl reports when parsing
            found = int(value)
    return found


def command_name(orig_argv: Sequence[str]) -> str | None:
    """The command this process was started as, or None (a program, a notebook or a
    test that calls a command's ``run()`` in-process: never re-run).

    ``orig_argv`` is ``sys.orig_argv``: the interpreter's own command line.

    >>> command_name(["python", "-X", "utf8", "-m", "albert_tf.params", "--preset=x"])
    'albert_tf.params'
    >>> command_name(["python", "/venv/bin/albert-params"])
    'albert-params'
    >>> command_name(["python", "-m", "pytest"]) is None
    True
    """
    args = list(orig_argv[1:])
    while args:
        arg = args.pop(0)
        if arg.startswith("-m"):
            module = arg[2:] or (args[0] if args else "")
            known = module in COMMAND_MODULES or module in COMMAND_MODULES.values()
            return module if known else None
        if arg in ("-X", "-W"):  # the interpreter's options that take a value
            args = args[1:]
        elif not arg.startswith("-"):  # a script: the interpreter's options end here
            name = os.path.basename(arg)
            return name if name.startswith("albert-") else None
    return None


def quiet_start_up() -> None:
    """For a command: quiet TensorFlow's start-up (see the module docstring).

    Returns at once for library use, in the filtered child, and when ``--verbosity``
    or ``TF_CPP_MIN_LOG_LEVEL=0`` asks for TensorFlow's logs; otherwise runs the
    command in a filtered child and exits with its status.
    """
    if os.environ.get(FILTERED_ENV) or command_name(sys.orig_argv) is None:
        return
    verbosity = requested_verbosity(sys.argv[1:])
    if verbosity is not None and verbosity >= VERBOSE_FROM:
        if verbosity > VERBOSE_FROM:
            os.environ.setdefault("TF_CPP_MAX_VLOG_LEVEL", str(verbosity - 1))
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", str(DEFAULT_MIN_LOG_LEVEL))
    try:
        level = int(os.environ["TF_CPP_MIN_LOG_LEVEL"])
    except ValueError:
        level = 0  # TensorFlow ignores a value it cannot read: so do we
    if level <= 0 or os.name != "posix":
        return
    sys.exit(_run_filtered(level, cuinit_is_info=not nvidia_device_present()))


def _run_filtered(level: int, cuinit_is_info: bool) -> int:
    """Runs this command again with its stderr filtered; returns its exit status."""
    import ctypes

    parent = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: the forked child only calls it

    def die_with_parent() -> None:
        # A launcher killed with SIGKILL takes the command with it, as if there were
        # one process (tests kill a run and resume it; no orphan may keep writing).
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl
            os.kill(os.getpid(), signal.SIGKILL)

    env = {**os.environ, FILTERED_ENV: "1"}
    try:  # the child's stderr is a pipe: progress bars (tqdm) size themselves from these
        columns, lines = os.get_terminal_size(2)
        env.setdefault("COLUMNS", str(columns))
        env.setdefault("LINES", str(lines))
    except OSError:
        pass
    child = subprocess.Popen(
        [sys.executable, *sys.orig_argv[1:]],
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
    )

    def forward(signum: int, frame: object) -> None:
        child.send_signal(signum)

    for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"):
        signal.signal(getattr(signal, name), forward)
    # Ctrl-C in a terminal reaches the whole foreground process group, the child
    # included: forwarding it too would interrupt the child's clean-up. Anyone else's
    # SIGINT (kill -INT, an IDE's stop button, no terminal) is forwarded.
    signal.signal(signal.SIGINT, signal.SIG_IGN if _in_terminal_foreground() else forward)

    stream = StderrFilter(level, cuinit_is_info)
    source = child.stderr.fileno()
    while data := os.read(source, 1 << 16):
        _write_all(stream.feed(data))
    _write_all(stream.close())
    status = child.wait()
    if status < 0:  # killed by a signal: die the same way, so the caller sees it
        if -status not in (signal.SIGKILL, signal.SIGSTOP):  # these take no handler
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status
    return status


def _in_terminal_foreground() -> bool:
    for fd in (0, 1, 2):
        try:
            return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


def _write_all(data: bytes) -> None:
    while data:
        try:
            data = data[os.write(2, data) :]
        except OSError:  # stderr closed: keep draining the child, drop its output
            return
