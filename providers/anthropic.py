"""Anthropic Messages API adapter (streaming SSE / JSON lines, and non-streaming bodies).

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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from providers import WireContext
from providers.wire import DONE, Frame, MalformedInput, Row, WireInput
from streams.parts import (
    Activity,
    Artifact,
    BlockEnd,
    BlockStart,
    Citation,
    Part,
    Payload,
    ResponseEnd,
    ResponseStart,
    StreamError,
    TextDelta,
    ToolCall,
    Usage,
)
from streams.registries import ACTIVITY_NAMES, END_REASONS

PROVIDER = "anthropic"
DEFAULT_API_VERSION = "2023-06-01"

BLOCK = "anthropic.content_block"  # a content block, verbatim or reconstructed from the stream
CITATION = "anthropic.citation"  # one citation object (incl. encrypted_index)
ERROR = "anthropic.error"  # an `error` event / error body
DELTA = "anthropic.delta"  # a content_block_delta payload this version does not understand
STREAMED_BLOCK = "anthropic.stream_block"  # {"content_block": start, "deltas": [...]}
STOP = "anthropic.message_delta"  # the message_delta `delta` (stop_reason, stop_details, ...)
FORMATS = (BLOCK, CITATION, ERROR, DELTA, STREAMED_BLOCK, STOP)

END_REASON_MAP = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_use",
    "pause_turn": "pause_turn",
    "refusal": "refusal",
    # The context window ran out: for the reader that is a length limit, like max_tokens.
    "model_context_window_exceeded": "max_tokens",
}
UNKNOWN_END_REASON = "end_turn"
for _reason in {*END_REASON_MAP.values(), "error"}:
    END_REASONS.register(_reason, producer=__name__)

# server_tool_use name -> registered activity name (bash / text editor run inside code execution).
HOSTED_TOOLS = {
    "web_search": "web_search",
    "web_fetch": "web_fetch",
    "code_execution": "code_execution",
    "bash_code_execution": "code_execution",
    "text_editor_code_execution": "code_execution",
}
RESULT_BLOCKS = {
    "web_search_tool_result": "web_search",
    "web_fetch_tool_result": "web_fetch",
    "code_execution_tool_result": "code_execution",
    "bash_code_execution_tool_result": "code_execution",
    "text_editor_code_execution_tool_result": "code_execution",
}
for _name in sorted(set(HOSTED_TOOLS.values())):
    ACTIVITY_NAMES.register(_name, producer=__name__)

_TOOL_VERSION = re.compile(r"^([a-z_]+?)_(\d{8})$")


# ---------------------------------------------------------------------------------------------
# Small helpers


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _artifact(kind: str, summary: str, payload: Payload) -> Artifact:
    return Artifact(type=kind, summary=summary, payload=payload)


def _response_start(message: dict[str, Any]) -> ResponseStart:
    # The served model, as the response names it (never the request's).
    return ResponseStart(
        provider=PROVIDER, model=_str(message.get("model")), response_id=_str(message.get("id"))
    )


def _lenient_object(text: str) -> dict[str, Any]:
    """Best-effort parse of a tool input that was cut mid-stream: close what is open."""
    try:
        value = orjson.loads(text)
        return value if isinstance(value, dict) else {}
    except orjson.JSONDecodeError:
        pass
    closers: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            closers.append("}" if ch == "{" else "]")
        elif ch in "}]" and closers:
            closers.pop()
    head = text[:-1] if escaped else text
    head += '"' if in_string else ""
    for candidate in (head, head.rstrip().rstrip(",")):
        try:
            value = orjson.loads(candidate + "".join(reversed(closers)))
        except orjson.JSONDecodeError:
            continue
        return value if isinstance(value, dict) else {}
    return {}


@dataclass(frozen=True, slots=True)
class _Versions:
    """The wire contract in force: API version, plus hosted tool versions from the request."""

    api: str
    tools: dict[str, str]

    @classmethod
    def of(cls, context: WireContext) -> _Versions:
        tools: dict[str, str] = {}
        request = context.request if isinstance(context.request, dict) else {}
        for tool in request.get("tools") or ():
            kind = tool.get("type") if isinstance(tool, dict) else None
            match = _TOOL_VERSION.match(kind) if isinstance(kind, str) else None
            if match:  # e.g. web_search_20250305 -> family web_search
                tools.setdefault(match.group(1), kind)
        return cls(context.api_version or DEFAULT_API_VERSION, tools)

    def payload(self, fmt: str, value: Any, tool: str | None = None) -> Payload:
        if tool and tool in self.tools:
            return Payload(PROVIDER, fmt, f"{self.api}+{self.tools[tool]}", value)
        return Payload(PROVIDER, fmt, self.api, value)


# ---------------------------------------------------------------------------------------------
# Whole blocks (non-streaming bodies, and streamed blocks once reconstructed)


def _citation(key: str, cite: Any, versions: _Versions, line: int) -> Citation:
    if not isinstance(cite, dict):
        raise MalformedInput("a citation must be a JSON object", line=line)
    kind = _str(cite.get("type"))
    excerpt = _str(cite.get("cited_text"))
    if kind == "web_search_result_location":
        url, title = _str(cite.get("url")), _str(cite.get("title"))
    elif kind in {"char_location", "page_location", "content_block_location"}:
        # Document citations: the indexes address the source document, not our text.
        url, title = "", _str(cite.get("document_title"))
    elif kind == "search_result_location":
        source = _str(cite.get("source"))
        url = source if source.startswith(("http://", "https://")) else ""
        title = _str(cite.get("title")) or source
    else:  # a future citation type: keep what reads like a source, the rest rides in replay
        url = _str(cite.get("url"))
        title = _str(cite.get("title")) or _str(cite.get("document_title"))
    tool = "web_search" if kind == "web_search_result_location" else None
    # Positional: Citation(key, url, title, excerpt, start, end, unit, quote, replay)
    return Citation(
        key, url, title, excerpt, None, None, "codepoint", None,
        versions.payload(CITATION, cite, tool),
    )


def _text_block(key: str, block: dict[str, Any], v: _Versions, line: int) -> Iterator[Part]:
    yield BlockStart(key, "message")
    if text := _str(block.get("text")):
        yield TextDelta(key, text)
    for cite in block.get("citations") or ():
        yield _citation(key, cite, v, line)
    yield BlockEnd(key, v.payload(BLOCK, block))


def _thinking_block(key: str, block: dict[str, Any], v: _Versions, line: int) -> Iterator[Part]:
    yield BlockStart(key, "reasoning")
    if text := _str(block.get("thinking")):
        yield TextDelta(key, text)
    yield BlockEnd(key, v.payload(BLOCK, block))


def _redacted_block(key: str, block: dict[str, Any], v: _Versions, line: int) -> Iterator[Part]:
    payload = v.payload(BLOCK, block)
    yield BlockStart(key, "reasoning", redacted=True, payload=payload)
    yield BlockEnd(key, payload)


def _tool_use_block(key: str, block: dict[str, Any], v: _Versions, line: int) -> Iterator[Part]:
    call_id, name = block.get("id"), block.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise MalformedInput("a tool_use block needs string 'id' and 'name'", line=line)
    yield ToolCall(
        call_id=call_id, name=name, arguments=block.get("input"), payload=v.payload(BLOCK, block)
    )


def _server_tool_block(key: str, block: dict[str, Any], v: _Versions, line: int) -> Iterator[Part]:
    call_id, tool = block.get("id"), block.get("name")
    if not isinstance(call_id, str) or not isinstance(tool, str):
        raise MalformedInput("a server_tool_use block needs string 'id' and 'name'", line=line)
    name = HOSTED_TOOLS.get(tool)
    if name is None:  # a hosted tool this version does not know (tool search, ...)
        yield _artifact("server_tool_use", f"hosted tool {tool}", v.payload(BLOCK, block))
        return
    args = block.get("input")
    yield Activity(
        activity_id=call_id,
        name=name,
        state="started",
        input=args if isinstance(args, dict) else {},
        payload=v.payload(BLOCK, block, name),
    )


def _result_block(key: str, block: dict[str, Any], v: _Versions, line: int) -> Iterator[Part]:
    kind = _str(block.get("type"))
    name = RESULT_BLOCKS[kind]
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise MalformedInput(f"a {kind} block needs a string 'tool_use_id'", line=line)
    payload = v.payload(BLOCK, block, name)
    content = block.get("content")
    if isinstance(content, dict) and (
        "error_code" in content or _str(content.get("type")).endswith("_error")
    ):
        # A hosted tool error is a 200 response with an error object instead of a result.
        code = _str(content.get("error_code")) or "error"
        yield Activity(call_id, name, "failed", summary=code, error_code=code, payload=payload)
        return
    state, summary, sources, error_code = _SUMMARIZERS[name](content)
    # Positional: Activity(activity_id, name, state, input, summary, sources, error_code, payload)
    yield Activity(call_id, name, state, {}, summary, sources, error_code, payload)


_Summary = tuple[Any, str, tuple[dict[str, str], ...], str]  # state, summary, sources, error


def _search_summary(content: Any) -> _Summary:
    results = [r for r in content if isinstance(r, dict)] if isinstance(content, list) else []
    if not results:
        return "completed", "no results", (), ""  # an empty list: searched, matched nothing
    # One comprehension with the string checks inline: a search returns many results.
    sources = tuple([
        {
            "url": url if isinstance(url, str) else "",
            "title": title if isinstance(title := r.get("title"), str) else "",
        }
        for r in results
        if (url := r.get("url"))
    ])
    return "completed", _count(len(results), "result"), sources, ""


def _fetch_summary(content: Any) -> _Summary:
    if not isinstance(content, dict):
        return "completed", "", (), ""
    url = _str(content.get("url"))
    document = content.get("content")
    title = _str(document.get("title")) if isinstance(document, dict) else ""
    sources = ({"url": url, "title": title},) if url else ()
    return "completed", _clip(title or url), sources, ""


def _code_summary(content: Any) -> _Summary:
    """Code that ran and raised (return_code != 0) still completed; `failed` is for an error
    object (the tool did not run) or an aborted run."""
    if not isinstance(content, dict):
        return "completed", "", (), ""
    abort = _str(content.get("abort_reason"))
    if abort:
        return "failed", abort, (), abort
    kind = _str(content.get("type"))
    if "return_code" in content:
        summary = f"exit code {content['return_code']}"
        lines = [s for s in _str(content.get("stderr")).splitlines() if s.strip()]
        if content["return_code"] != 0 and lines:
            summary = f"{summary}: {lines[-1].strip()}"
        return "completed", _clip(summary), (), ""
    if kind == "text_editor_code_execution_create_result" and content.get("is_file_update"):
        return "completed", "updated file", (), ""
    return "completed", _EDITOR_SUMMARIES.get(kind, ""), (), ""


_EDITOR_SUMMARIES = {
    "text_editor_code_execution_view_result": "viewed file",
    "text_editor_code_execution_create_result": "created file",
    "text_editor_code_execution_str_replace_result": "edited file",
}

_SUMMARIZERS: dict[str, Callable[[Any], _Summary]] = {
    "web_search": _search_summary,
    "web_fetch": _fetch_summary,
    "code_execution": _code_summary,
}

_BlockHandler = Callable[[str, dict[str, Any], _Versions, int], Iterator[Part]]
WHOLE_BLOCKS: dict[str, _BlockHandler] = {
    "text": _text_block,
    "thinking": _thinking_block,
    "redacted_thinking": _redacted_block,
    "tool_use": _tool_use_block,
    "server_tool_use": _server_tool_block,
    **dict.fromkeys(RESULT_BLOCKS, _result_block),
}


def _whole_block(key: str, block: Any, v: _Versions, line: int) -> Iterator[Part]:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise MalformedInput(
            "a content block must be a JSON object with a string 'type'", line=line
        )
    handler = WHOLE_BLOCKS.get(block["type"])
    if handler is None:
        yield _artifact(
            block["type"], f"unknown content block {block['type']}", v.payload(BLOCK, block)
        )
        return
    yield from handler(key, block, v, line)


def _usage(usage: Any) -> Usage | None:
    counters = usage.get("server_tool_use") if isinstance(usage, dict) else None
    if not isinstance(counters, dict):
        return None
    return Usage(
        {k: v for k, v in counters.items() if isinstance(v, int) and not isinstance(v, bool)}
    )


def _end(stop: dict[str, Any], v: _Versions) -> Iterator[Part]:
    """ResponseEnd for a stop_reason; an unknown reason is kept whole in an Artifact first."""
    reason = stop.get("stop_reason")
    if reason is None:
        yield ResponseEnd(UNKNOWN_END_REASON)  # message_stop without a reason: it did finish
        return
    mapped = END_REASON_MAP.get(reason) if isinstance(reason, str) else None
    if mapped is None:
        yield _artifact("stop_reason", f"unknown stop_reason {reason!r}", v.payload(STOP, stop))
        mapped = UNKNOWN_END_REASON
    yield ResponseEnd(mapped)


def _error(event: dict[str, Any], v: _Versions) -> Iterator[Part]:
    error = event.get("error")
    error = error if isinstance(error, dict) else {}
    code = _str(error.get("type")) or "error"
    yield StreamError(
        code=code, message=_str(error.get("message")), payload=v.payload(ERROR, event)
    )
    yield ResponseEnd("error")


# ---------------------------------------------------------------------------------------------
# Non-streaming bodies


def _body(frame: Frame, context: WireContext) -> Iterator[Part]:
    v = _Versions.of(context)
    message = frame.data
    kind = message.get("type")
    if kind == "error":
        yield from _error(message, v)
        return
    if kind != "message" or not isinstance(message.get("content"), list):
        raise MalformedInput(
            f"expected an Anthropic message (type 'message' with a 'content' list), "
            f"got type {kind!r}",
            line=frame.line,
        )
    yield _response_start(message)
    for position, block in enumerate(message["content"]):
        yield from _whole_block(f"b{position}", block, v, frame.line)
    if usage := _usage(message.get("usage")):
        yield usage
    stop = {k: message[k] for k in ("stop_reason", "stop_sequence", "stop_details") if k in message}
    yield from _end(stop, v)


# ---------------------------------------------------------------------------------------------
# Streams


class _Open:
    """A content block whose content_block_stop has not arrived yet."""

    __slots__ = (
        "block", "citations", "deltas", "json", "key", "line", "signature", "text",
        "text_delta", "text_field", "type",
    )

    def __init__(self, key: str, block: dict[str, Any], line: int) -> None:
        self.key = key
        self.block = block
        self.line = line
        self.text: list[str] = []
        self.signature: list[str] = []
        self.citations: list[Any] = []
        self.json: list[str] = []
        self.deltas: list[Any] = []
        self.type: str = block["type"]  # a string: checked at content_block_start
        # The delta type that carries this block's streamed text (a sentinel equal to no JSON
        # value for other blocks), and that delta's text field.
        self.text_delta, self.text_field = _TEXT_DELTAS.get(self.type, (_NO_TEXT, ""))


_TEXT_DELTAS = {"text": ("text_delta", "text"), "thinking": ("thinking_delta", "thinking")}
_NO_TEXT = object()
_JSON_BLOCKS = ("tool_use", "server_tool_use")


class _Stream:
    v: _Versions  # read from the context when the parse begins

    def __init__(self, context: WireContext) -> None:
        self.context = context
        self.started = False
        self.finished = False
        self.open: dict[int, _Open] = {}
        self.keys: set[str] = set()
        self.stop: dict[str, Any] = {}

    def parse(self, rows: tuple[Row, ...]) -> Iterator[Part]:
        self.v = _Versions.of(self.context)
        api = self.v.api  # the version of a block payload (no hosted tool of its own)
        events = self.EVENTS
        blocks = self.open
        for line, event, _name in rows:
            if type(event) is dict:
                kind = event.get("type")
            elif event is DONE:
                continue
            else:
                kind = event.get("type") if isinstance(event, dict) else None
            if kind == "content_block_delta" and self.started:
                # The bulk of a stream: text and tool-input deltas on an open block of their
                # kind. Anything else about a delta goes through _block_delta below.
                index = event.get("index")
                state = blocks.get(index) if isinstance(index, int) else None
                delta = event.get("delta")
                if state is not None and isinstance(delta, dict):
                    delta_kind = delta.get("type")
                    if delta_kind == state.text_delta:
                        text = delta.get(state.text_field)
                        if not isinstance(text, str):
                            text = ""
                        state.text.append(text)
                        if text:
                            yield TextDelta(state.key, text)
                        continue
                    if delta_kind == "input_json_delta" and state.type in _JSON_BLOCKS:
                        text = delta.get("partial_json")
                        state.json.append(text if isinstance(text, str) else "")
                        continue
                    if delta_kind == "citations_delta" and state.type == "text":
                        cite = delta.get("citation")
                        yield _citation(state.key, cite, self.v, state.line)
                        state.citations.append(cite)
                        continue
            elif kind == "content_block_start" and self.started:
                # A text or thinking block opening (with no citations of its own yet).
                index, block = event.get("index"), event.get("content_block")
                if isinstance(index, int) and isinstance(block, dict):
                    block_type = block.get("type")
                    if (block_type == "text" and not block.get("citations")) or (
                        block_type == "thinking"
                    ):
                        key = f"b{index}"
                        if key not in self.keys:
                            self.keys.add(key)
                            state = blocks[index] = _Open(key, dict(block), line)
                            part_kind = "message" if block_type == "text" else "reasoning"
                            yield BlockStart(key, part_kind)
                            text = block.get(state.text_field)
                            if not isinstance(text, str):
                                text = ""
                            state.text.append(text)
                            if text:
                                yield TextDelta(key, text)
                            continue
            elif kind == "content_block_stop" and self.started:
                # A text or thinking block closing: its payload is the block as streamed.
                index = event.get("index")
                state = blocks.get(index) if isinstance(index, int) else None
                if state is not None and state.text_field:
                    del blocks[index]
                    if state.type == "text":
                        value = self._text_value(state)
                    else:
                        value = self._thinking_value(state)
                    yield BlockEnd(state.key, Payload(PROVIDER, BLOCK, api, value))
                    continue
            elif not isinstance(kind, str):
                raise MalformedInput(
                    "expected an Anthropic stream event (a JSON object with a string 'type')",
                    line=line,
                )
            elif not self.started and kind not in {"message_start", "ping", "error"}:
                raise MalformedInput(
                    f"expected 'message_start' first, got {kind!r}: "
                    "is this an Anthropic Messages stream?",
                    line=line,
                )
            handler = events.get(kind)
            if handler is not None:  # unknown event types are skipped, as Anthropic advises
                yield from handler(self, event, line)
            if self.finished:
                return
        yield from self._flush()  # cut: no terminal event

    # -- events --------------------------------------------------------------------------------

    def _message_start(self, event: dict[str, Any], line: int) -> Iterator[Part]:
        message = event.get("message")
        if self.started or not isinstance(message, dict):
            raise MalformedInput("a message_start must come once and carry a 'message'", line=line)
        self.started = True
        yield _response_start(message)

    def _block_start(self, event: dict[str, Any], line: int) -> Iterator[Part]:
        index, block = event.get("index"), event.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            raise MalformedInput(
                "content_block_start needs an integer 'index' and a 'content_block'", line=line
            )
        if not isinstance(block.get("type"), str):
            raise MalformedInput("a content block needs a string 'type'", line=line)
        key = f"b{index}"
        if key in self.keys:
            raise MalformedInput(f"content block {index} started twice", line=line)
        self.keys.add(key)
        state = _Open(key, dict(block), line)
        self.open[index] = state
        kind = state.type
        if kind == "text":
            yield BlockStart(key, "message")
            yield from self._text(state, _str(block.get("text")))
            for cite in block.get("citations") or ():
                yield from self._cite(state, cite)
            state.citations = list(block.get("citations") or [])
        elif kind == "thinking":
            yield BlockStart(key, "reasoning")
            yield from self._text(state, _str(block.get("thinking")))
        elif kind == "redacted_thinking":
            payload = self.v.payload(BLOCK, block)
            yield BlockStart(key, "reasoning", redacted=True, payload=payload)
        elif kind in RESULT_BLOCKS:
            # Result blocks arrive whole in content_block_start: report them now.
            yield from _result_block(key, block, self.v, line)

    def _block_delta(self, event: dict[str, Any], line: int) -> Iterator[Part]:
        state = self._state(event, line)
        delta = event.get("delta")
        kind = delta.get("type") if isinstance(delta, dict) else None
        handler = self.DELTAS.get((state.type, kind)) if isinstance(kind, str) else None
        if handler is not None:
            yield from handler(self, state, delta)
        elif state.type in WHOLE_BLOCKS:
            # A delta this version does not understand on a known block: keep it whole.
            yield _artifact(f"delta:{kind}", f"unknown delta on {state.type}", self._delta(event))
        else:
            state.deltas.append(delta)  # an unknown block: its deltas ride in its Artifact

    def _block_stop(self, event: dict[str, Any], line: int) -> Iterator[Part]:
        state = self._state(event, line)
        del self.open[event["index"]]
        kind = state.type
        if kind == "text":
            yield BlockEnd(state.key, self.v.payload(BLOCK, self._text_value(state)))
        elif kind == "thinking":
            yield BlockEnd(state.key, self.v.payload(BLOCK, self._thinking_value(state)))
        elif kind == "redacted_thinking":
            yield BlockEnd(state.key, self.v.payload(BLOCK, state.block))
        elif kind in {"tool_use", "server_tool_use"}:
            yield from _whole_block(state.key, self._tool_value(state), self.v, state.line)
        elif kind not in RESULT_BLOCKS:
            yield self._unknown(state)

    def _message_delta(self, event: dict[str, Any], line: int) -> Iterator[Part]:
        delta = event.get("delta")
        if isinstance(delta, dict):
            self.stop = delta
        if usage := _usage(event.get("usage")):
            yield usage

    def _message_stop(self, event: dict[str, Any], line: int) -> Iterator[Part]:
        self.finished = True
        yield from _end(self.stop, self.v)

    def _ping(self, event: dict[str, Any], line: int) -> Iterator[Part]:
        return iter(())

    def _error_event(self, event: dict[str, Any], line: int) -> Iterator[Part]:
        self.finished = True
        yield from self._flush()
        yield from _error(event, self.v)

    EVENTS: dict[str, Callable[[_Stream, dict[str, Any], int], Iterator[Part]]] = {
        "message_start": _message_start,
        "content_block_start": _block_start,
        "content_block_delta": _block_delta,
        "content_block_stop": _block_stop,
        "message_delta": _message_delta,
        "message_stop": _message_stop,
        "ping": _ping,
        "error": _error_event,
    }

    # -- deltas --------------------------------------------------------------------------------

    def _text(self, state: _Open, text: str) -> Iterator[Part]:
        state.text.append(text)
        if text:
            yield TextDelta(state.key, text)

    def _text_delta(self, state: _Open, delta: dict[str, Any]) -> Iterator[Part]:
        yield from self._text(state, _str(delta.get("text")))

    def _thinking_delta(self, state: _Open, delta: dict[str, Any]) -> Iterator[Part]:
        yield from self._text(state, _str(delta.get("thinking")))

    def _signature_delta(self, state: _Open, delta: dict[str, Any]) -> Iterator[Part]:
        state.signature.append(_str(delta.get("signature")))
        return iter(())

    def _cite(self, state: _Open, cite: Any) -> Iterator[Part]:
        yield _citation(state.key, cite, self.v, state.line)

    def _citations_delta(self, state: _Open, delta: dict[str, Any]) -> Iterator[Part]:
        cite = delta.get("citation")
        yield from self._cite(state, cite)
        state.citations.append(cite)

    def _json_delta(self, state: _Open, delta: dict[str, Any]) -> Iterator[Part]:
        state.json.append(_str(delta.get("partial_json")))
        return iter(())

    DELTAS: dict[tuple[str, str], Callable[[_Stream, _Open, dict[str, Any]], Iterator[Part]]] = {
        ("text", "text_delta"): _text_delta,
        ("text", "citations_delta"): _citations_delta,
        ("thinking", "thinking_delta"): _thinking_delta,
        ("thinking", "signature_delta"): _signature_delta,
        ("tool_use", "input_json_delta"): _json_delta,
        ("server_tool_use", "input_json_delta"): _json_delta,
    }

    # -- reconstruction ------------------------------------------------------------------------

    def _state(self, event: dict[str, Any], line: int) -> _Open:
        index = event.get("index")
        state = self.open.get(index) if isinstance(index, int) else None
        if state is None:
            raise MalformedInput(f"{event['type']} for content block {index!r} not open", line=line)
        return state

    def _delta(self, event: dict[str, Any]) -> Payload:
        return self.v.payload(DELTA, event.get("delta"))

    def _text_value(self, state: _Open) -> dict[str, Any]:
        value = {**state.block, "text": "".join(state.text)}
        if state.citations or "citations" in state.block:
            value["citations"] = state.citations
        return value

    def _thinking_value(self, state: _Open) -> dict[str, Any]:
        signature = "".join(state.signature) or _str(state.block.get("signature"))
        return {**state.block, "thinking": "".join(state.text), "signature": signature}

    def _tool_value(self, state: _Open, *, cut: bool = False) -> dict[str, Any]:
        raw = "".join(state.json)
        if not raw.strip():
            return state.block  # no input deltas: the start block's input is the input
        if cut:
            return {**state.block, "input": _lenient_object(raw)}
        try:
            args: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            # Complete but invalid JSON (fine-grained tool streaming can send it): a client
            # call keeps the raw string; a hosted call gets what can be read of it.
            args = raw if state.type == "tool_use" else _lenient_object(raw)
        return {**state.block, "input": args}

    def _unknown(self, state: _Open) -> Artifact:
        if state.deltas:
            value = {"content_block": state.block, "deltas": state.deltas}
            payload = self.v.payload(STREAMED_BLOCK, value)
        else:
            payload = self.v.payload(BLOCK, state.block)
        return _artifact(state.type, f"unknown content block {state.type}", payload)

    def _flush(self) -> Iterator[Part]:
        """The stream ended early: hosted calls are known to have started; text stays open."""
        for index in sorted(self.open):
            state = self.open[index]
            if state.type == "server_tool_use":
                yield from _whole_block(
                    state.key, self._tool_value(state, cut=True), self.v, state.line
                )
            elif state.type not in WHOLE_BLOCKS:
                yield self._unknown(state)
        self.open.clear()


# ---------------------------------------------------------------------------------------------
# Entry points


def parse(wire: WireInput, context: WireContext) -> Iterator[Part]:
    # The inner generator itself, not one wrapping it (every part would pass through both);
    # the context is still read only once iteration begins.
    if wire.kind == "body" and not _is_stream_event(wire.rows[0]):
        return _body(Frame(*wire.rows[0]), context)
    return _Stream(context).parse(wire.rows)


def _is_stream_event(row: tuple[Any, ...]) -> bool:
    """A lone stream event read as a body: a stream of one line, e.g. cut after its first."""
    data = Frame(*row).data
    return isinstance(data, dict) and data.get("type") in {
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop", "ping",
    }


def decode(payload_value: dict, format: str) -> None:
    """Raise ValueError when a stored payload of ``format`` cannot be read by this adapter."""
    if format not in FORMATS:
        raise ValueError(f"unknown anthropic payload format {format!r}")
    if not isinstance(payload_value, dict):
        raise ValueError(f"{format}: the value must be a JSON object")
    if format == STREAMED_BLOCK:
        if not isinstance(payload_value.get("content_block"), dict) or not isinstance(
            payload_value.get("deltas"), list
        ):
            raise ValueError(f"{format}: needs a 'content_block' object and a 'deltas' list")
        payload_value = payload_value["content_block"]
    if format == STOP:
        if "stop_reason" not in payload_value:
            raise ValueError(f"{format}: needs a 'stop_reason'")
        return
    kind = payload_value.get("type")
    if not isinstance(kind, str):
        raise ValueError(f"{format}: needs a string 'type'")
    if format == ERROR and kind != "error":
        raise ValueError(f"{format}: type must be 'error', got {kind!r}")
    if format in {BLOCK, STREAMED_BLOCK}:
        missing = [f for f in _REQUIRED.get(kind, ()) if f not in payload_value]
        if missing:
            raise ValueError(f"{format}: a {kind} block lacks {', '.join(missing)}")


_REQUIRED: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "thinking": ("thinking",),
    "redacted_thinking": ("data",),
    "tool_use": ("id", "name", "input"),
    "server_tool_use": ("id", "name", "input"),
    **dict.fromkeys(RESULT_BLOCKS, ("tool_use_id", "content")),
}
