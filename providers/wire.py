"""The one reader for provider wire input: raw SSE text, one JSON event per line, or a JSON body.

Adapters receive frames (``WireInput.rows``) and never look at bytes. A stream whose last event
was cut mid-way (no terminating blank line / newline, and not valid JSON) simply ends: that is a
cut stream, not a malformed file. A bad line anywhere else is ``MalformedInput`` naming the line.

The reader works on the UTF-8 bytes and hands each event's JSON text to orjson as bytes (orjson
validates UTF-8 itself); only the short non-JSON lines (event names, comments) are decoded.
Lines end at CR, LF or CRLF, as SSE defines them (a U+2028 inside a JSON string is not a line
break).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from itertools import count, repeat
from typing import Any, Literal, NamedTuple

import orjson

from streams.errors import MalformedInput


class Frame(NamedTuple):
    """One decoded wire event. ``event`` is the SSE event name, when the wire had one."""

    line: int
    data: Any
    event: str | None = None


Row = tuple[int, Any, "str | None"]  # a Frame's fields as a plain tuple: (line, data, event)


@dataclass(frozen=True, slots=True)
class WireInput:
    """The decoded input. ``rows`` are the frames as plain ``(line, data, event)`` tuples (what
    the adapters iterate: cheaper to build than named tuples); ``frames`` names their fields."""

    kind: Literal["stream", "body"]
    rows: tuple[Row, ...]

    @property
    def frames(self) -> tuple[Frame, ...]:
        return tuple(_tuple_new(Frame, row) for row in self.rows)


DONE = object()  # the data of an SSE "[DONE]" sentinel (Chat Completions)

_BOM = b"\xef\xbb\xbf"
_LEADING_SPACE = re.compile(rb"[ \t\n\r\x0b\x0c]*")
_JSON_SPACE = re.compile(rb"[ \t\n\r]*")
_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError
_tuple_new = tuple.__new__


def read(raw: bytes | str) -> WireInput:
    """Detect the wire shape of ``raw`` and decode it into frames."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    data = data.removeprefix(_BOM)
    start = _LEADING_SPACE.match(data).end()  # type: ignore[union-attr]
    if start == len(data):
        raise MalformedInput("empty input", line=1)
    first = data[start]
    if first >= 0x80 or 0x1C <= first <= 0x1F:
        # Leading Unicode whitespace (rare): strip it as text, as a str reader would.
        stripped = data.decode("utf-8").lstrip()
        if not stripped:
            raise MalformedInput("empty input", line=1)
        if stripped[0] in "{[":
            return _document(stripped.encode(), data)
    elif first == 0x7B or first == 0x5B:  # "{" or "["
        if _first_of_lines(data, start):
            return WireInput("stream", tuple(_json_lines(data)))
        return _document(data[start:] if start else data, data)
    return WireInput("stream", tuple(_sse(data)))


def _first_of_lines(data: bytes, start: int) -> bool:
    """Whether the first line (from ``start``) is a whole JSON value with more after it: then the
    input cannot be one document, and is JSON lines (decided without parsing all of it)."""
    end = data.find(b"\n", start)
    if end < 0:
        return False
    try:
        _loads(memoryview(data)[start:end])
    except _JSONDecodeError:
        return False
    return _JSON_SPACE.match(data, end).end() < len(data)  # type: ignore[union-attr]


def _document(document: bytes, data: bytes) -> WireInput:
    """One JSON document (a body, or an array of stream events), else JSON lines."""
    try:
        body = _loads(document)
    except _JSONDecodeError:
        return WireInput("stream", tuple(_json_lines(data)))
    if isinstance(body, list):
        # A JSON array of stream events (e.g. a saved streamGenerateContent response).
        return WireInput("stream", tuple((i + 1, item, None) for i, item in enumerate(body)))
    if not isinstance(body, dict):
        raise MalformedInput("a JSON body must be an object", line=1)
    return WireInput("body", ((1, body, None),))


def _lf_lines(data: bytes) -> bytes:
    """``data`` with every line ending (CRLF, CR, LF) as LF, so lines can be found by memchr."""
    if b"\r" not in data:
        return data
    ending = b"\n" if data.endswith((b"\n", b"\r")) else b""
    return b"\n".join(data.splitlines()) + ending


def _json_lines(data: bytes) -> list[Row]:
    data = _lf_lines(data)
    try:  # every line whole JSON (or empty): the common case, read in one comprehension
        return [(n, _loads(line), None) for n, line in enumerate(data.split(b"\n"), 1) if line]
    except _JSONDecodeError:
        pass  # a cut, padded or malformed line: read line by line to tell which
    view = memoryview(data)
    find = data.find
    size = len(data)
    frames: list[Row] = []
    append = frames.append
    pos = number = 0
    while pos < size:
        number += 1
        end = find(b"\n", pos)
        if end < 0:
            end = size
        if end > pos:
            try:
                append((number, _loads(view[pos:end]), None))
            except _JSONDecodeError:
                if end == size:
                    break  # the stream was cut inside its last line
                value = _padded_line(data[pos:end], number)
                if value is not None:
                    append((number, value, None))
        pos = end + 1
    return frames


def _padded_line(line: bytes, number: int) -> Any:
    """A line orjson refused as it is: blank, padded with other whitespace, or malformed."""
    content = line.decode("utf-8").strip()
    if not content:
        return None
    try:
        return _loads(content)
    except _JSONDecodeError as exc:
        raise MalformedInput(f"invalid JSON ({exc})", line=number) from None


def _sse(data: bytes) -> list[Row]:
    data = _lf_lines(data)
    if data.endswith(b"\n\n"):
        frames = _sse_uniform(data.split(b"\n")[:-1])
        if frames is not None:
            return frames
    view = memoryview(data)
    find = data.find
    starts = data.startswith
    size = len(data)
    frames: list[Row] = []
    append = frames.append
    event: str | None = None
    payload: Any = None  # the event's data: a view of its one data line, or the lines joined
    pos = number = first_line = 0
    while pos < size:
        if payload is None and event is None:
            # An event as providers send it, "event: NAME\ndata: JSON\n\n" or "data: JSON\n\n",
            # read in one step; anything else about it is left to the line-by-line reading.
            if starts(b"event: ", pos):
                name_end = find(b"\n", pos)
                if name_end > 0 and starts(b"data: ", name_end + 1):
                    end = find(b"\n", name_end + 1)
                    if end > 0 and starts(b"\n", end + 1):
                        try:
                            value = _loads(view[name_end + 7 : end])
                        except _JSONDecodeError:
                            pass
                        else:
                            append((number + 1, value, data[pos + 7 : name_end].decode("utf-8")))
                            number += 3
                            pos = end + 2
                            continue
            elif starts(b"data: ", pos):
                end = find(b"\n", pos)
                if end > 0 and starts(b"\n", end + 1):
                    try:
                        value = _loads(view[pos + 6 : end])
                    except _JSONDecodeError:
                        pass
                    else:
                        append((number + 1, value, None))
                        number += 2
                        pos = end + 2
                        continue
        number += 1
        end = find(b"\n", pos)
        if end < 0:
            end = size
        if end == pos:  # a blank line dispatches the event
            if payload is not None:
                try:
                    append((first_line, _loads(payload), event))
                except _JSONDecodeError:
                    append(_dispatch(event, payload, first_line))
                payload = None
            event, first_line = None, 0
        elif starts(b"data: ", pos):
            if payload is None:
                payload = view[pos + 6 : end]
                first_line = first_line or number
            else:
                payload = bytes(payload) + b"\n" + data[pos + 6 : end]
        elif starts(b"event: ", pos):
            event = data[pos + 7 : end].decode("utf-8")
            first_line = first_line or number
        else:
            text = data[pos:end].decode("utf-8")
            if text.startswith(":"):
                pass  # SSE comment (keep-alives, "OPENROUTER PROCESSING")
            else:
                name, sep, value = text.partition(":")
                if not sep:
                    name, value = text, ""
                value = value.removeprefix(" ")
                if name == "event":
                    event = value
                    first_line = first_line or number
                elif name == "data":
                    encoded = value.encode()
                    payload = encoded if payload is None else bytes(payload) + b"\n" + encoded
                    first_line = first_line or number
                elif name in {"id", "retry"}:
                    pass
                elif end == size:
                    break  # the stream was cut inside this line
                else:
                    raise MalformedInput(
                        f"not a server-sent event line: {text[:80]!r}", line=number
                    )
        pos = end + 1
    if payload is not None:
        # The last event had no blank line after it: dispatch it when it is whole JSON;
        # otherwise the stream was cut inside it, and SSE never dispatches such an event.
        with contextlib.suppress(MalformedInput, UnicodeDecodeError):
            append(_dispatch(event, payload, first_line or number))
    return frames


def _sse_uniform(lines: list[bytes]) -> list[Row] | None:
    """The events of a stream where every event is "event: NAME" + "data: JSON" + a blank line
    (or "data: JSON" + a blank line), read in one comprehension; None for any other stream,
    or any line that does not read cleanly (then it is read line by line)."""
    try:
        if (
            len(lines) % 3 == 0
            and not any(lines[2::3])
            and all(map(bytes.startswith, lines[0::3], repeat(b"event: ")))
            and all(map(bytes.startswith, lines[1::3], repeat(b"data: ")))
        ):
            return [
                (n, _loads(data[6:]), event[7:].decode("utf-8"))
                for n, event, data in zip(count(1, 3), lines[0::3], lines[1::3])
            ]
        if (
            len(lines) % 2 == 0
            and not any(lines[1::2])
            and all(map(bytes.startswith, lines[0::2], repeat(b"data: ")))
        ):
            return [(n, _loads(data[6:]), None) for n, data in zip(count(1, 2), lines[0::2])]
    except (_JSONDecodeError, UnicodeDecodeError):
        pass
    return None


def _dispatch(event: str | None, payload: Any, line: int) -> Row:
    try:
        return (line, _loads(payload), event)
    except _JSONDecodeError:
        pass
    text = bytes(payload).decode("utf-8")
    if text.strip() == "[DONE]":
        return (line, DONE, event)
    try:
        return (line, _loads(text), event)
    except _JSONDecodeError as exc:
        raise MalformedInput(f"invalid JSON ({exc})", line=line) from None
