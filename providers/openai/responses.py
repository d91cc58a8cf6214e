"""OpenAI Responses API: stream events (``type: "response.*"``, ``error``) and Response bodies
(``object: "response"``).

The ``Responses`` reader is one object whose state (items, their text parts, the response
lifecycle) every event handler shares; its tool-call item handlers and the per-item state are
in ``response_items``; what reads an item whole (its annotations, a hosted call's input and
result, stored payloads) is in ``items``.

Mapping:

* ``message`` item -> ONE ``message`` block keyed by the item id. Its content parts
  (``output_text``, ``refusal``) are joined with a blank line; citation offsets are shifted by the
  part's position, so they address the block's final text. ``BlockEnd`` carries the verbatim
  ``output_item.done`` item. A ``refusal`` part makes the end reason ``refusal``.
* ``url_citation`` -> ``Citation`` with ``start_index``/``end_index`` as a code-point range (the
  API counts characters) and no ``quote`` (OpenAI sends no copy of the segment).
  ``file_citation`` has no URL and only a single ``index`` (where the model put its marker):
  url "", title = filename, and NO range -- a zero-width range means nothing to the builder
  (``ranges.place`` treats it as no range), so the whole block is the cited span; the index
  stays in ``replay``. ``container_file_citation`` keeps its range. Every citation's ``replay``
  is the annotation object verbatim. Other annotation types (``file_path``) live only in the
  message payload.
* ``reasoning`` item -> a ``reasoning`` block (summary parts, and ``reasoning_text`` content
  when the model streams it, joined with a blank line). A reasoning item that finishes with no
  text at all (OpenAI hides reasoning unless a summary is requested; ``encrypted_content`` is
  opaque) is a REDACTED reasoning block: its data lives only in the payload (the whole item).
* Items OpenAI runs itself -> hosted ``Activity`` (``HOSTED_ITEMS``): ``web_search_call`` /
  ``file_search_call`` / ``code_interpreter_call`` (``web_search`` / ``file_search`` /
  ``code_execution``: output = its logs and images), ``mcp_call`` (input ``{"server",
  "tool", "arguments"}`` plus the server's ``server_description`` from the tools when it has
  one; output = its result, or the connector's error), ``mcp_list_tools`` (output = the tools),
  ``image_generation_call`` (``image_generation``: output = the image, also for a call that
  never completes; a cut stream keeps its last ``partial_image``), ``tool_search_call`` with
  ``execution: "server"`` (``tool_search``, completed by its ``tool_search_output``: output =
  the tools it found; a client tool search is the host's, kept as an ``Artifact``), and
  ``mcp_approval_request`` (``started`` only: the host answers it, and the response ends
  ``approval_request``). Images are kept as ``data:`` URLs (``providers.values.image_output``).
  The streamed item names its input (``action``, ``queries``, ``code``) only in
  ``output_item.done``, so ``started`` is emitted there, followed by ``completed``/``failed``
  per the item's ``status`` (``items.terminal_status``: an ``mcp_list_tools`` has none). Any
  other status (Azure's ``web_search_preview`` finishes with ``status: "searching"`` and never
  sends ``.completed``) leaves the activity ``started``: a completion is never invented. A call
  cut before its ``output_item.done`` is emitted as ``started`` with what the added item said.
  web_search input = ``{"action": type, "query"/"queries"/"url"/"pattern": ...}``; search
  ``sources`` -> ``Activity.sources``.
* ``function_call`` / ``custom_tool_call`` -> ``ToolCall`` (at ``output_item.done`` only: a
  call cut mid-arguments is never handed to the host), except in an xAI response the calls
  xAI ran itself (``providers.openai.xai``): a hosted ``Activity`` (``x_search``,
  ``view_media``, ...; input = its arguments and ``tool``, the function xAI ran), started
  then completed or failed by the item's ``status``; they never make the end ``tool_use``.
* Provenance: the provider that served the response (``providers.served``: the caller's word,
  the host, OpenRouter's ``provider`` field, an xAI model name), the model as the response
  names it.
* Any other item type -> ``Artifact`` (kept whole). Unknown stream events are ignored (their
  items arrive whole in ``output_item.done``); ``obfuscation`` padding is ignored.
* ``response.completed`` -> ``ResponseEnd`` (``tool_use`` when the response holds a client tool
  call, ``approval_request`` when it ends on an MCP approval request, ``refusal`` after a refusal
  part, else ``end_turn``); ``response.incomplete`` ->
  ``max_output_tokens`` -> ``max_tokens``, ``content_filter`` -> ``refusal``;
  ``error`` / ``response.failed`` -> one ``StreamError`` then ``ResponseEnd("error")``.
  ``usage`` -> ``Usage`` with the nested integer counters flattened to dotted keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from providers import served
from providers.openai import xai
from providers.openai.common import (
    ERROR,
    PROVIDER,
    flatten_usage,
    require,
    tool_version,
)
from providers.openai.items import (
    ANNOTATION,
    ITEM,
    annotation_citation,
    artifact_summary,
    image_outcome,
)
from providers.openai.response_items import (
    CLIENT_TOOL_ITEMS,
    Item,
    TextPart,
    ToolItems,
    hosted_name,
)
from providers.protocol import WireContext
from providers.values import as_dict, as_int, as_str
from providers.wire import DONE, Row
from streams.errors import MalformedInput
from streams.parts import (
    Activity,
    Artifact,
    BlockEnd,
    BlockKind,
    BlockStart,
    Part,
    ResponseEnd,
    ResponseStart,
    StreamError,
    TextDelta,
    Usage,
)
from streams.registries import END_REASONS

INCOMPLETE_REASONS = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}
# Only two incomplete reasons are documented; any other still means "stopped by a limit".
UNKNOWN_INCOMPLETE = "max_tokens"
_PRODUCER = __package__ or __name__  # the adapter package is the producer
# The response ends on an MCP call the host must approve (``mcp_approval_request``): the turn
# waits for the host, as after a client tool call.
APPROVAL_REQUEST = "approval_request"
for _reason in ("end_turn", "max_tokens", "tool_use", "refusal", "error", APPROVAL_REQUEST):
    END_REASONS.register(_reason, producer=_PRODUCER)

PART_SEPARATOR = "\n\n"  # between the content parts of one message / summaries of one reasoning


# ---------------------------------------------------------------------------------------------
# Responses API


_Parts = tuple[Part, ...]


class Responses(ToolItems):
    """One Responses API response: a stream fed event by event, or a body (``body``)."""

    def __init__(self, context: WireContext) -> None:
        self.context = context
        request = context.request if isinstance(context.request, dict) else {}
        self.version = tool_version(request.get("tools"))
        self.served = served.provider(context, PROVIDER)
        self.xai = False  # served by xAI, whose own tool calls look like client ones
        # The client tools declared (request, then the response's echo); None: not known.
        self.declared: set[str] | None = (
            xai.client_tools(request["tools"]) if isinstance(request.get("tools"), list)
            else None)
        self.started = False
        self.ended = False
        self.errored = False
        self.items: dict[str, Item] = {}
        self.by_index: dict[int, str] = {}
        self.client_tool_call = False
        self.approval_requested = False
        self.refusal = False
        # MCP server label -> its description (e.g. "Google Calendar"), from the tools.
        self.servers: dict[str, str] = {}
        self._servers(request.get("tools"))

    # -- framing ---------------------------------------------------------------------------

    def feed(self, row: Row) -> Iterable[Part]:
        if self.ended:
            return ()  # after the terminal event nothing is read
        line, data, _name = row
        if not isinstance(data, dict):
            if data is DONE:
                return ()
            raise MalformedInput("expected a JSON object per stream event", line=line)
        kind = data.get("type")
        if not isinstance(kind, str):
            raise MalformedInput(
                "not an OpenAI Responses stream event (no string 'type')", line=line
            )
        handler = _EVENTS.get(kind)
        return () if handler is None else handler(self, data, line)

    def close(self) -> Iterable[Part]:
        """The input ended; without a terminal event, name the hosted calls still running."""
        return () if self.ended else self._cut()

    def body(self, response: dict[str, Any], line: int) -> Iterator[Part]:
        yield from self._begin(response)
        output = require(response, "output", list, line, "a Responses body")
        for index, item in enumerate(output):
            if not isinstance(item, dict) or not isinstance(item.get("type"), str):
                raise MalformedInput(f"output[{index}] is not an item with a 'type'", line=line)
            yield from self._item_done(item, index)
        yield from self._terminal(response, line)

    # -- response lifecycle ----------------------------------------------------------------

    # Helpers that make at most a part or two return a tuple, not a generator: they run for
    # most events, and a tuple is cheaper to make and to ``yield from``.

    def _begin(self, response: dict[str, Any]) -> tuple[Part, ...]:
        if self.started:
            return ()
        self.started = True
        if "tools" in response:
            self.version = tool_version(response.get("tools"))
            self._servers(response.get("tools"))
            if isinstance(response["tools"], list):
                self.declared = (self.declared or set()) | xai.client_tools(response["tools"])
        model = as_str(response.get("model"))
        self.served = served.provider(self.context, PROVIDER, model=model,
                                      shown=as_str(response.get("provider")))
        self.xai = xai.PROVIDER in (self.served, served.by_model(model),
                                    served.by_host(self.context.endpoint))
        return (
            ResponseStart(provider=self.served, model=model,
                          response_id=as_str(response.get("id"))),
        )

    def _servers(self, tools: Any) -> None:
        for tool in tools if isinstance(tools, list) else ():
            if isinstance(tool, dict) and tool.get("type") == "mcp":
                label, description = tool.get("server_label"), tool.get("server_description")
                if isinstance(label, str) and isinstance(description, str) and description:
                    self.servers[label] = description

    def _on_created(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        yield from self._begin(require(data, "response", dict, line, data["type"]))

    def _on_completed(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        response = require(data, "response", dict, line, data["type"])
        yield from self._begin(response)
        # Items the stream never finished but the final response holds: finish them from it
        # (not for a failed response, whose unfinished blocks stay partial).
        output = response.get("output") if response.get("status") != "failed" else None
        for index, item in enumerate(output if isinstance(output, list) else ()):
            if isinstance(item, dict) and isinstance(item.get("type"), str):
                known = self.items.get(as_str(item.get("id")))
                if known is None or not known.done:
                    yield from self._item_done(item, index)
        yield from self._terminal(response, line)

    def _on_error(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        yield from self._begin({})
        # Documented shape: code/message at the top level; recorded streams nest an `error`.
        nested = data.get("error")
        yield from self._error(nested if isinstance(nested, dict) else data, data)

    def _error(self, error: dict[str, Any], value: dict[str, Any]) -> Iterator[Part]:
        if self.errored:
            return
        self.errored = True
        code = as_str(error.get("code")) or as_str(error.get("type")) or "error"
        yield StreamError(code, as_str(error.get("message")), self.payload(ERROR, value))

    def _terminal(self, response: dict[str, Any], line: int) -> Iterator[Part]:
        status = response.get("status")
        if status == "failed":
            yield from self._pending_activities()
            error = as_dict(response.get("error"))
            yield from self._error(error, error)
            yield from self._usage(response)
            yield from self._end("error")
            return
        if status not in ("completed", "incomplete"):
            # in_progress / queued (a background body) or cancelled: not finished normally.
            yield from self._pending_activities()
            return
        yield from self._pending_activities()
        yield from self._usage(response)
        if status == "incomplete":
            details = response.get("incomplete_details")
            reason = as_str(details.get("reason")) if isinstance(details, dict) else ""
            yield from self._end(INCOMPLETE_REASONS.get(reason, UNKNOWN_INCOMPLETE))
        elif self.client_tool_call:
            yield from self._end("tool_use")
        elif self.approval_requested:
            yield from self._end(APPROVAL_REQUEST)
        else:
            yield from self._end("refusal" if self.refusal else "end_turn")

    def _usage(self, response: dict[str, Any]) -> tuple[Part, ...]:
        counters = flatten_usage(response.get("usage"))
        return (Usage(counters),) if counters else ()

    def _end(self, reason: str) -> tuple[Part, ...]:
        self.ended = True
        return (ResponseEnd(reason),)

    def _cut(self) -> Iterator[Part]:
        """The input ended without a terminal event: name the hosted calls still running."""
        yield from self._pending_activities()
        if self.errored and not self.ended:
            yield from self._end("error")  # an `error` event with no `response.failed` after it

    def _pending_activities(self) -> Iterator[Part]:
        for state in self.items.values():
            name = hosted_name(state.item)
            server = self._server_call(state.item) if name is None else None
            if server is not None and not state.activity_started:
                state.activity_started = True  # a call xAI ran, cut before it finished
                yield Activity(state.key, server, "started", xai.activity_input(state.item),
                               payload=self.payload(ITEM, state.item))
            if name is not None and not state.activity_started:
                state.activity_started = True
                output = None
                if state.partial_image:  # an image generation cut after a partial image
                    output = image_outcome(state.item, state.partial_image)[2]
                yield Activity(
                    state.key, name, "started", self._input(state.item),
                    payload=self.payload(ITEM, state.item), output=output,
                )

    # -- items -----------------------------------------------------------------------------

    def _state(self, item: dict[str, Any], output_index: Any) -> Item:
        key = as_str(item.get("id")) or f"output-{output_index}"
        state = self.items.get(key)
        if state is None:
            state = self.items[key] = Item(item=item, key=key)
        if as_int(output_index) is not None:
            self.by_index[output_index] = key
        return state

    def _find(self, data: dict[str, Any], line: int) -> Item:
        index: Any = data.get("output_index")  # looked up as sent: by_index holds int keys
        key = as_str(data.get("item_id")) or self.by_index.get(index, "")
        state = self.items.get(key)
        if state is None:
            raise MalformedInput(
                f"{data['type']} for an item that was never added ({key or 'no item_id'})",
                line=line,
            )
        return state

    def _on_item_added(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        yield from self._begin({})
        item = require(data, "item", dict, line, data["type"])
        require(item, "type", str, line, "an output item")
        state = self._state(item, data.get("output_index"))
        if state.type == "message":
            yield from self._open_block(state, "message")

    def _on_item_done(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        yield from self._begin({})
        item = require(data, "item", dict, line, data["type"])
        require(item, "type", str, line, "an output item")
        yield from self._item_done(item, data.get("output_index"))

    def _item_done(self, item: dict[str, Any], output_index: Any) -> Iterator[Part]:
        state = self._state(item, output_index)
        state.item, state.done = item, True
        kind = state.type
        if kind == "message":
            yield from self._message_done(state)
        elif kind == "reasoning":
            yield from self._reasoning_done(state)
        elif hosted_name(item) is not None:
            yield from self._activity_done(state)
        elif kind == "tool_search_output" and item.get("execution") == "server":
            yield from self._tool_search_done(state)
        elif kind in CLIENT_TOOL_ITEMS:
            server = self._server_call(item)
            if server is None:
                yield from self._tool_call_done(state)
            else:
                yield from self._server_call_done(state, server)
        else:
            yield Artifact(
                type=kind, summary=artifact_summary(item), payload=self.payload(ITEM, item)
            )

    # -- text blocks -----------------------------------------------------------------------

    def _open_block(
        self, state: Item, kind: BlockKind
    ) -> tuple[Part, ...]:
        if state.block_open:
            return ()
        state.block_open = True
        return (BlockStart(state.key, kind),)

    def _part(self, state: Item, part_key: tuple[str, int]) -> tuple[TextPart, _Parts]:
        """A content/summary part, opened when new: its offset, and a separator from the
        previous part (the parts to emit for it)."""
        part = state.parts.get(part_key)
        if part is not None:
            return part, ()
        separator: _Parts = ()
        if state.length:
            state.length += len(PART_SEPARATOR)
            separator = (TextDelta(state.key, PART_SEPARATOR),)
        part = state.parts[part_key] = TextPart(state.length)
        return part, separator

    def _append(self, state: Item, part_key: tuple[str, int], text: str) -> _Parts:
        part, separator = self._part(state, part_key)
        if not text:
            return separator
        part.chunks.append(text)
        state.length += len(text)
        return (*separator, TextDelta(state.key, text))

    def _fill(self, state: Item, part_key: tuple[str, int], final: str) -> _Parts:
        """Emit whatever of a part's final text the deltas did not deliver."""
        part, parts = self._part(state, part_key)
        text = part.text
        if final.startswith(text) and len(final) > len(text):
            return (*parts, *self._append(state, part_key, final[len(text) :]))
        return parts

    def _on_content_part_added(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        state = self._find(data, line)
        yield from self._open_block(state, "message")
        part = as_dict(data.get("part"))
        if part.get("type") == "refusal":
            self.refusal = True
        index = as_int(data.get("content_index")) or 0
        yield from self._append(state, ("content", index), as_str(part.get("text")))

    def _on_text_delta(self, data: dict[str, Any], line: int) -> _Parts:
        # The bulk of a stream: a tuple, not a generator (cheaper to make and to consume).
        state = self._find(data, line)
        delta = require(data, "delta", str, line, data["type"])
        if data["type"] == "response.refusal.delta":
            self.refusal = True
        opened = self._open_block(state, "message")
        appended = self._append(state, ("content", as_int(data.get("content_index")) or 0), delta)
        return (*opened, *appended) if opened else appended

    def _on_annotation(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        state = self._find(data, line)
        annotation = require(data, "annotation", dict, line, data["type"])
        yield from self._open_block(state, "message")
        content_index = as_int(data.get("content_index")) or 0
        part, separator = self._part(state, ("content", content_index))
        yield from separator
        cited = state.cited.setdefault(content_index, set())
        index = as_int(data.get("annotation_index"))
        cited.add(len(cited) if index is None else index)
        citation = annotation_citation(
            state.key, annotation, part.offset, self.payload(ANNOTATION, annotation)
        )
        if citation is not None:
            yield citation

    def _on_reasoning_delta(self, data: dict[str, Any], line: int) -> _Parts:
        state = self._find(data, line)
        delta = require(data, "delta", str, line, data["type"])
        if data["type"] == "response.reasoning_summary_text.delta":
            part_key = ("summary", as_int(data.get("summary_index")) or 0)
        else:
            part_key = ("content", as_int(data.get("content_index")) or 0)
        opened = self._open_block(state, "reasoning")
        appended = self._append(state, part_key, delta)
        return (*opened, *appended) if opened else appended

    def _on_summary_part_added(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        state = self._find(data, line)
        yield from self._open_block(state, "reasoning")
        part = as_dict(data.get("part"))
        index = as_int(data.get("summary_index")) or 0
        yield from self._append(state, ("summary", index), as_str(part.get("text")))

    def _message_done(self, state: Item) -> Iterator[Part]:
        yield from self._open_block(state, "message")
        content = state.item.get("content")
        for index, part in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(part, dict):
                continue
            if part.get("type") == "refusal":
                self.refusal = True
                yield from self._fill(state, ("content", index), as_str(part.get("refusal")))
            elif part.get("type") == "output_text":
                yield from self._fill(state, ("content", index), as_str(part.get("text")))
                yield from self._missed_citations(state, index, part.get("annotations"))
            # other content types (audio, ...) are kept in the payload only
        yield BlockEnd(state.key, self.payload(ITEM, state.item))

    def _missed_citations(self, state: Item, index: int, annotations: Any) -> Iterator[Part]:
        """Annotations that came only with the finished item (a body, or a terse stream)."""
        cited = state.cited.setdefault(index, set())
        offset = state.parts[("content", index)].offset
        for position, annotation in enumerate(annotations if isinstance(annotations, list) else ()):
            if position in cited or not isinstance(annotation, dict):
                continue
            cited.add(position)
            citation = annotation_citation(
                state.key, annotation, offset, self.payload(ANNOTATION, annotation)
            )
            if citation is not None:
                yield citation

    def _reasoning_done(self, state: Item) -> Iterator[Part]:
        item = state.item
        texts: list[tuple[tuple[str, int], str]] = []
        for name, kinds in (("summary", "summary_text"), ("content", "reasoning_text")):
            entries = item.get(name)
            for index, entry in enumerate(entries if isinstance(entries, list) else ()):
                if isinstance(entry, dict) and entry.get("type") == kinds:
                    texts.append(((name, index), as_str(entry.get("text"))))
        payload = self.payload(ITEM, item)
        if not state.block_open and not any(text for _, text in texts):
            # Hidden reasoning: only an id and (maybe) encrypted_content, which is opaque.
            yield BlockStart(state.key, "reasoning", redacted=True, payload=payload)
            yield BlockEnd(state.key, payload)
            return
        yield from self._open_block(state, "reasoning")
        for part_key, text in texts:
            yield from self._fill(state, part_key, text)
        yield BlockEnd(state.key, payload)

    def _on_partial_image(self, data: dict[str, Any], line: int) -> tuple[Part, ...]:
        state = self._find(data, line)
        image = data.get("partial_image_b64")
        if isinstance(image, str):
            state.partial_image = image
            if isinstance(data.get("output_format"), str):
                state.item = {**state.item, "output_format": data["output_format"]}
        return ()


_Handler = Callable[[Responses, dict[str, Any], int], Iterable[Part]]
_EVENTS: dict[str, _Handler] = {
    "response.created": Responses._on_created,
    "response.queued": Responses._on_created,
    "response.in_progress": Responses._on_created,
    "response.completed": Responses._on_completed,
    "response.incomplete": Responses._on_completed,
    "response.failed": Responses._on_completed,
    "error": Responses._on_error,
    "response.output_item.added": Responses._on_item_added,
    "response.output_item.done": Responses._on_item_done,
    "response.content_part.added": Responses._on_content_part_added,
    "response.output_text.delta": Responses._on_text_delta,
    "response.refusal.delta": Responses._on_text_delta,
    "response.output_text.annotation.added": Responses._on_annotation,
    "response.reasoning_summary_part.added": Responses._on_summary_part_added,
    "response.reasoning_summary_text.delta": Responses._on_reasoning_delta,
    "response.reasoning_text.delta": Responses._on_reasoning_delta,
    "response.image_generation_call.partial_image": Responses._on_partial_image,
    # Everything else (*.done text events, web_search_call.searching, function-call argument
    # deltas, ...) is covered by output_item.done, which carries the whole item.
}
