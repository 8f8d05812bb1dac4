"""What every command shares: flag parsing, the argv check and error exits.

A user's mistake (a missing or bad flag, a file that is not there, a config that
cannot describe a model, data the library rejects) ends the command with one line
on stderr, ``<command>: error: <what and how to fix it>``, and exit code 2. Anything
else is a bug and keeps its traceback. ``ALBERT_TF_TRACEBACK=1`` shows the traceback
of user errors too, for reporting one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from absl import app, flags

from albert_tf.cli.startup import VERBOSE_FROM, quiet_start_up
from albert_tf.config import ConfigError

USER_ERROR_EXIT_CODE = 2


class UserError(Exception):
    """A problem with the command line or its inputs that the user can fix."""


# Exceptions the library raises for bad input. ValueError covers rejected data and
# settings (ConfigError is one); OSError covers missing, unreadable or unwritable paths.
USER_ERRORS: tuple[type[BaseException], ...] = (
    UserError,
    app.UsageError,
    ConfigError,
    ValueError,
    OSError,
)


def fail(command: str, message: str) -> None:
    """Ends the process with the one-line error of a user's mistake."""
    print(f"{command}: error: {message}", file=sys.stderr)
    sys.exit(USER_ERROR_EXIT_CODE)


def full_help(command_module: str = "__main__") -> str:
    """``--helpfull``: every flag of the command (its own and the shared ones it
    adopts), and the few of absl's that matter, not the internals that absl and
    the libraries register."""
    by_module = flags.FLAGS.flags_by_module_dict()
    ours = [m for m in by_module if m == sys.argv[0] or m.startswith("albert_tf")]
    first = sys.argv[0] if command_module == "__main__" else command_module
    parts = []
    for module in sorted(ours, key=lambda m: m != first):
        text = flags.FLAGS.module_help(module)
        if module == sys.argv[0]:  # the command run as __main__: named by its file
            text = text.replace(f"{module}:", f"{os.path.basename(module)}:", 1)
        parts.append(text)
    parts.append(
        "Also:\n"
        "  --flagfile: read flags from a file, one per line (may be repeated).\n"
        f"  --verbosity (-v): {VERBOSE_FROM} or more shows TensorFlow's own log lines.\n"
        "  --helpshort: this command's flags only."
    )
    return "\n\n".join(p.strip("\n") for p in parts if p.strip())


def quiet_python_logs() -> None:
    """TensorFlow's Python INFO lines (``Start watcher for local signal``, the saver's
    ``Sharding callback duration``) are its internals: shown from ``--verbosity=1``."""
    import logging

    # absl turns an unset --verbosity into 0 (INFO) after parsing, which would let
    # them through; the commands' own absl.logging lines stay.
    if flags.FLAGS["verbosity"].value < VERBOSE_FROM:
        logging.getLogger("tensorflow").setLevel(logging.WARNING)


def run(
    main: Callable[..., None],
    command: str,
    required: Sequence[str] = (),
    arguments: str | None = None,
) -> None:
    """Parses flags and runs ``main()`` with the shared error handling.

    Args:
        main: the command's body; it reads ``absl.flags.FLAGS`` and takes no arguments
            (with ``arguments``: the list of positional arguments).
        command: the command's name, used to prefix error messages.
        required: flags that must be given; checked after parsing, so a flagfile
            may supply them.
        arguments: for a command that takes positional arguments (one or more), what
            they are, e.g. ``"RUN_DIR"``; without it any positional argument is an error.
    """

    # Before anything imports TensorFlow: its C++ start-up lines are filtered out of
    # a command's output (albert_tf.cli.startup). May re-run this command as a child.
    quiet_start_up()
    # absl's --helpshort lists the flags of the module named by sys.argv[0]; a
    # console script (albert-params) runs the command's module by its import name.
    if main.__module__ != "__main__":
        for flag in flags.FLAGS.get_key_flags_for_module(main.__module__):
            flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)

    def parse(argv: Sequence[str]) -> list[str]:
        if "--helpfull" in argv[1:]:
            print(full_help(main.__module__))
            sys.exit(0)
        try:
            return flags.FLAGS(list(argv))
        except flags.Error as err:
            fail(command, f"{err} (see --helpshort)")
            raise  # unreachable: fail() exits

    def body(argv: list[str]) -> None:
        if arguments is None and len(argv) > 1:
            fail(command, f"unexpected arguments {argv[1:]}; every option is a --flag")
        if arguments is not None and len(argv) < 2:
            fail(command, f"give at least one {arguments} (see --helpshort)")
        missing = [name for name in required if flags.FLAGS[name].value in (None, [], "")]
        if missing:
            fail(command, f"--{missing[0]} is required (see --helpshort)")
        quiet_python_logs()
        try:
            if arguments is None:
                main()
            else:
                main(argv[1:])
        except USER_ERRORS as err:
            if os.environ.get("ALBERT_TF_TRACEBACK"):
                raise
            fail(command, str(err) or type(err).__name__)

    app.run(body, flags_parser=parse)
