"""Errors the CLI maps to exit codes with one clear line."""

from __future__ import annotations

#: Exit codes of the ``gmpscope`` command.
EXIT_OK = 0
EXIT_FAILURE = 1  # the command could not do its work (I/O, environment)
EXIT_BAD_INPUT = 2  # the input is not what it should be (bad trace, bad arguments)


class CLIError(Exception):
    """An error that the CLI prints as one line and turns into an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code
