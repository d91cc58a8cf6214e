"""Anthropic Messages API adapter (streaming SSE / JSON lines, and non-streaming bodies).

``blocks`` reads content blocks whole (a body's, or a streamed block once rebuilt);
``messages`` reads a response: a body, or a stream event by event. A later ``request`` module
builds the next request from stored turns.

Mapping:

* ``text`` -> a ``message`` block; each citation -> ``Citation`` without a range (Anthropic
  sends every cited passage as its own text block, so the whole block is the cited span).
  ``web_search_result_location`` carries url/title; document citations (``char_location``,
  ``page_location``, ``content_block_location``) carry no URL: url "", title = document title.
  Their indexes address the SOURCE document, never our text, so they are not ranges. A text
  block with no text and no citations is no message (its BlockStart waits for its first text).
* ``thinking`` -> a ``reasoning`` block (signature kept in the payload); thinking the API leaves
  out (empty ``thinking``, a signature) and ``redacted_thinking`` -> a redacted ``reasoning``
  block whose opaque data lives only in the payload.
* ``tool_use`` -> ``ToolCall`` (also when its ``caller`` is code execution: the client runs it).
* ``server_tool_use`` -> ``Activity(started)``; ``*_tool_result`` -> ``completed`` / ``failed``
  (an error object in ``content``; its ``error_message`` is the output's error). Activity names
  (``blocks.HOSTED_TOOLS``): web_search, web_fetch, code_execution (also ``bash_code_execution``
  and ``text_editor_code_execution``, which run inside it: output = stdout, stderr and
  return code, or the file viewed), advisor (output = its advice), tool_search (both tool search
  variants: output = the tools it found). Nested calls made by code execution (``caller``) are
  hosted activities too; ``caller`` stays in the payload. Unknown hosted tools -> ``Artifact``.
* The MCP connector: ``mcp_tool_use`` -> ``mcp_call`` started, input ``{"server":
  server_name, "tool": name, "arguments": input}``; ``mcp_tool_result`` -> completed (its text
  blocks the output), or failed when ``is_error`` (error_code "tool_error").
* ``message_start`` whose ``message.content`` already holds blocks (a programmatic tool call):
  each read whole (keys ``m<n>``), with the message's own ``stop_reason``.
* Unknown block types, unknown deltas and unknown stop reasons -> ``Artifact`` (kept whole).
* ``stop_reason`` -> ``ResponseEnd``: the documented reasons map to themselves,
  ``model_context_window_exceeded`` -> ``max_tokens``, and any future reason -> ``end_turn``
  (the message finished normally; the raw reason is kept in an ``Artifact`` just before). A
  refusal's ``stop_details`` -> ``Refusal(category, explanation)`` just before its end, the
  ``message_delta`` delta its payload.
* A stream cut before ``message_stop``: text blocks stay open (the builder commits them as
  partial), hosted calls (server tools, MCP) that started are reported ``started``.
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
