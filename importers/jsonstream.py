"""The elements of a top-level JSON array, one at a time, read from a binary stream.

A chat app's ``conversations.json`` is one array of thousands of conversations (hundreds of MB):
it is never loaded whole. This scanner finds where each element starts and ends (brackets counted
outside strings, by one regular expression that skips whole strings in C), and hands each
element's bytes to orjson on its own. Memory is one element plus one read chunk.

A malformed element whose brackets still balance is that element's problem (the caller reports
it and reads on); a file whose structure breaks (no array, a missing comma, the end of the file
inside an element) stops here with ``MalformedInput`` naming the line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Protocol

from streams.errors import MalformedInput

CHUNK = 1 << 20
MAX_ELEMENT = 512 * 1024 * 1024  # bytes; one conversation larger than this is refused

# A whole string (escapes included), a bracket, or a quote that opens a string the buffer does
# not hold the end of yet.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}"]', re.DOTALL)
_SPACE = re.compile(rb"[ \t\r\n]*")
_SCALAR_END = re.compile(rb"[,\]\s]")
_OPEN = frozenset(b"[{")
_QUOTE = 0x22


class Readable(Protocol):
    """What the readers need of a file: bytes on ``read`` (an upload, a zip member)."""

    def read(self, size: int = -1, /) -> bytes: ...


class _Buffer:
    """A growing window on the stream, with the line number of every position in it."""

    def __init__(self, stream: Readable, source: str, chunk: int) -> None:
        self.stream = stream
        self.source = source
        self.chunk = chunk
        self.data = bytearray()
        self.eof = False
        self.offset = 0  # stream offset of data[0]
        self._line = 1  # line number at data[self._counted]
        self._counted = 0

    def fill(self) -> bool:
        """Read one more chunk; False at the end of the stream."""
        if self.eof:
            return False
        block = self.stream.read(self.chunk)
        if not block:
            self.eof = True
            return False
        self.data += block
        return True

    def line(self, position: int) -> int:
        if position < self._counted:  # only ever asked about positions not yet dropped
            return self._line - self.data.count(b"\n", position, self._counted)
        self._line += self.data.count(b"\n", self._counted, position)
        self._counted = position
        return self._line

    def drop(self, position: int) -> None:
        """Forget everything before ``position`` (the positions after it shift down)."""
        self.line(position)
        del self.data[:position]
        self.offset += position
        self._counted -= position

    def skip_space(self, position: int) -> int:
        while True:
            position = _SPACE.match(self.data, position).end()  # type: ignore[union-attr]
            if position < len(self.data) or not self.fill():
                return position

    def error(self, message: str, position: int) -> MalformedInput:
        return MalformedInput(message, line=self.line(position), source=self.source)


def array_elements(
    stream: Readable, *, source: str = "", chunk: int = CHUNK, max_element: int = MAX_ELEMENT
) -> Iterator[tuple[bytearray, int]]:
    """Yield ``(element bytes, line where it starts)`` for each element of the array."""
    buf = _Buffer(stream, source, chunk)
    buf.fill()
    if buf.data.startswith(b"\xef\xbb\xbf"):
        del buf.data[:3]
    position = buf.skip_space(0)
    if position >= len(buf.data):
        raise buf.error("empty input", position)
    if buf.data[position] != 0x5B:  # "["
        raise buf.error("expected a JSON array (of conversations)", position)
    position = buf.skip_space(position + 1)
    if position < len(buf.data) and buf.data[position] == 0x5D:  # "]": an empty array
        _finish(buf, position + 1)
        return
    while True:
        if position >= len(buf.data):
            raise buf.error("the file ends inside the array (cut short?)", position)
        start = position
        line = buf.line(start)
        end = _element_end(buf, start, max_element)
        yield buf.data[start:end], line
        buf.drop(end)
        position = buf.skip_space(0)
        if position >= len(buf.data):
            raise buf.error("the file ends inside the array (cut short?)", position)
        separator = buf.data[position]
        if separator == 0x5D:
            _finish(buf, position + 1)
            return
        if separator != 0x2C:  # ","
            raise buf.error(f"expected ',' or ']' after an element, not {chr(separator)!r}",
                            position)
        position = buf.skip_space(position + 1)


def _element_end(buf: _Buffer, start: int, max_element: int) -> int:
    data = buf.data
    first = data[start]
    if first not in _OPEN:
        # A scalar element (not a conversation; the caller will say so): up to the separator.
        if first == _QUOTE:
            while True:
                match = _TOKEN.match(buf.data, start)
                if match and match.end() - start > 1:
                    return match.end()
                if not buf.fill():
                    raise buf.error("the file ends inside a string", start)
        while True:
            match = _SCALAR_END.search(buf.data, start)
            if match:
                return match.start()
            if not buf.fill():
                return len(buf.data)
    depth = 0
    position = start
    while True:
        data = buf.data
        for match in _TOKEN.finditer(data, position):
            byte = data[match.start()]
            if byte == _QUOTE:
                if match.end() - match.start() == 1:  # a string the buffer cuts: read on
                    position = match.start()
                    break
                continue
            if byte in _OPEN:
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return match.end()
        else:
            position = len(data)
        if len(data) - start > max_element:
            raise buf.error(f"an element is larger than {max_element} bytes", start)
        if not buf.fill():
            # Named where the file stops (where it was cut), with where the element began: the
            # element's first line alone pointed far from the damage.
            begun = buf.line(start)
            raise buf.error(f"the file ends inside an element (cut short?) that starts at "
                            f"line {begun}", len(buf.data))


def _finish(buf: _Buffer, position: int) -> None:
    position = buf.skip_space(position)
    if position < len(buf.data):
        raise buf.error("unexpected content after the array", position)
