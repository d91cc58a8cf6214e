"""Google Gemini adapter: ``generateContent`` bodies and ``streamGenerateContent`` streams (SSE or
a JSON array) in ``generate``; the Gemini Interactions API (``event_type`` events, or an
Interaction body) in ``interactions``. A later ``request`` module builds the next request from
stored turns.

Payload ``version``: the API version in ``context.endpoint`` ("v1beta", "v1", "v1alpha"), as
"vertex/<version>" ("vertex/v1beta1") for Vertex AI (``aiplatform`` hosts: a different contract);
"v1beta" when unknown. Gemini's ``googleSearch`` tool carries no version of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

from providers.google.common import (
    DEFAULT_API_VERSION,
    FORMATS,
    PROVIDER,
    api_version,
    decode,
    endpoint_model,
    object_of,
)
from providers.google.generate import Generate
from providers.google.interactions import Interactions
from providers.protocol import BodyParser, ResponseParser, WireContext, parse_rows
from providers.wire import Row, WireInput, WireKind
from streams.parts import Part


def parser(context: WireContext, kind: WireKind, first: Row) -> ResponseParser:
    """The parser for one response, from its first row: generateContent or Interactions."""
    data = object_of(first[1], first[0], "a Gemini response or Interactions event")
    if "event_type" in data or data.get("object") == "interaction":
        interactions = Interactions(context)
        # One event line also reads as a JSON body: an event is still an event (a stream cut
        # after it), never a whole Interaction.
        whole = kind == "body" and "event_type" not in data
        return BodyParser(interactions.body) if whole else interactions
    return Generate(context, stream=kind == "stream")


def parse(wire: WireInput, context: WireContext) -> Iterator[Part]:
    return parse_rows(parser, wire, context)


__all__ = [
    "DEFAULT_API_VERSION",
    "FORMATS",
    "PROVIDER",
    "api_version",
    "decode",
    "endpoint_model",
    "parse",
    "parser",
]
