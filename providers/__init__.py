"""Adapters: one package per provider, one module per wire format, all reading through
``providers.wire``. Adapters never touch Django models; they only translate wire frames into
``streams.parts`` (what an adapter provides: ``providers.protocol``; what a provider provides
as a whole: ``providers.provider``; the providers there are: ``providers.registry``).

Two ways in, one implementation under both:

* ``parse(provider, raw, context)``: a whole recorded response (bytes or text);
* ``stream_parser(provider, context)``: a response as its bytes arrive from the network
  (``feed(chunk)`` returns the parts those bytes complete, ``close()`` the rest).
"""

from __future__ import annotations

from collections.abc import Iterator

from providers import registry
from providers.protocol import ParserFactory, Response, WireContext
from providers.provider import Provider
from providers.wire import MalformedInput, Reader, Row, WireInput, read
from streams.parts import Part

# provider -> the package its adapters are (the producer of the vocabulary they register).
ADAPTERS = {provider.name: provider.package for provider in registry.providers()}


def adapter(provider: str) -> Provider:
    """The registered ``provider``; ``ValueError`` for a provider with none."""
    return registry.get(provider)


def parse(provider: str, raw: bytes | str, context: WireContext | None = None) -> Iterator[Part]:
    """Read ``raw`` in any accepted wire shape and yield the provider's stream parts.

    The wire is read at once (a malformed line is refused before any part); the parts are made
    as they are asked for."""
    parts: Iterator[Part] = adapter(provider).parse(read(raw), context or WireContext())
    return parts


def parse_incrementally(
    provider: str, raw: bytes | str, context: WireContext | None = None, *,
    chunk_size: int = 1 << 16,
) -> Iterator[Part]:
    """``parse`` with memory bounded per response: the bytes go through a ``StreamParser`` a
    chunk at a time, so only the current event is held (``parse`` first reads every event into
    a row: 700,000 pings are 700,000 dicts at once). A malformed line is raised when it is
    reached, after the parts before it."""
    parser = stream_parser(provider, context)
    data = raw.encode() if isinstance(raw, str) else raw
    view = memoryview(data)
    for start in range(0, len(data), chunk_size):
        yield from parser.feed(bytes(view[start:start + chunk_size]))
    yield from parser.close()


def stream_parser(provider: str, context: WireContext | None = None) -> StreamParser:
    """A push-style parser for one response of ``provider`` (``ValueError`` if unknown)."""
    return StreamParser(adapter(provider).parser, context or WireContext())


class StreamParser:
    """One provider response, bytes in as they arrive, stream parts out.

    ``feed(chunk)`` returns the parts its bytes complete; chunks may split anywhere (inside a
    line, a CRLF or a UTF-8 character). ``close()`` ends the input and returns the rest: a cut
    last event is dropped, and a cut stream's open hosted calls are reported as started, exactly
    as ``parse`` does for the same bytes. Only the current event is held (a JSON body, which
    cannot be read before it ends, is held until ``close``).

    Unreadable input: ``feed`` still returns every part before the bad point and the error
    (``MalformedInput``, or whatever the adapter raised) is raised by the next call, so what a
    caller receives never depends on how the bytes were split. An error while closing is raised
    by ``close`` itself. Calls after ``close`` raise ``ValueError``.
    """

    __slots__ = ("_closed", "_context", "_error", "_parser_for", "_reader", "_response")

    def __init__(self, parser: ParserFactory, context: WireContext) -> None:
        self._parser_for = parser
        self._context = context
        self._reader = Reader()
        self._response: Response | None = None  # made with the first row (its kind is known)
        self._error: Exception | None = None
        self._closed = False

    def feed(self, chunk: bytes) -> list[Part]:
        self._check()
        parts: list[Part] = []
        try:
            self._rows(self._reader.feed(chunk), parts)
        except Exception as exc:  # the parts before it stand; the next call raises it
            self._error = exc
        return parts

    def close(self) -> list[Part]:
        self._check()
        self._closed = True
        parts: list[Part] = []
        self._rows(self._reader.close(), parts)
        if self._response is not None:
            parts.extend(self._response.close())
        return parts

    def _rows(self, rows: list[Row], parts: list[Part]) -> None:
        response = self._response
        for row in rows:
            if response is None:
                kind = self._reader.kind
                assert kind is not None  # known by the time a row is returned
                response = self._response = Response(self._parser_for, self._context, kind)
            parts.extend(response.feed(row))

    def _check(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            self._closed = True
            raise error
        if self._closed:
            raise ValueError("the stream parser is closed")


__all__ = [
    "ADAPTERS",
    "MalformedInput",
    "StreamParser",
    "WireContext",
    "WireInput",
    "adapter",
    "parse",
    "parse_incrementally",
    "stream_parser",
]
