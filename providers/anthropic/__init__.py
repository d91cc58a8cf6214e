"""Anthropic Messages API adapter (streaming SSE / JSON lines, and non-streaming bodies).

``blocks`` reads content blocks whole (a body's, or a streamed block once rebuilt);
``messages`` reads a response: a body, or a stream event by event. A later ``request`` module
builds the next request from stored turns.

Mapping:

* ``text`` -> a ``message`` block; each citation -> ``Citation`` without a range (Anthropic
  sends every cited passage as its own text block, so the whole block is the cited span).
  ``web_search_result_location`` carries url/title; document citations (``char_location``,
  ``page_location``, ``content_block_location``) carry no URL: url "", title = document title.
  Their indexes address the SOURCE document, never our text, so they are not ranges.
* ``thinking`` -> a ``reasoning`` block (signature kept in the payload); ``redacted_thinking``
  -> a redacted ``reasoning`` block whose opaque ``data`` lives only in the payload.
* ``tool_use`` -> ``ToolCall`` (also when its ``caller`` is code execution: the client runs it).
* ``server_tool_use`` -> ``Activity(started)``; ``*_tool_result`` -> ``completed`` / ``failed``
  (an error object in ``content``). Nested calls made by code execution (``caller``) are
  hosted activities too; ``caller`` stays in the payload. Unknown hosted tools -> ``Artifact``.
* Unknown block types, unknown deltas and unknown stop reasons -> ``Artifact`` (kept whole).
* ``stop_reason`` -> ``ResponseEnd``: the documented reasons map to themselves,
  ``model_context_window_exceeded`` -> ``max_tokens``, and any future reason -> ``end_turn``
  (the message finished normally; the raw reason is kept in an ``Artifact`` just before).
* A stream cut before ``message_stop``: text blocks stay open (the builder commits them as
  partial), hosted calls that started are reported ``started``.
"""

from __future__ import annotations

from collections.abc import Iterator

from providers.anthropic.blocks import DEFAULT_API_VERSION, FORMATS, PROVIDER
from providers.anthropic.messages import decode, parser
from providers.protocol import WireContext, parse_rows
from providers.wire import WireInput
from streams.parts import Part


def parse(wire: WireInput, context: WireContext) -> Iterator[Part]:
    """A whole response's parts (``parser`` fed every row)."""
    return parse_rows(parser, wire, context)


__all__ = ["DEFAULT_API_VERSION", "FORMATS", "PROVIDER", "decode", "parse", "parser"]
