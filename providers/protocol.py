"""What an adapter is, and the one loop that drives one.

An adapter package (``providers.anthropic``, ``providers.openai``, ``providers.google``) has:

* ``PROVIDER``: its name;
* ``parser(context, kind, first) -> ResponseParser``: the parser for one response, chosen from
  the response's first row that is not ``[DONE]`` (which wire format it is: a body or a stream,
  Responses or Chat Completions, generateContent or Interactions);
* ``parse(wire, context) -> Iterator[Part]``: a whole response, which is ``parse_rows`` over
  ``parser``: the same parser fed every row;
* ``decode(value, format)``: raises ``ValueError`` for a stored payload it cannot read.

A ``ResponseParser`` is push-style: ``feed(row)`` returns the parts of one frame, ``close()``
the parts the end of input completes (on a cut stream: hosted calls known to have started).
Each call's parts are consumed before the next call (they may be a lazy iterable).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any, Protocol

from providers.wire import DONE, Row, WireInput, WireKind
from streams.parts import Part


@dataclass(frozen=True, slots=True)
class WireContext:
    """What is known besides the response itself.

    ``api_version`` is the API version header in force (Anthropic's ``anthropic-version``),
    ``request`` the request body when the recording has it (it names hosted tool versions),
    ``endpoint`` the URL the request went to (it names Gemini's API version, and the host that
    answered) and ``served_by`` the service the caller knows it sent the request to (a named
    upstream of the proxy, a live call's provider): the provider of ``agent.model``
    (``providers.served``).
    """

    api_version: str | None = None
    request: dict[str, Any] | None = None
    endpoint: str | None = None
    served_by: str | None = None


class ResponseParser(Protocol):
    def feed(self, row: Row) -> Iterable[Part]: ...

    def close(self) -> Iterable[Part]: ...


class ParserFactory(Protocol):
    def __call__(self, context: WireContext, kind: WireKind, first: Row) -> ResponseParser: ...


class BodyParser:
    """The parser of a response that is one JSON body: its one row read by ``read(data, line)``."""

    __slots__ = ("_read",)

    def __init__(self, read: Callable[[Any, int], Iterable[Part]]) -> None:
        self._read = read

    def feed(self, row: Row) -> Iterable[Part]:
        return self._read(row[1], row[0])

    def close(self) -> Iterable[Part]:
        return ()


class Response:
    """One response's rows through the parser its first row picks.

    ``[DONE]`` rows before the first real one are held and given to that parser first, in
    order; a response of nothing but ``[DONE]`` (or nothing at all) has no parts. Once the
    parser is picked, ``feed`` is that parser's own ``feed``: rows cost no extra call.
    """

    __slots__ = ("_context", "_held", "_kind", "_parser", "_parser_for", "feed")

    def __init__(self, parser: ParserFactory, context: WireContext, kind: WireKind) -> None:
        self._parser_for = parser
        self._context = context
        self._kind: WireKind = kind
        self._parser: ResponseParser | None = None
        self._held: list[Row] = []
        self.feed: Callable[[Row], Iterable[Part]] = self._first

    def _first(self, row: Row) -> Iterable[Part]:
        if row[1] is DONE:
            self._held.append(row)
            return ()
        parser = self._parser = self._parser_for(self._context, self._kind, row)
        self.feed = parser.feed
        if not self._held:
            return parser.feed(row)
        rows, self._held = [*self._held, row], []
        return [part for held in rows for part in parser.feed(held)]

    def close(self) -> Iterable[Part]:
        return () if self._parser is None else self._parser.close()


def parse_rows(parser: ParserFactory, wire: WireInput, context: WireContext) -> Iterator[Part]:
    """A whole response: every row through the parser ``parser`` picks, then the end.

    Nothing is read before the first part is asked for. The parts of each row are chained
    without passing through a Python frame each (most of a stream's parts are text deltas)."""
    response = Response(parser, context, wire.kind)

    def frames() -> Iterator[Iterable[Part]]:
        for row in wire.rows:
            yield response.feed(row)
        yield response.close()

    return chain.from_iterable(frames())
