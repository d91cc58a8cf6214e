"""Anthropic Messages content blocks read whole: a non-streaming body's ``content``, and a
streamed block once ``content_block_stop`` has rebuilt it (``providers.anthropic.messages``).

Also what both shapes share: the wire contract in force (``Versions``), citations, the end of a
message (``stop_reason``) and the ``error`` object. The mapping is described in
``providers.anthropic``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from providers import served
from providers.protocol import WireContext
from providers.values import as_int, as_list, as_str, clip, count, output_text
from streams.errors import MalformedInput
from streams.parts import (
    Activity,
    Artifact,
    BlockEnd,
    BlockStart,
    Citation,
    Part,
    Payload,
    Refusal,
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
_PRODUCER = __package__ or __name__  # the adapter package is the producer
for _reason in {*END_REASON_MAP.values(), "error"}:
    END_REASONS.register(_reason, producer=_PRODUCER)

# server_tool_use name -> (registered activity name, the request tool family that versions it).
# Bash and the text editor run inside code execution (its code_execution_20250825 tool).
HOSTED_TOOLS: dict[str, tuple[str, str]] = {
    "web_search": ("web_search", "web_search"),
    "web_fetch": ("web_fetch", "web_fetch"),
    "code_execution": ("code_execution", "code_execution"),
    "bash_code_execution": ("code_execution", "code_execution"),
    "text_editor_code_execution": ("code_execution", "code_execution"),
    "advisor": ("advisor", "advisor"),
    "tool_search_tool_bm25": ("tool_search", "tool_search_tool_bm25"),
    "tool_search_tool_regex": ("tool_search", "tool_search_tool_regex"),
}
# An MCP connector call (``mcp_tool_use``, its server in ``server_name``): run by Anthropic.
MCP_CALL = "mcp_call"
# *_tool_result type -> (activity name, the request tool families that may version it).
RESULT_BLOCKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "web_search_tool_result": ("web_search", ("web_search",)),
    "web_fetch_tool_result": ("web_fetch", ("web_fetch",)),
    "code_execution_tool_result": ("code_execution", ("code_execution",)),
    "bash_code_execution_tool_result": ("code_execution", ("code_execution",)),
    "text_editor_code_execution_tool_result": ("code_execution", ("code_execution",)),
    "advisor_tool_result": ("advisor", ("advisor",)),
    "tool_search_tool_result": ("tool_search", ("tool_search_tool_bm25", "tool_search_tool_regex")),
    "mcp_tool_result": (MCP_CALL, ()),
}
for _name in sorted({name for name, _ in HOSTED_TOOLS.values()} | {MCP_CALL}):
    ACTIVITY_NAMES.register(_name, producer=_PRODUCER)

_TOOL_VERSION = re.compile(r"^([a-z_]+?)_(\d{8})$")


# ---------------------------------------------------------------------------------------------
# Shared by bodies and streams


def artifact(kind: str, summary: str, payload: Payload) -> Artifact:
    return Artifact(type=kind, summary=summary, payload=payload)


def response_start(message: dict[str, Any], context: WireContext) -> ResponseStart:
    # The served model, as the response names it (never the request's); the provider that
    # served it (Anthropic, or Claude on Vertex AI: ``providers.served``).
    return ResponseStart(
        provider=served.provider(context, PROVIDER), model=as_str(message.get("model")),
        response_id=as_str(message.get("id")),
    )


def lenient_object(text: str) -> dict[str, Any]:
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
class Versions:
    """The wire contract in force: API version, plus hosted tool versions from the request."""

    api: str
    tools: dict[str, str]

    @classmethod
    def of(cls, context: WireContext) -> Versions:
        tools: dict[str, str] = {}
        request = context.request if isinstance(context.request, dict) else {}
        for tool in request.get("tools") or ():
            kind = as_str(tool.get("type")) if isinstance(tool, dict) else ""
            match = _TOOL_VERSION.match(kind)
            if match:  # e.g. web_search_20250305 -> family web_search
                tools.setdefault(match.group(1), kind)
        return cls(context.api_version or DEFAULT_API_VERSION, tools)

    def payload(self, fmt: str, value: Any, tool: str | tuple[str, ...] | None = None) -> Payload:
        """The payload of ``value``, versioned by the first of the hosted tool families
        ``tool`` names that the request declared."""
        for family in (tool,) if isinstance(tool, str) else tool or ():
            if family in self.tools:
                return Payload(PROVIDER, fmt, f"{self.api}+{self.tools[family]}", value)
        return Payload(PROVIDER, fmt, self.api, value)


# ---------------------------------------------------------------------------------------------
# Whole blocks (non-streaming bodies, and streamed blocks once reconstructed)


def citation(key: str, cite: Any, versions: Versions, line: int) -> Citation:
    if not isinstance(cite, dict):
        raise MalformedInput("a citation must be a JSON object", line=line)
    kind = as_str(cite.get("type"))
    excerpt = as_str(cite.get("cited_text"))
    if kind == "web_search_result_location":
        url, title = as_str(cite.get("url")), as_str(cite.get("title"))
    elif kind in {"char_location", "page_location", "content_block_location"}:
        # Document citations: the indexes address the source document, not our text.
        url, title = "", as_str(cite.get("document_title"))
    elif kind == "search_result_location":
        source = as_str(cite.get("source"))
        url = source if source.startswith(("http://", "https://")) else ""
        title = as_str(cite.get("title")) or source
    else:  # a future citation type: keep what reads like a source, the rest rides in replay
        url = as_str(cite.get("url"))
        title = as_str(cite.get("title")) or as_str(cite.get("document_title"))
    tool = "web_search" if kind == "web_search_result_location" else None
    # Positional: Citation(key, url, title, excerpt, start, end, unit, quote, replay)
    return Citation(
        key, url, title, excerpt, None, None, "codepoint", None,
        versions.payload(CITATION, cite, tool),
        pages=page_span(cite) if kind == "page_location" else None,
    )


def page_span(cite: dict[str, Any]) -> tuple[int, int] | None:
    """A ``page_location``'s pages as (first, last), inclusive: Anthropic numbers pages from 1
    and its ``end_page_number`` is exclusive (pages 1-2 is page 1 alone)."""
    start, end = cite.get("start_page_number"), cite.get("end_page_number")
    if not isinstance(start, int) or isinstance(start, bool) or start < 1:
        return None
    if not isinstance(end, int) or isinstance(end, bool) or end <= start:
        return (start, start)  # no usable end: the page the passage starts on
    return (start, end - 1)


def _text_block(key: str, block: dict[str, Any], v: Versions, line: int) -> Iterator[Part]:
    text, cites = as_str(block.get("text")), block.get("citations") or ()
    if not text and not cites:
        return  # an empty text block is no message
    yield BlockStart(key, "message")
    if text:
        yield TextDelta(key, text)
    for cite in cites:
        yield citation(key, cite, v, line)
    yield BlockEnd(key, v.payload(BLOCK, block))


def _thinking_block(key: str, block: dict[str, Any], v: Versions, line: int) -> Iterator[Part]:
    text = as_str(block.get("thinking"))
    if not text:
        # Thinking the API leaves out (an empty ``thinking`` with its signature): reasoning
        # whose content is opaque, like redacted_thinking.
        yield from _redacted_block(key, block, v, line)
        return
    yield BlockStart(key, "reasoning")
    yield TextDelta(key, text)
    yield BlockEnd(key, v.payload(BLOCK, block))


def _redacted_block(key: str, block: dict[str, Any], v: Versions, line: int) -> Iterator[Part]:
    payload = v.payload(BLOCK, block)
    yield BlockStart(key, "reasoning", redacted=True, payload=payload)
    yield BlockEnd(key, payload)


def _tool_use_block(key: str, block: dict[str, Any], v: Versions, line: int) -> Iterator[Part]:
    call_id, name = block.get("id"), block.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise MalformedInput("a tool_use block needs string 'id' and 'name'", line=line)
    yield ToolCall(
        call_id=call_id, name=name, arguments=block.get("input"), payload=v.payload(BLOCK, block)
    )


def _server_tool_block(key: str, block: dict[str, Any], v: Versions, line: int) -> Iterator[Part]:
    call_id, tool = block.get("id"), block.get("name")
    if not isinstance(call_id, str) or not isinstance(tool, str):
        raise MalformedInput("a server_tool_use block needs string 'id' and 'name'", line=line)
    hosted = HOSTED_TOOLS.get(tool)
    if hosted is None:  # a hosted tool this version does not know
        yield artifact("server_tool_use", f"hosted tool {tool}", v.payload(BLOCK, block))
        return
    name, family = hosted
    args = block.get("input")
    yield Activity(
        activity_id=call_id,
        name=name,
        state="started",
        input=args if isinstance(args, dict) else {},
        payload=v.payload(BLOCK, block, family),
    )


def _mcp_tool_block(key: str, block: dict[str, Any], v: Versions, line: int) -> Iterator[Part]:
    """An MCP connector call: which server, which of its tools, with what arguments."""
    call_id, tool = block.get("id"), block.get("name")
    if not isinstance(call_id, str) or not isinstance(tool, str):
        raise MalformedInput("an mcp_tool_use block needs string 'id' and 'name'", line=line)
    described = {"server": as_str(block.get("server_name")), "tool": tool,
                 "arguments": block.get("input")}
    yield Activity(call_id, MCP_CALL, "started", described, payload=v.payload(BLOCK, block))


def result_block(key: str, block: dict[str, Any], v: Versions, line: int) -> Iterator[Part]:
    kind = as_str(block.get("type"))
    name, families = RESULT_BLOCKS[kind]
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise MalformedInput(f"a {kind} block needs a string 'tool_use_id'", line=line)
    payload = v.payload(BLOCK, block, families)
    content = block.get("content")
    if isinstance(content, dict) and (
        "error_code" in content or as_str(content.get("type")).endswith("error")
    ):
        # A hosted tool error is a 200 response with an error object instead of a result.
        code = as_str(content.get("error_code")) or "error"
        message = as_str(content.get("error_message"))
        output = {"error": output_text(message)} if message else None
        yield Activity(call_id, name, "failed", summary=code, error_code=code, payload=payload,
                       output=output)
        return
    if kind == "mcp_tool_result":
        state, summary, sources, error_code, output = _mcp_summary(content, block)
    else:
        state, summary, sources, error_code, output = _SUMMARIZERS[name](content)
    # Positional: Activity(activity_id, name, state, input, summary, sources, error_code,
    # payload, output)
    yield Activity(call_id, name, state, {}, summary, sources, error_code, payload, output)


# state, summary, sources, error code, output
_Summary = tuple[Any, str, tuple[dict[str, str], ...], str, dict[str, Any] | None]


def _search_summary(content: Any) -> _Summary:
    results = [r for r in content if isinstance(r, dict)] if isinstance(content, list) else []
    if not results:
        return "completed", "no results", (), "", None  # an empty list: searched, found nothing
    # One comprehension with the string checks inline: a search returns many results.
    sources = tuple([
        {
            "url": url if isinstance(url, str) else "",
            "title": title if isinstance(title := r.get("title"), str) else "",
        }
        for r in results
        if (url := r.get("url"))
    ])
    return "completed", count(len(results), "result"), sources, "", None


def _fetch_summary(content: Any) -> _Summary:
    if not isinstance(content, dict):
        return "completed", "", (), "", None
    url = as_str(content.get("url"))
    document = content.get("content")
    title = as_str(document.get("title")) if isinstance(document, dict) else ""
    sources = ({"url": url, "title": title},) if url else ()
    return "completed", clip(title or url), sources, "", None


def _run_output(content: dict[str, Any]) -> dict[str, Any]:
    """A run's stdout, stderr and return code, as far as the result gives them."""
    output: dict[str, Any] = {}
    for field, key in (("stdout", "text"), ("stderr", "stderr")):
        if text := as_str(content.get(field)):
            output[key] = output_text(text)
    code = as_int(content.get("return_code"))
    if code is not None:
        output["return_code"] = code
    return output


def _code_summary(content: Any) -> _Summary:
    """Code that ran and raised (return_code != 0) still completed; `failed` is for an error
    object (the tool did not run) or an aborted run."""
    if not isinstance(content, dict):
        return "completed", "", (), "", None
    output = _run_output(content)
    abort = as_str(content.get("abort_reason"))
    if abort:
        return "failed", abort, (), abort, output or None
    kind = as_str(content.get("type"))
    if "return_code" in content:
        summary = f"exit code {content['return_code']}"
        lines = [s for s in as_str(content.get("stderr")).splitlines() if s.strip()]
        if content["return_code"] != 0 and lines:
            summary = f"{summary}: {lines[-1].strip()}"
        return "completed", clip(summary), (), "", output or None
    if kind == "text_editor_code_execution_create_result" and content.get("is_file_update"):
        return "completed", "updated file", (), "", None
    if kind == "text_editor_code_execution_view_result":
        text = as_str(content.get("content"))
        return "completed", "viewed file", (), "", {"text": output_text(text)} if text else None
    if kind == "text_editor_code_execution_str_replace_result":
        lines = [line for line in as_list(content.get("lines")) if isinstance(line, str)]
        shown = {"text": output_text("\n".join(lines))} if lines else None
        return "completed", "edited file", (), "", shown
    return "completed", _EDITOR_SUMMARIES.get(kind, ""), (), "", None


def _advice_summary(content: Any) -> _Summary:
    """The advisor's answer (``advisor_result``: its text)."""
    text = as_str(content.get("text")) if isinstance(content, dict) else ""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return "completed", clip(first), (), "", {"text": output_text(text)} if text else None


def _tool_search_summary(content: Any) -> _Summary:
    """The tools a tool search found (``tool_references``), by name."""
    references = as_list(content.get("tool_references")) if isinstance(content, dict) else []
    names = [as_str(r.get("tool_name")) for r in references if isinstance(r, dict)]
    names = [name for name in names if name]
    summary = count(len(names), "tool") if names else "no tools found"
    return "completed", summary, (), "", {"tools": names}


def _mcp_summary(content: Any, block: dict[str, Any]) -> _Summary:
    """An MCP result: its text blocks; ``is_error`` says the tool reported an error."""
    texts = [as_str(c.get("text")) for c in as_list(content) if isinstance(c, dict)]
    if isinstance(content, str):
        texts = [content]
    text = "\n\n".join(t for t in texts if t)
    first = clip(next((line.strip() for line in text.splitlines() if line.strip()), ""))
    if block.get("is_error") is True:
        return "failed", first or "tool error", (), "tool_error", (
            {"error": output_text(text)} if text else None
        )
    return "completed", first, (), "", {"text": output_text(text)} if text else None


_EDITOR_SUMMARIES = {
    "text_editor_code_execution_view_result": "viewed file",
    "text_editor_code_execution_create_result": "created file",
    "text_editor_code_execution_str_replace_result": "edited file",
}

_SUMMARIZERS: dict[str, Callable[[Any], _Summary]] = {
    "web_search": _search_summary,
    "web_fetch": _fetch_summary,
    "code_execution": _code_summary,
    "advisor": _advice_summary,
    "tool_search": _tool_search_summary,
}

_BlockHandler = Callable[[str, dict[str, Any], Versions, int], Iterator[Part]]
WHOLE_BLOCKS: dict[str, _BlockHandler] = {
    "text": _text_block,
    "thinking": _thinking_block,
    "redacted_thinking": _redacted_block,
    "tool_use": _tool_use_block,
    "server_tool_use": _server_tool_block,
    "mcp_tool_use": _mcp_tool_block,
    **dict.fromkeys(RESULT_BLOCKS, result_block),
}


def whole_block(key: str, block: Any, v: Versions, line: int) -> Iterator[Part]:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise MalformedInput(
            "a content block must be a JSON object with a string 'type'", line=line
        )
    handler = WHOLE_BLOCKS.get(block["type"])
    if handler is None:
        yield artifact(
            block["type"], f"unknown content block {block['type']}", v.payload(BLOCK, block)
        )
        return
    yield from handler(key, block, v, line)


def server_tool_usage(usage: Any) -> Usage | None:
    """``usage.server_tool_use``: how many hosted calls the message made (diagnostics)."""
    counters = usage.get("server_tool_use") if isinstance(usage, dict) else None
    if not isinstance(counters, dict):
        return None
    return Usage(
        {k: v for k, v in counters.items() if isinstance(v, int) and not isinstance(v, bool)}
    )


def message_end(stop: dict[str, Any], v: Versions) -> Iterator[Part]:
    """ResponseEnd for a stop_reason; an unknown reason is kept whole in an Artifact first,
    and a refusal's ``stop_details`` (category, explanation) come first as a Refusal."""
    reason = stop.get("stop_reason")
    if reason is None:
        yield ResponseEnd(UNKNOWN_END_REASON)  # message_stop without a reason: it did finish
        return
    mapped = END_REASON_MAP.get(reason) if isinstance(reason, str) else None
    if mapped is None:
        yield artifact("stop_reason", f"unknown stop_reason {reason!r}", v.payload(STOP, stop))
        mapped = UNKNOWN_END_REASON
    details = stop.get("stop_details")
    if mapped == "refusal" and isinstance(details, dict):
        yield Refusal(
            as_str(details.get("category")), as_str(details.get("explanation")),
            v.payload(STOP, stop),
        )
    yield ResponseEnd(mapped)


def error_parts(event: dict[str, Any], v: Versions) -> Iterator[Part]:
    """An ``error`` event or body: the StreamError, then the end of the response."""
    error = event.get("error")
    error = error if isinstance(error, dict) else {}
    code = as_str(error.get("type")) or "error"
    yield StreamError(
        code=code, message=as_str(error.get("message")), payload=v.payload(ERROR, event)
    )
    yield ResponseEnd("error")
