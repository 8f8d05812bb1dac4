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

    def parse(argv: Sequence[str]) -> list[str]:
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
