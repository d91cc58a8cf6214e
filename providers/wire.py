"""The one reader for provider wire input: server-sent events, one JSON event per line, or one
JSON document (a body, or a JSON array of stream events such as a saved Gemini
``streamGenerateContent`` response).

``Reader`` is push-style: ``feed(chunk)`` takes bytes as they arrive from the network and
returns the rows they complete; ``close()`` says the input ended. Only the current event (or
line) is held, so a long stream never sits in memory whole; a JSON document necessarily does,
until ``close``. ``read(raw)`` is the same reader given everything at once.

Adapters receive rows (``(line, data, event)``) and never look at bytes. A stream whose last
event was cut mid-way (no terminating blank line / newline, and not valid JSON) simply ends:
that is a cut stream, not a malformed file. A bad line anywhere else is ``MalformedInput``
naming the line. Lines end at CR, LF or CRLF, as SSE defines them (a U+2028 inside a JSON string
is not a line break); one leading BOM is ignored.

The reader works on UTF-8 bytes and hands each event's JSON text to orjson as bytes (orjson
validates UTF-8 itself); only the short non-JSON lines (event names, comments) are decoded.

The format is chosen by the first byte that is not whitespace (the reader's states):

``START``       nothing but a BOM and whitespace yet.
``FIRST_LINE``  the input opens with ``{`` or ``[``: its first line, once whole, tells JSON lines
                (a whole JSON value with more after it) from one JSON document.
``SSE``         anything else: server-sent events (``_Events``), line by line.
``JSON_LINES``  one JSON value per line (``_JsonLines``).
``DOCUMENT``    one JSON document, held until ``close`` (and read as JSON lines if it is not one).
``UNUSUAL``     the input opens with Unicode whitespace or a non-ASCII byte (rare): held until
                ``close`` and read as a str reader would (stripped, then a document or SSE).
"""

from __future__ import annotations

import contextlib
import enum
import re
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import orjson

from streams.errors import MalformedInput

__all__ = [  # MalformedInput is re-exported: callers refuse input with the error read() raises
    "DONE", "Frame", "MalformedInput", "Reader", "Row", "WireInput", "WireKind", "read",
]

WireKind = Literal["stream", "body"]


class Frame(NamedTuple):
    """One decoded wire event. ``event`` is the SSE event name, when the wire had one."""

    line: int
    data: Any
    event: str | None = None


Row = tuple[int, Any, "str | None"]  # a Frame's fields as a plain tuple: (line, data, event)


@dataclass(frozen=True, slots=True)
class WireInput:
    """Decoded input, whole. ``rows`` are the frames as plain ``(line, data, event)`` tuples
    (what the adapters read: cheaper to build than named tuples); ``frames`` names their
    fields. ``kind`` is "body" for one JSON object, else "stream"."""

    kind: WireKind
    rows: tuple[Row, ...]

    @property
    def frames(self) -> tuple[Frame, ...]:
        return tuple(Frame(*row) for row in self.rows)


DONE = object()  # the data of an SSE "[DONE]" sentinel (Chat Completions)

_BOM = b"\xef\xbb\xbf"
_LEADING_SPACE = re.compile(rb"[ \t\n\r\x0b\x0c]*")  # what bytes.strip() strips
_JSON_SPACE = re.compile(rb"[ \t\n\r]*")  # what JSON allows around a value
_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError


class _State(enum.Enum):
    START = "start"
    FIRST_LINE = "first line"
    SSE = "sse"
    JSON_LINES = "json lines"
    DOCUMENT = "document"
    UNUSUAL = "unusual"
    CLOSED = "closed"


def read(raw: bytes | str) -> WireInput:
    """Detect the wire shape of ``raw`` and decode it into rows."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    reader = Reader()
    rows = reader.feed(data)
    rows += reader.close()
    assert reader.kind is not None  # close() either decided the kind or raised
    return WireInput(reader.kind, tuple(rows))


class Reader:
    """Wire bytes in, rows out, as the bytes arrive.

    ``feed`` returns the rows its bytes complete. When the input turns out unreadable, the rows
    before the bad line are still returned and the error is raised by the next call (``feed``
    or ``close``), so what is delivered never depends on how the bytes were split. ``kind`` is
    known by the time the first row is returned.
    """

    def __init__(self) -> None:
        self.kind: WireKind | None = None
        self._state = _State.START
        self._held: list[bytes] = []  # bytes no format has read yet (START, FIRST_LINE, ...)
        self._held_size = 0
        self._bom_checked = False
        self._start = 0  # FIRST_LINE / DOCUMENT: where the JSON begins in the held bytes
        self._first_end = -1  # FIRST_LINE: where the first line ends, once found
        self._lines = _Lines()
        self._format: _Events | _JsonLines | None = None
        self._error: Exception | None = None

    def feed(self, chunk: bytes) -> list[Row]:
        self._raise_pending()
        if self._state is _State.CLOSED:
            raise ValueError("the reader is closed")
        rows: list[Row] = []
        try:
            self._feed(bytes(chunk), rows)
        except Exception as exc:  # the rows before it stand; the next call raises it
            self._error = exc
        return rows

    def close(self) -> list[Row]:
        """The input ended: the rest of the rows (a cut last event is dropped)."""
        self._raise_pending()
        rows: list[Row] = []
        if self._state is _State.START and not self._bom_checked:
            self._bom_checked = True  # the input ended inside what might have been a BOM
            self._choose(rows)
        state, self._state = self._state, _State.CLOSED
        if state is _State.CLOSED:
            raise ValueError("the reader is closed")
        if state is _State.START:
            raise MalformedInput("empty input", line=1)
        if state is _State.SSE or state is _State.JSON_LINES:
            assert self._format is not None
            self._format.end(self._lines.rest(), rows)
            return rows
        data = self._take()
        if state is _State.UNUSUAL:
            return self._unusual(data)
        # DOCUMENT, or FIRST_LINE with nothing but whitespace after its first line.
        return self._document(data[self._start :], data)

    # -- states ------------------------------------------------------------------------------

    def _feed(self, chunk: bytes, rows: list[Row]) -> None:
        state = self._state
        if state is _State.SSE or state is _State.JSON_LINES:
            assert self._format is not None
            self._format.lines(self._lines.push(chunk), rows)
            return
        if not chunk:
            return
        size = self._held_size
        self._held.append(chunk)
        self._held_size += len(chunk)
        if state is _State.START:
            self._choose(rows)
        elif state is _State.FIRST_LINE:
            self._first_line(chunk, size, rows)
        # DOCUMENT, UNUSUAL: read whole at close

    def _choose(self, rows: list[Row]) -> None:
        """START: the first byte that is not whitespace picks the format."""
        data = self._take()
        if not self._bom_checked:
            if len(data) < len(_BOM) and _BOM.startswith(data):
                self._keep(data)
                return  # maybe a BOM: wait for more
            self._bom_checked = True
            data = data.removeprefix(_BOM)
        self._keep(data)
        start = _LEADING_SPACE.match(data).end()  # type: ignore[union-attr]
        if start == len(data):
            return  # only whitespace so far
        first = data[start]
        if first >= 0x80 or 0x1C <= first <= 0x1F:
            self._state = _State.UNUSUAL
        elif first == 0x7B or first == 0x5B:  # "{" or "["
            self._state, self._start = _State.FIRST_LINE, start
            self._first_line(data, 0, rows)
        else:
            self._begin(_State.SSE, _Events(), rows)

    def _first_line(self, chunk: bytes, offset: int, rows: list[Row]) -> None:
        """FIRST_LINE: a first line that is a whole JSON value with more after it means JSON
        lines; anything else is one document. ``chunk`` is what was just held, from
        ``offset`` in the held bytes (only it is searched: the rest was searched before)."""
        if self._first_end < 0:
            at = chunk.find(b"\n", max(0, self._start - offset))
            if at < 0:
                return  # the first line goes on
            data = self._take()
            self._keep(data)
            end = offset + at
            try:
                _loads(memoryview(data)[self._start : end])
            except _JSONDecodeError:
                self._state = _State.DOCUMENT
                return
            self._first_end = end
            chunk, offset = data, 0
        after = max(0, self._first_end - offset)
        if _JSON_SPACE.match(chunk, after).end() < len(chunk):  # type: ignore[union-attr]
            self._begin(_State.JSON_LINES, _JsonLines(), rows)
        # else: only whitespace after the first line so far, which a document may end with

    def _begin(self, state: _State, format: _Events | _JsonLines, rows: list[Row]) -> None:
        """Hand the held bytes to the chosen line format; from now on it reads them as they
        come."""
        data = self._take()
        self._state, self._format, self.kind = state, format, "stream"
        format.lines(self._lines.push(data), rows)

    def _take(self) -> bytes:
        data = b"".join(self._held)
        self._held, self._held_size = [], 0
        return data

    def _keep(self, data: bytes) -> None:
        self._held, self._held_size = ([data] if data else []), len(data)

    # -- whole input, at close -----------------------------------------------------------------

    def _document(self, document: bytes, data: bytes) -> list[Row]:
        """One JSON document (a body, or an array of stream events), else JSON lines."""
        try:
            body = _loads(document)
        except _JSONDecodeError:
            return self._whole(_JsonLines(), data)
        if isinstance(body, list):
            # A JSON array of stream events (e.g. a saved streamGenerateContent response).
            self.kind = "stream"
            return [(i + 1, item, None) for i, item in enumerate(body)]
        self.kind = "body"  # a document that opens with "{" is an object
        return [(1, body, None)]

    def _unusual(self, data: bytes) -> list[Row]:
        """Leading Unicode whitespace (rare): strip it as text, as a str reader would."""
        stripped = data.decode("utf-8").lstrip()
        if not stripped:
            raise MalformedInput("empty input", line=1)
        if stripped[0] in "{[":
            return self._document(stripped.encode(), data)
        return self._whole(_Events(), data)

    def _whole(self, format: _Events | _JsonLines, data: bytes) -> list[Row]:
        self.kind = "stream"
        lines = _Lines()
        rows: list[Row] = []
        format.lines(lines.push(data), rows)
        format.end(lines.rest(), rows)
        return rows

    def _raise_pending(self) -> None:
        if self._error is not None:
            raise self._error


class _Lines:
    """Bytes in, whole lines out: CR, LF and CRLF each end a line (also when a CRLF is split
    between two chunks). Holds only the line not yet ended."""

    __slots__ = ("_after_cr", "_tail")

    def __init__(self) -> None:
        self._tail: list[bytes] = []
        self._after_cr = False  # the last chunk ended with CR: an LF opening the next ends it

    def push(self, chunk: bytes) -> list[bytes]:
        if not chunk:
            return []
        if self._after_cr and chunk[0] == 0x0A:
            chunk = chunk[1:]
        self._after_cr = chunk.endswith(b"\r")
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in chunk:
            if chunk:
                self._tail.append(chunk)
            return []
        if self._tail:
            self._tail.append(chunk)
            chunk = b"".join(self._tail)
        lines = chunk.split(b"\n")
        last = lines.pop()
        self._tail = [last] if last else []
        return lines

    def rest(self) -> bytes:
        """The last line, which no line end closed (b"" when the input ended with one)."""
        rest = b"".join(self._tail)
        self._tail = []
        return rest


class _Events:
    """Server-sent events: field lines gathered into events, one row per event's data."""

    __slots__ = ("_data", "_event", "_first", "_number")

    def __init__(self) -> None:
        self._number = 0  # lines read so far
        self._event: str | None = None  # the event's name, once an "event:" line gave it
        self._data: list[bytes] = []  # the event's data lines
        self._first = 0  # the line the event began on

    def lines(self, lines: list[bytes], rows: list[Row]) -> None:
        number, data = self._number, self._data
        data_append = data.append
        try:
            for line in lines:
                number += 1
                if not line:  # a blank line dispatches the event
                    if data:
                        rows.append(_dispatch(self._event, data, self._first))
                        data.clear()
                    self._event, self._first = None, 0
                elif line.startswith(b"data: "):
                    data_append(line[6:])
                    self._first = self._first or number
                elif line.startswith(b"event: "):
                    self._event = line[7:].decode("utf-8")
                    self._first = self._first or number
                else:
                    self._field(line.decode("utf-8"), number, last=False)
        finally:
            self._number = number

    def end(self, rest: bytes, rows: list[Row]) -> None:
        """The input ended (``rest``: its last line, when no line end closed it)."""
        if rest:
            self._number += 1
            if rest.startswith(b"data: "):
                self._data.append(rest[6:])
                self._first = self._first or self._number
            elif rest.startswith(b"event: "):
                self._event = rest[7:].decode("utf-8")
                self._first = self._first or self._number
            else:
                self._field(rest.decode("utf-8"), self._number, last=True)
        if self._data:
            # The last event had no blank line after it: dispatch it when it is whole JSON;
            # otherwise the stream was cut inside it, and SSE never dispatches such an event.
            with contextlib.suppress(MalformedInput, UnicodeDecodeError):
                rows.append(_dispatch(self._event, self._data, self._first or self._number))

    def _field(self, text: str, number: int, *, last: bool) -> None:
        """A line in the general ``name: value`` form (or a comment)."""
        if text.startswith(":"):
            return  # SSE comment (keep-alives, "OPENROUTER PROCESSING")
        name, sep, value = text.partition(":")
        if not sep:
            name, value = text, ""
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
            self._first = self._first or number
        elif name == "data":
            self._data.append(value.encode())
            self._first = self._first or number
        elif name in ("id", "retry"):
            pass
        elif not last:
            raise MalformedInput(f"not a server-sent event line: {text[:80]!r}", line=number)
        # else: the stream was cut inside this line


def _dispatch(event: str | None, data: list[bytes], line: int) -> Row:
    payload = data[0] if len(data) == 1 else b"\n".join(data)
    try:
        return (line, _loads(payload), event)
    except _JSONDecodeError:
        pass
    text = payload.decode("utf-8")
    if text.strip() == "[DONE]":
        return (line, DONE, event)
    try:
        return (line, _loads(text), event)
    except _JSONDecodeError as exc:
        raise MalformedInput(f"invalid JSON ({exc})", line=line) from None


class _JsonLines:
    """One JSON value per line; blank lines are skipped."""

    __slots__ = ("_number",)

    def __init__(self) -> None:
        self._number = 0

    def lines(self, lines: list[bytes], rows: list[Row]) -> None:
        number, append = self._number, rows.append
        try:
            for line in lines:
                number += 1
                if line:
                    try:
                        append((number, _loads(line), None))
                    except _JSONDecodeError:
                        value = _padded_line(line, number)
                        if value is not None:
                            append((number, value, None))
        finally:
            self._number = number

    def end(self, rest: bytes, rows: list[Row]) -> None:
        if rest:
            self._number += 1
            with contextlib.suppress(_JSONDecodeError):  # the stream was cut inside its last line
                rows.append((self._number, _loads(rest), None))


def _padded_line(line: bytes, number: int) -> Any:
    """A line orjson refused as it is: blank, padded with other whitespace, or malformed."""
    content = line.decode("utf-8").strip()
    if not content:
        return None
    try:
        return _loads(content)
    except _JSONDecodeError as exc:
        raise MalformedInput(f"invalid JSON ({exc})", line=number) from None
