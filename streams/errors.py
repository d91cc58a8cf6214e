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


# How deeply a JSON value from outside may nest. Real provider payloads and exports stay far
# below it; deeper ones would exhaust the recursion of the schema validator and of the
# redaction walk (and orjson encodes at most 254 levels), so they are refused as input.
MAX_JSON_DEPTH = 100


def check_depth(value: object, limit: int = MAX_JSON_DEPTH, *, source: str = "") -> None:
    """Raise ``MalformedInput`` if ``value`` (lists, tuples and dicts) nests deeper than
    ``limit`` levels. Iterative: it must not recurse on the input it guards against."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] | tuple[object, ...] = list(item.values())
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            raise MalformedInput(f"nested more than {limit} levels deep", source=source)
        stack.extend((child, depth + 1) for child in children)


class TurnTooLarge(ValueError):
    """The turn has more events or citations than a turn may hold (``TurnLimits``): refused
    whole when it is recorded input, cut there when it streams live."""
