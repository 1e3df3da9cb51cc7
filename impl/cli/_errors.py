"""The one error type the command line turns into a one-line message."""

from __future__ import annotations


class CliError(Exception):
    """A user mistake or an unmet precondition: printed as one line, exit status non-zero."""

    def __init__(self, message: str, exit_status: int = 1) -> None:
        super().__init__(message)
        self.exit_status = exit_status
