"""Anthropic Messages responses: a non-streaming body, or a stream of events (SSE or JSON lines)
rebuilt block by block. Blocks read whole are in ``providers.anthropic.blocks``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from providers.anthropic.blocks import (
    BLOCK,
    DELTA,
    ERROR,
    FORMATS,
    RESULT_BLOCKS,
    STOP,
    STREAMED_BLOCK,
    WHOLE_BLOCKS,
    Versions,
    artifact,
    citation,
    error_parts,
    lenient_object,
    message_end,
    response_start,
    result_block,
    server_tool_usage,
    whole_block,
)
from providers.protocol import ResponseParser, WireContext
from providers.values import as_str
from providers.wire import DONE, Row, WireKind
from streams.errors import MalformedInput
from streams.parts import Artifact, BlockEnd, BlockStart, Part, TextDelta, Usage

# Stream event types (a lone one read as a body is still a stream: e.g. cut after its first).
_STREAM_EVENTS = {
    "message_start", "content_block_start", "content_block_delta", "content_block_stop",
    "message_delta", "message_stop", "ping",
}
_BEFORE_START = {"message_start", "ping", "error"}  # what may come before message_start


def parser(context: WireContext, kind: WireKind, first: Row) -> ResponseParser:
    """The parser for one response, from its first row: a body, or a stream."""
    data = first[1]
    if kind == "body" and not (isinstance(data, dict) and data.get("type") in _STREAM_EVENTS):
        return _Body(context)
    return _Stream(context)


# ---------------------------------------------------------------------------------------------
# Non-streaming bodies


class _Body:
    """A whole message (or an error body): one row."""

    def __init__(self, context: WireContext) -> None:
        self.context = context
        self.v = Versions.of(context)

    def feed(self, row: Row) -> Iterator[Part]:
        line, message, _ = row
        v = self.v
        kind = message.get("type")
        if kind == "error":
            yield from error_parts(message, v)
            return
        if kind != "message" or not isinstance(message.get("content"), list):
            raise MalformedInput(
                f"expected an Anthropic message (type 'message' with a 'content' list), "
                f"got type {kind!r}",
                line=line,
            )
        yield response_start(message, self.context)
        for position, block in enumerate(message["content"]):
            yield from whole_block(f"b{position}", block, v, line)
        if usage := server_tool_usage(message.get("usage")):
            yield usage
        stop = {
            k: message[k] for k in ("stop_reason", "stop_sequence", "stop_details") if k in message
        }
        yield from message_end(stop, v)

    def close(self) -> tuple[Part, ...]:
        return ()


# ---------------------------------------------------------------------------------------------
# Streams


class _Open:
    """A content block whose content_block_stop has not arrived yet."""

    __slots__ = (
        "block", "citations", "deltas", "json", "key", "line", "on_delta", "pending", "signature",
        "text", "text_delta", "text_field", "type",
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
        # The delta that streams this block's text ("text_delta" with its "text", or
        # "thinking_delta" with its "thinking"; None for other blocks), and any other delta
        # this block's type understands: delta type -> handler.
        self.text_delta: str | None
        self.text_delta, self.text_field = _TEXT_DELTAS.get(self.type, (None, ""))
        self.on_delta = _DELTAS.get(self.type, {})
        # A text or thinking block's BlockStart, held until its first text (or citation): an
        # empty text block is no message, and thinking the API leaves out (no text, only a
        # signature) is redacted reasoning, known only at its stop.
        self.pending: BlockStart | None = None


# Handlers return a tuple, not a generator: one runs for almost every event of a stream, and a
# tuple is cheaper to make and to consume.
_Parts = tuple[Part, ...]


class _Stream:
    """A Messages stream, event by event."""

    def __init__(self, context: WireContext) -> None:
        self.context = context
        self.v = Versions.of(context)
        self.started = False
        self.finished = False  # message_stop or error: whatever follows is not read
        self.open: dict[int, _Open] = {}
        self.keys: set[str] = set()
        self.stop: dict[str, Any] = {}
        # Usage a whole message in message_start carried, reported unless a message_delta
        # (whose usage is the final count) follows.
        self.start_usage: Usage | None = None

    def feed(self, row: Row) -> Iterable[Part]:
        if self.finished:
            return ()
        line, event, _name = row
        if isinstance(event, dict):
            kind = event.get("type")
        elif event is DONE:
            return ()
        else:
            kind = None
        if not isinstance(kind, str):
            raise MalformedInput(
                "expected an Anthropic stream event (a JSON object with a string 'type')",
                line=line,
            )
        if not self.started and kind not in _BEFORE_START:
            raise MalformedInput(
                f"expected 'message_start' first, got {kind!r}: "
                "is this an Anthropic Messages stream?",
                line=line,
            )
        handler = _EVENTS.get(kind)
        if handler is None:
            return ()  # unknown event types are skipped, as Anthropic advises
        return handler(self, event, line)

    def close(self) -> Iterable[Part]:
        """The input ended: without message_stop, the stream was cut."""
        if self.finished:
            return ()
        return self._flush()

    # -- events --------------------------------------------------------------------------------

    def _message_start(self, event: dict[str, Any], line: int) -> Iterable[Part]:
        message = event.get("message")
        if self.started or not isinstance(message, dict):
            raise MalformedInput("a message_start must come once and carry a 'message'", line=line)
        self.started = True
        content = message.get("content")
        if not content:
            return (response_start(message, self.context),)
        # The message may arrive with its content (and its stop_reason) already in it, e.g. a
        # programmatic tool call: read those blocks whole, keyed apart from streamed ones.
        if not isinstance(content, list):
            raise MalformedInput("message_start 'content' must be a list", line=line)
        if message.get("stop_reason") is not None:
            self.stop = {
                k: message[k] for k in ("stop_reason", "stop_sequence", "stop_details")
                if k in message
            }
            self.start_usage = server_tool_usage(message.get("usage"))
        parts: list[Part] = [response_start(message, self.context)]
        for position, block in enumerate(content):
            parts.extend(whole_block(f"m{position}", block, self.v, line))
        return parts

    def _block_start(self, event: dict[str, Any], line: int) -> Iterable[Part]:
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
            state.pending = BlockStart(key, "message")
            cites = block.get("citations") or ()
            state.citations = list(cites)
            opened = self._text(state, as_str(block.get("text")))
            if not cites:
                return opened
            return (
                *opened, *self._open(state),
                *(citation(key, cite, self.v, line) for cite in cites),
            )
        if kind == "thinking":
            state.pending = BlockStart(key, "reasoning")
            return self._text(state, as_str(block.get("thinking")))
        if kind == "redacted_thinking":
            payload = self.v.payload(BLOCK, block)
            return (BlockStart(key, "reasoning", redacted=True, payload=payload),)
        if kind in RESULT_BLOCKS:
            # Result blocks arrive whole in content_block_start: report them now.
            return result_block(key, block, self.v, line)
        return ()

    def _block_delta(self, event: dict[str, Any], line: int) -> _Parts:
        state = self._state(event, line)
        delta = event.get("delta")
        kind = delta.get("type") if isinstance(delta, dict) else None
        if kind is not None and kind == state.text_delta:  # the bulk of a stream
            text = delta.get(state.text_field)  # type: ignore[union-attr]
            return self._text(state, text if isinstance(text, str) else "")
        handler = state.on_delta.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            return handler(self, state, delta)  # type: ignore[arg-type]
        if state.type in WHOLE_BLOCKS:
            # A delta this version does not understand on a known block: keep it whole.
            payload = self.v.payload(DELTA, delta)
            return (artifact(f"delta:{kind}", f"unknown delta on {state.type}", payload),)
        state.deltas.append(delta)  # an unknown block: its deltas ride in its Artifact
        return ()

    def _block_stop(self, event: dict[str, Any], line: int) -> Iterable[Part]:
        state = self._state(event, line)
        del self.open[event["index"]]
        kind = state.type
        if kind == "text":
            if state.pending is not None:
                return ()  # an empty text block (no text, no citations) is no message
            return (BlockEnd(state.key, self.v.payload(BLOCK, self._text_value(state))),)
        if kind == "thinking":
            payload = self.v.payload(BLOCK, self._thinking_value(state))
            if state.pending is not None:  # no text at all: the thinking was left out
                start = BlockStart(state.key, "reasoning", True, payload)
                return (start, BlockEnd(state.key, payload))
            return (BlockEnd(state.key, payload),)
        if kind == "redacted_thinking":
            return (BlockEnd(state.key, self.v.payload(BLOCK, state.block)),)
        if kind in _TOOL_BLOCKS:
            return whole_block(state.key, self._tool_value(state), self.v, state.line)
        if kind not in RESULT_BLOCKS:
            return (self._unknown(state),)
        return ()

    def _message_delta(self, event: dict[str, Any], line: int) -> _Parts:
        delta = event.get("delta")
        if isinstance(delta, dict):
            self.stop = delta
        self.start_usage = None
        usage = server_tool_usage(event.get("usage"))
        return (usage,) if usage else ()

    def _message_stop(self, event: dict[str, Any], line: int) -> Iterable[Part]:
        self.finished = True
        if self.start_usage is not None:
            return (self.start_usage, *message_end(self.stop, self.v))
        return message_end(self.stop, self.v)

    def _ping(self, event: dict[str, Any], line: int) -> _Parts:
        return ()

    def _error_event(self, event: dict[str, Any], line: int) -> _Parts:
        self.finished = True
        return (*self._flush(), *error_parts(event, self.v))

    # -- deltas --------------------------------------------------------------------------------

    @staticmethod
    def _text(state: _Open, text: str) -> _Parts:
        state.text.append(text)
        if not text:
            return ()
        if state.pending is not None:  # the block opens with its first text
            start, state.pending = state.pending, None
            return (start, TextDelta(state.key, text))
        return (TextDelta(state.key, text),)

    @staticmethod
    def _open(state: _Open) -> _Parts:
        """The held BlockStart, if the block has not opened yet (a citation opens it too)."""
        if state.pending is None:
            return ()
        start, state.pending = state.pending, None
        return (start,)

    def _signature_delta(self, state: _Open, delta: dict[str, Any]) -> _Parts:
        state.signature.append(as_str(delta.get("signature")))
        return ()

    def _citations_delta(self, state: _Open, delta: dict[str, Any]) -> _Parts:
        cite = delta.get("citation")
        part = citation(state.key, cite, self.v, state.line)
        state.citations.append(cite)
        return (*self._open(state), part) if state.pending is not None else (part,)

    def _json_delta(self, state: _Open, delta: dict[str, Any]) -> _Parts:
        state.json.append(as_str(delta.get("partial_json")))
        return ()

    # -- reconstruction ------------------------------------------------------------------------

    def _state(self, event: dict[str, Any], line: int) -> _Open:
        index = event.get("index")
        state = self.open.get(index) if isinstance(index, int) else None
        if state is None:
            raise MalformedInput(f"{event['type']} for content block {index!r} not open", line=line)
        return state

    def _text_value(self, state: _Open) -> dict[str, Any]:
        value = {**state.block, "text": "".join(state.text)}
        if state.citations or "citations" in state.block:
            value["citations"] = state.citations
        return value

    def _thinking_value(self, state: _Open) -> dict[str, Any]:
        signature = "".join(state.signature) or as_str(state.block.get("signature"))
        return {**state.block, "thinking": "".join(state.text), "signature": signature}

    def _tool_value(self, state: _Open, *, cut: bool = False) -> dict[str, Any]:
        raw = "".join(state.json)
        if not raw.strip():
            return state.block  # no input deltas: the start block's input is the input
        if cut:
            return {**state.block, "input": lenient_object(raw)}
        try:
            args: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            # Complete but invalid JSON (fine-grained tool streaming can send it): a client
            # call keeps the raw string; a hosted call gets what can be read of it.
            args = raw if state.type == "tool_use" else lenient_object(raw)
        return {**state.block, "input": args}

    def _unknown(self, state: _Open) -> Artifact:
        if state.deltas:
            value = {"content_block": state.block, "deltas": state.deltas}
            payload = self.v.payload(STREAMED_BLOCK, value)
        else:
            payload = self.v.payload(BLOCK, state.block)
        return artifact(state.type, f"unknown content block {state.type}", payload)

    def _flush(self) -> list[Part]:
        """The stream ended early: hosted calls are known to have started; text stays open."""
        parts: list[Part] = []
        for index in sorted(self.open):
            state = self.open[index]
            if state.type in _HOSTED_CALL_BLOCKS:
                value = self._tool_value(state, cut=True)
                parts.extend(whole_block(state.key, value, self.v, state.line))
            elif state.type not in WHOLE_BLOCKS:
                parts.append(self._unknown(state))
        self.open.clear()
        return parts


_Event = Callable[[_Stream, dict[str, Any], int], Iterable[Part]]
_EVENTS: dict[str, _Event] = {
    "message_start": _Stream._message_start,
    "content_block_start": _Stream._block_start,
    "content_block_delta": _Stream._block_delta,
    "content_block_stop": _Stream._block_stop,
    "message_delta": _Stream._message_delta,
    "message_stop": _Stream._message_stop,
    "ping": _Stream._ping,
    "error": _Stream._error_event,
}

_TEXT_DELTAS: dict[str, tuple[str | None, str]] = {
    "text": ("text_delta", "text"),
    "thinking": ("thinking_delta", "thinking"),
}
_Delta = Callable[[_Stream, _Open, dict[str, Any]], _Parts]
# Block type -> delta type -> handler, besides its text delta; any other delta on a known
# block is kept whole.
_DELTAS: dict[str, dict[str, _Delta]] = {
    "text": {"citations_delta": _Stream._citations_delta},
    "thinking": {"signature_delta": _Stream._signature_delta},
    "tool_use": {"input_json_delta": _Stream._json_delta},
    "server_tool_use": {"input_json_delta": _Stream._json_delta},
    "mcp_tool_use": {"input_json_delta": _Stream._json_delta},
}
# Blocks whose input streams as JSON: read whole at their stop. A hosted call cut before its
# stop is still known to have started (a client call is never handed over half-read).
_HOSTED_CALL_BLOCKS = ("server_tool_use", "mcp_tool_use")
_TOOL_BLOCKS = ("tool_use", *_HOSTED_CALL_BLOCKS)


# ---------------------------------------------------------------------------------------------
# Stored payloads


def decode(payload_value: dict[str, Any], format: str) -> None:
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
    "mcp_tool_use": ("id", "name", "input"),
    **dict.fromkeys(RESULT_BLOCKS, ("tool_use_id", "content")),
}
