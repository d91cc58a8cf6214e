"""Errors about input, shared by every way a turn comes in (wire reading, adapters, imports).

They say what is wrong and where (a source name and a line), so a caller can refuse the input
with a clear message and write nothing.
"""

from __future__ import annotations


class MalformedInput(ValueError):
    """The input cannot be read as the wire format it claims to be."""

    def __init__(self, message: str, *, line: int | None = None, source: str = "") -> None:
        self.message = message
        self.line = line
        self.source = source
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = self.source or "input"
        if self.line is not None:
            where = f"{where}, line {self.line}"
        return f"{where}: {self.message}"


class TurnTooLarge(ValueError):
    """The turn has more events or citations than a turn may hold (``TurnLimits``): refused
    whole when it is recorded input, cut there when it streams live."""
