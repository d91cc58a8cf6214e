"""The one reader for provider wire input: raw SSE text, one JSON event per line, or a JSON body.

Adapters receive ``Frame`` objects and never look at bytes. A stream whose last event was cut
mid-way (no terminating blank line / newline, and not valid JSON) simply ends: that is a cut
stream, not a malformed file. A bad line anywhere else is ``MalformedInput`` naming the line.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import orjson


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


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded wire event. ``event`` is the SSE event name, when the wire had one."""

    line: int
    data: Any
    event: str | None = None


@dataclass(frozen=True, slots=True)
class WireInput:
    kind: Literal["stream", "body"]
    frames: tuple[Frame, ...]


DONE = object()  # the data of an SSE "[DONE]" sentinel (Chat Completions)


def _loads(text: str | bytes, line: int) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise MalformedInput(f"invalid JSON ({exc})", line=line) from None


def read(raw: bytes | str) -> WireInput:
    """Detect the wire shape of ``raw`` and decode it into frames."""
    text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
    text = text.removeprefix("\ufeff")
    stripped = text.lstrip()
    if not stripped:
        raise MalformedInput("empty input", line=1)
    if stripped[0] in "{[":
        try:
            body = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return WireInput("stream", tuple(_json_lines(text)))
        if isinstance(body, list):
            # A JSON array of stream events (e.g. a saved streamGenerateContent response).
            return WireInput("stream", tuple(Frame(i + 1, item) for i, item in enumerate(body)))
        if not isinstance(body, dict):
            raise MalformedInput("a JSON body must be an object", line=1)
        return WireInput("body", (Frame(1, body),))
    return WireInput("stream", tuple(_sse(text)))


def _json_lines(text: str) -> Iterator[Frame]:
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines, start=1):
        content = line.strip()
        if not content:
            continue
        try:
            data = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            if number == len(lines) and not line.endswith(("\n", "\r")):
                return  # the stream was cut inside its last line
            raise MalformedInput(f"invalid JSON ({exc})", line=number) from None
        yield Frame(number, data)


def _sse(text: str) -> Iterator[Frame]:
    event: str | None = None
    data: list[str] = []
    first_line: int | None = None
    lines = text.splitlines()
    unterminated = not text.endswith(("\n", "\r"))
    for number, line in enumerate(lines, start=1):
        if not line:
            if data:
                yield _dispatch(event, data, first_line or number)
            event, data, first_line = None, [], None
            continue
        if line.startswith(":"):
            continue  # SSE comment (keep-alives, "OPENROUTER PROCESSING")
        name, sep, value = line.partition(":")
        if not sep:
            name, value = line, ""
        value = value.removeprefix(" ")
        if name == "event":
            event = value
            first_line = first_line or number
        elif name == "data":
            data.append(value)
            first_line = first_line or number
        elif name in {"id", "retry"}:
            continue
        elif number == len(lines) and unterminated:
            break  # the stream was cut inside this line
        else:
            raise MalformedInput(f"not a server-sent event line: {line[:80]!r}", line=number)
    if data:
        # The last event had no blank line after it: dispatch it when it is whole JSON;
        # otherwise the stream was cut inside it, and SSE never dispatches such an event.
        try:
            yield _dispatch(event, data, first_line or len(lines))
        except MalformedInput:
            return


def _dispatch(event: str | None, data: list[str], line: int) -> Frame:
    payload = "\n".join(data)
    if payload.strip() == "[DONE]":
        return Frame(line, DONE, event)
    return Frame(line, _loads(payload, line), event)
