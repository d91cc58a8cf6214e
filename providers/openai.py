"""OpenAI adapter: the Responses API and Chat Completions (streams and non-streaming bodies).

The wire is detected per input: Responses stream events carry ``type: "response.*"`` (or
``error``), a Responses body has ``object: "response"``; Chat Completions chunks and bodies carry
``object: "chat.completion.chunk"`` / ``"chat.completion"`` (OpenRouter and other compatible
gateways speak the same shape).

Responses API mapping:

* ``message`` item -> ONE ``message`` block keyed by the item id. Its content parts
  (``output_text``, ``refusal``) are joined with a blank line; citation offsets are shifted by the
  part's position, so they address the block's final text. ``BlockEnd`` carries the verbatim
  ``output_item.done`` item. A ``refusal`` part makes the end reason ``refusal``.
* ``url_citation`` -> ``Citation`` with ``start_index``/``end_index`` as a code-point range (the
  API counts characters) and no ``quote`` (OpenAI sends no copy of the segment).
  ``file_citation`` has no URL and only a single ``index`` (where the model put its marker):
  url "", title = filename, and NO range -- a zero-width range means nothing to the builder
  (``ranges.resolve`` treats it as no range), so the whole block is the cited span; the index
  stays in ``replay``. ``container_file_citation`` keeps its range. Every citation's ``replay``
  is the annotation object verbatim. Other annotation types (``file_path``) live only in the
  message payload.
* ``reasoning`` item -> a ``reasoning`` block (summary parts, and ``reasoning_text`` content
  when the model streams it, joined with a blank line). A reasoning item that finishes with no
  text at all (OpenAI hides reasoning unless a summary is requested; ``encrypted_content`` is
  opaque) is a REDACTED reasoning block: its data lives only in the payload (the whole item).
* ``web_search_call`` / ``file_search_call`` / ``code_interpreter_call`` -> hosted ``Activity``
  (``web_search`` / ``file_search`` / ``code_execution``). The streamed item names its input
  (``action``, ``queries``, ``code``) only in ``output_item.done``, so ``started`` is emitted
  there, followed by ``completed``/``failed`` per the item's ``status``. Any other status (Azure's
  ``web_search_preview`` finishes with ``status: "searching"`` and never sends ``.completed``)
  leaves the activity ``started``: a completion is never invented. A call cut before its
  ``output_item.done`` is emitted as ``started`` with what the added item said.
  web_search input = ``{"action": type, "query"/"queries"/"url"/"pattern": ...}``; search
  ``sources`` -> ``Activity.sources``.
* ``function_call`` / ``custom_tool_call`` -> ``ToolCall`` (at ``output_item.done`` only: a
  call cut mid-arguments is never handed to the host).
* Any other item type -> ``Artifact`` (kept whole). Unknown stream events are ignored (their
  items arrive whole in ``output_item.done``); ``obfuscation`` padding is ignored.
* ``response.completed`` -> ``ResponseEnd`` (``tool_use`` when the response holds a client tool
  call, ``refusal`` after a refusal part, else ``end_turn``); ``response.incomplete`` ->
  ``max_output_tokens`` -> ``max_tokens``, ``content_filter`` -> ``refusal``;
  ``error`` / ``response.failed`` -> one ``StreamError`` then ``ResponseEnd("error")``.
  ``usage`` -> ``Usage`` with the nested integer counters flattened to dotted keys.

Chat Completions mapping: ``delta.content``/``message.content`` (and ``refusal``) -> a message
block per choice; ``reasoning_content``/``reasoning`` (DeepSeek, OpenRouter) -> a reasoning
block; ``annotations[]`` ``url_citation`` -> ``Citation`` (a zero-length range such as
OpenRouter's ``0/0`` is no range; ``content`` is the excerpt); ``tool_calls`` -> ``ToolCall``;
``finish_reason`` stop/length/tool_calls/content_filter -> end_turn/max_tokens/tool_use/refusal.
``ResponseEnd`` comes at ``[DONE]``, or at the end of input once every choice has finished.

Provenance: ``ResponseStart.provider`` is "openai" unless the response shows another service
served it. Chat Completions chunks that carry a ``provider`` field come from OpenRouter (the field
names OpenRouter's upstream, e.g. "OpenAI", which stays in the payload): the provider is
"openrouter", the one that answered the call. Azure responses name no provider, so they are
"openai" too; the endpoint is not consulted, because provenance is read from the response.
``model`` is ``response.model`` / the chunk's ``model``.

Payload version: "v1", plus each hosted tool type the response (or the request) declares, e.g.
"v1+web_search_preview" or "v1+openrouter:web_search".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

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

PROVIDER = "openai"
API_VERSION = "v1"

ITEM = "openai.responses.output_item"  # a Responses output item, verbatim or as streamed so far
ANNOTATION = "openai.responses.annotation"  # one output_text annotation, verbatim
ERROR = "openai.error"  # an error object (`error` event, `response.error`, chunk `error`)
CHAT_MESSAGE = "openai.chat.message"  # choices[i].message, verbatim or reconstructed
CHAT_REASONING = "openai.chat.reasoning"  # {"reasoning_content"|"reasoning": text, ...}
CHAT_TOOL_CALL = "openai.chat.tool_call"  # one tool_calls[] entry
CHAT_ANNOTATION = "openai.chat.annotation"  # one message annotation, verbatim
FORMATS = (ITEM, ANNOTATION, ERROR, CHAT_MESSAGE, CHAT_REASONING, CHAT_TOOL_CALL, CHAT_ANNOTATION)

INCOMPLETE_REASONS = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}
# Only two incomplete reasons are documented; any other still means "stopped by a limit".
UNKNOWN_INCOMPLETE = "max_tokens"
FINISH_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
    "error": "error",
}
UNKNOWN_FINISH = "end_turn"  # the choice finished; a future reason is not an error
for _reason in ("end_turn", "max_tokens", "tool_use", "refusal", "error"):
    END_REASONS.register(_reason, producer=__name__)

HOSTED_ITEMS = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_execution",
}
for _name in sorted(set(HOSTED_ITEMS.values())):
    ACTIVITY_NAMES.register(_name, producer=__name__)

CLIENT_TOOL_ITEMS = ("function_call", "custom_tool_call")
CLIENT_TOOL_TYPES = {"function", "custom"}  # request/response tool types the host runs itself
PART_SEPARATOR = "\n\n"  # between the content parts of one message / summaries of one reasoning


# ---------------------------------------------------------------------------------------------
# Small helpers


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _require(data: dict[str, Any], key: str, kind: type, line: int, what: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise MalformedInput(
            f"{what}: expected {key!r} to be a {kind.__name__}, got {type(value).__name__}",
            line=line,
        )
    return value


def _flatten_usage(usage: Any, prefix: str = "") -> dict[str, int]:
    """Nested integer counters as one flat dict with dotted keys (floats such as cost skipped)."""
    out: dict[str, int] = {}
    if not isinstance(usage, dict):
        return out
    for key, value in usage.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten_usage(value, f"{name}."))
        elif _int(value) is not None:
            out[name] = value
    return out


def _tool_version(tools: Any) -> str:
    """ "v1" plus the hosted tool types in force, in declaration order."""
    hosted: list[str] = []
    for tool in tools if isinstance(tools, list) else ():
        kind = _str(tool.get("type")) if isinstance(tool, dict) else ""
        if kind and kind not in CLIENT_TOOL_TYPES and kind not in hosted:
            hosted.append(kind)
    return "+".join([API_VERSION, *hosted])


def _arguments(text: str) -> Any:
    """Function arguments are a JSON string; keep the string when it is not valid JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _range(start: Any, end: Any) -> tuple[int | None, int | None]:
    """A character range, or none at all when missing or zero-length (OpenRouter's 0/0)."""
    s, e = _int(start), _int(end)
    if s is None or e is None or e <= s or s < 0:
        return None, None
    return s, e


def _citation(
    key: str, annotation: dict[str, Any], offset: int, replay: Payload
) -> Citation | None:
    """A Responses annotation as a Citation on block ``key`` (part text begins at ``offset``)."""
    kind = annotation.get("type")
    if kind == "url_citation":
        start, end = _range(annotation.get("start_index"), annotation.get("end_index"))
        return Citation(
            key,
            url=_str(annotation.get("url")),
            title=_str(annotation.get("title")),
            start=None if start is None else start + offset,
            end=None if end is None else end + offset,
            unit="codepoint",
            replay=replay,
        )
    if kind == "file_citation":
        # A point (`index`), not a span: no range, the whole block is cited (see module doc).
        title = _str(annotation.get("filename")) or _str(annotation.get("file_id"))
        return Citation(key, url="", title=title, replay=replay)
    if kind == "container_file_citation":
        start, end = _range(annotation.get("start_index"), annotation.get("end_index"))
        title = _str(annotation.get("filename")) or _str(annotation.get("file_id"))
        return Citation(
            key,
            url="",
            title=title,
            start=None if start is None else start + offset,
            end=None if end is None else end + offset,
            replay=replay,
        )
    return None


# ---------------------------------------------------------------------------------------------
# Hosted activity descriptions


def _web_search_input(item: dict[str, Any]) -> dict[str, Any]:
    action = item.get("action")
    if not isinstance(action, dict):
        return {}
    described: dict[str, Any] = {}
    if isinstance(action.get("type"), str):
        described["action"] = action["type"]
    for key in ("query", "queries", "url", "pattern"):
        if action.get(key) is not None:
            described[key] = action[key]
    return described


def _web_search_result(item: dict[str, Any]) -> tuple[str, tuple[dict[str, str], ...]]:
    action = item.get("action") if isinstance(item.get("action"), dict) else {}
    kind = action.get("type")
    if kind == "open_page":
        return "page opened", ()
    if kind == "find_in_page":
        return "page searched", ()
    raw = action.get("sources")
    if not isinstance(raw, list):
        return "", ()  # sources are only sent when the request includes them
    sources = []
    for source in raw:
        if not isinstance(source, dict):
            continue
        # "url" sources carry a URL; "api" sources (e.g. oai-sports) only a name.
        sources.append({"url": _str(source.get("url")), "title": _str(source.get("name"))})
    return (_count(len(sources), "result") if sources else "no results"), tuple(sources)


def _file_search_input(item: dict[str, Any]) -> dict[str, Any]:
    queries = item.get("queries")
    return {"queries": queries} if isinstance(queries, list) else {}


def _file_search_result(item: dict[str, Any]) -> tuple[str, tuple[dict[str, str], ...]]:
    results = item.get("results")
    if not isinstance(results, list):
        return "", ()  # null unless the request includes file_search_call.results
    sources = tuple(
        {"url": "", "title": _str(r.get("filename")) or _str(r.get("file_id"))}
        for r in results
        if isinstance(r, dict)
    )
    return (_count(len(results), "result") if results else "no results"), sources


def _code_input(item: dict[str, Any]) -> dict[str, Any]:
    described = {}
    for key in ("code", "container_id"):
        if isinstance(item.get(key), str):
            described[key] = item[key]
    return described


def _code_result(item: dict[str, Any]) -> tuple[str, tuple[dict[str, str], ...]]:
    outputs = item.get("outputs")
    if not isinstance(outputs, list):
        return "", ()
    return (_count(len(outputs), "output") if outputs else "no output"), ()


_DESCRIBE: dict[str, tuple[Callable[[dict], dict], Callable[[dict], tuple]]] = {
    "web_search_call": (_web_search_input, _web_search_result),
    "file_search_call": (_file_search_input, _file_search_result),
    "code_interpreter_call": (_code_input, _code_result),
}


def _artifact_summary(item: dict[str, Any]) -> str:
    kind = _str(item.get("type")) or "item"
    status = _str(item.get("status"))
    return f"{kind} ({status})" if status else kind


# ---------------------------------------------------------------------------------------------
# Responses API


@dataclass(slots=True)
class _TextPart:
    offset: int  # where this part's text begins in the block's text
    chunks: list[str] = field(default_factory=list)  # its text as streamed so far

    @property
    def text(self) -> str:
        return "".join(self.chunks)


@dataclass
class _Item:
    """What the stream has said so far about one output item."""

    item: dict[str, Any]
    key: str
    block_open: bool = False
    done: bool = False
    activity_started: bool = False
    length: int = 0  # code points of block text emitted so far
    parts: dict[tuple[str, int], _TextPart] = field(default_factory=dict)
    cited: dict[int, set[int]] = field(default_factory=dict)  # content index -> annotation idx

    @property
    def type(self) -> str:
        return _str(self.item.get("type"))


class _Responses:
    def __init__(self, context: WireContext) -> None:
        self.context = context
        request = context.request if isinstance(context.request, dict) else {}
        self.version = _tool_version(request.get("tools"))
        self.started = False
        self.ended = False
        self.errored = False
        self.items: dict[str, _Item] = {}
        self.by_index: dict[int, str] = {}
        self.client_tool_call = False
        self.refusal = False

    # -- framing ---------------------------------------------------------------------------

    def stream(self, rows: tuple[Row, ...]) -> Iterator[Part]:
        items = self.items
        # The content part the last text delta went to: (item id, content index) -> part.
        last_id: Any = None
        last_index: Any = None
        last_state: _Item | None = None
        last_part: _TextPart | None = None
        for line, data, _name in rows:
            if type(data) is not dict:
                if data is DONE:
                    continue
                if not isinstance(data, dict):
                    raise MalformedInput("expected a JSON object per stream event", line=line)
            kind = data.get("type")
            if kind == "response.output_text.delta":
                # The bulk of a stream: more text for a content part already begun on an open
                # message block. Anything else about a delta goes through _on_text_delta.
                item_id = data.get("item_id")
                delta = data.get("delta")
                index = data.get("content_index")
                if item_id == last_id and index == last_index and type(index) is type(last_index):
                    state, part = last_state, last_part
                else:
                    state = items.get(item_id) if isinstance(item_id, str) and item_id else None
                    part = None
                    if state is not None and state.block_open:
                        part = state.parts.get(("content", index if type(index) is int else 0))
                    if part is not None:
                        last_id, last_index, last_state, last_part = item_id, index, state, part
                if part is not None and isinstance(delta, str):
                    if delta:
                        part.chunks.append(delta)
                        state.length += len(delta)  # type: ignore[union-attr]
                        yield TextDelta(state.key, delta)  # type: ignore[union-attr]
                    continue
            elif not isinstance(kind, str):
                raise MalformedInput(
                    "not an OpenAI Responses stream event (no string 'type')", line=line
                )
            handler = _EVENTS.get(kind)
            if handler is not None:
                yield from handler(self, data, line)
            if self.ended:
                return
        yield from self._cut()

    def body(self, response: dict[str, Any], line: int) -> Iterator[Part]:
        yield from self._begin(response)
        output = _require(response, "output", list, line, "a Responses body")
        for index, item in enumerate(output):
            if not isinstance(item, dict) or not isinstance(item.get("type"), str):
                raise MalformedInput(f"output[{index}] is not an item with a 'type'", line=line)
            yield from self._item_done(item, index)
        yield from self._terminal(response, line)

    def payload(self, format: str, value: Any) -> Payload:
        return Payload(PROVIDER, format, self.version, value)

    # -- response lifecycle ----------------------------------------------------------------

    # Helpers that make at most a part or two return a tuple, not a generator: they run for
    # most events, and a tuple is cheaper to make and to ``yield from``.

    def _begin(self, response: dict[str, Any]) -> tuple[Part, ...]:
        if self.started:
            return ()
        self.started = True
        if "tools" in response:
            self.version = _tool_version(response.get("tools"))
        return (
            ResponseStart(
                provider=_str(response.get("provider")) or PROVIDER,
                model=_str(response.get("model")),
                response_id=_str(response.get("id")),
            ),
        )

    def _on_created(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        yield from self._begin(_require(data, "response", dict, line, data["type"]))

    def _on_completed(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        response = _require(data, "response", dict, line, data["type"])
        yield from self._begin(response)
        # Items the stream never finished but the final response holds: finish them from it
        # (not for a failed response, whose unfinished blocks stay partial).
        output = response.get("output") if response.get("status") != "failed" else None
        for index, item in enumerate(output if isinstance(output, list) else ()):
            if isinstance(item, dict) and isinstance(item.get("type"), str):
                known = self.items.get(_str(item.get("id")))
                if known is None or not known.done:
                    yield from self._item_done(item, index)
        yield from self._terminal(response, line)

    def _on_error(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        yield from self._begin({})
        # Documented shape: code/message at the top level; recorded streams nest an `error`.
        error = data.get("error") if isinstance(data.get("error"), dict) else data
        yield from self._error(error, data)

    def _error(self, error: dict[str, Any], value: dict[str, Any]) -> Iterator[Part]:
        if self.errored:
            return
        self.errored = True
        code = _str(error.get("code")) or _str(error.get("type")) or "error"
        yield StreamError(code, _str(error.get("message")), self.payload(ERROR, value))

    def _terminal(self, response: dict[str, Any], line: int) -> Iterator[Part]:
        status = response.get("status")
        if status == "failed":
            yield from self._pending_activities()
            error = response.get("error") if isinstance(response.get("error"), dict) else {}
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
            reason = _str(details.get("reason")) if isinstance(details, dict) else ""
            yield from self._end(INCOMPLETE_REASONS.get(reason, UNKNOWN_INCOMPLETE))
        elif self.client_tool_call:
            yield from self._end("tool_use")
        else:
            yield from self._end("refusal" if self.refusal else "end_turn")

    def _usage(self, response: dict[str, Any]) -> tuple[Part, ...]:
        counters = _flatten_usage(response.get("usage"))
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
            if state.type in HOSTED_ITEMS and not state.activity_started:
                state.activity_started = True
                describe_input, _ = _DESCRIBE[state.type]
                yield Activity(
                    activity_id=state.key,
                    name=HOSTED_ITEMS[state.type],
                    state="started",
                    input=describe_input(state.item),
                    payload=self.payload(ITEM, state.item),
                )

    # -- items -----------------------------------------------------------------------------

    def _state(self, item: dict[str, Any], output_index: Any) -> _Item:
        key = _str(item.get("id")) or f"output-{output_index}"
        state = self.items.get(key)
        if state is None:
            state = self.items[key] = _Item(item=item, key=key)
        if _int(output_index) is not None:
            self.by_index[output_index] = key
        return state

    def _find(self, data: dict[str, Any], line: int) -> _Item:
        key = _str(data.get("item_id")) or self.by_index.get(data.get("output_index"), "")
        state = self.items.get(key)
        if state is None:
            raise MalformedInput(
                f"{data['type']} for an item that was never added ({key or 'no item_id'})",
                line=line,
            )
        return state

    def _on_item_added(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        yield from self._begin({})
        item = _require(data, "item", dict, line, data["type"])
        _require(item, "type", str, line, "an output item")
        state = self._state(item, data.get("output_index"))
        if state.type == "message":
            yield from self._open_block(state, "message")

    def _on_item_done(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        yield from self._begin({})
        item = _require(data, "item", dict, line, data["type"])
        _require(item, "type", str, line, "an output item")
        yield from self._item_done(item, data.get("output_index"))

    def _item_done(self, item: dict[str, Any], output_index: Any) -> Iterator[Part]:
        state = self._state(item, output_index)
        state.item, state.done = item, True
        kind = state.type
        if kind == "message":
            yield from self._message_done(state)
        elif kind == "reasoning":
            yield from self._reasoning_done(state)
        elif kind in HOSTED_ITEMS:
            yield from self._activity_done(state)
        elif kind in CLIENT_TOOL_ITEMS:
            yield from self._tool_call_done(state)
        else:
            yield Artifact(
                type=kind, summary=_artifact_summary(item), payload=self.payload(ITEM, item)
            )

    # -- text blocks -----------------------------------------------------------------------

    def _open_block(
        self, state: _Item, kind: Literal["message", "reasoning"]
    ) -> tuple[Part, ...]:
        if state.block_open:
            return ()
        state.block_open = True
        return (BlockStart(state.key, kind),)

    def _part(self, state: _Item, part_key: tuple[str, int]) -> Iterator[Part]:
        """Open a content/summary part: a separator from the previous part, and its offset."""
        if part_key in state.parts:
            return state.parts[part_key]
        if state.length:
            state.length += len(PART_SEPARATOR)
            yield TextDelta(state.key, PART_SEPARATOR)
        state.parts[part_key] = _TextPart(state.length)
        return state.parts[part_key]

    def _append(self, state: _Item, part_key: tuple[str, int], text: str) -> Iterator[Part]:
        part = yield from self._part(state, part_key)
        if text:
            part.chunks.append(text)
            state.length += len(text)
            yield TextDelta(state.key, text)

    def _fill(self, state: _Item, part_key: tuple[str, int], final: str) -> Iterator[Part]:
        """Emit whatever of a part's final text the deltas did not deliver."""
        part = yield from self._part(state, part_key)
        text = part.text
        if final.startswith(text) and len(final) > len(text):
            yield from self._append(state, part_key, final[len(text) :])

    def _on_content_part_added(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        state = self._find(data, line)
        yield from self._open_block(state, "message")
        part = data.get("part") if isinstance(data.get("part"), dict) else {}
        if part.get("type") == "refusal":
            self.refusal = True
        index = _int(data.get("content_index")) or 0
        yield from self._append(state, ("content", index), _str(part.get("text")))

    def _on_text_delta(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        state = self._find(data, line)
        delta = _require(data, "delta", str, line, data["type"])
        if data["type"] == "response.refusal.delta":
            self.refusal = True
        yield from self._open_block(state, "message")
        index = _int(data.get("content_index")) or 0
        yield from self._append(state, ("content", index), delta)

    def _on_annotation(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        state = self._find(data, line)
        annotation = _require(data, "annotation", dict, line, data["type"])
        yield from self._open_block(state, "message")
        content_index = _int(data.get("content_index")) or 0
        part = yield from self._part(state, ("content", content_index))
        cited = state.cited.setdefault(content_index, set())
        index = _int(data.get("annotation_index"))
        cited.add(len(cited) if index is None else index)
        citation = _citation(
            state.key, annotation, part.offset, self.payload(ANNOTATION, annotation)
        )
        if citation is not None:
            yield citation

    def _on_reasoning_delta(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        state = self._find(data, line)
        delta = _require(data, "delta", str, line, data["type"])
        yield from self._open_block(state, "reasoning")
        if data["type"] == "response.reasoning_summary_text.delta":
            part_key = ("summary", _int(data.get("summary_index")) or 0)
        else:
            part_key = ("content", _int(data.get("content_index")) or 0)
        yield from self._append(state, part_key, delta)

    def _on_summary_part_added(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        state = self._find(data, line)
        yield from self._open_block(state, "reasoning")
        part = data.get("part") if isinstance(data.get("part"), dict) else {}
        index = _int(data.get("summary_index")) or 0
        yield from self._append(state, ("summary", index), _str(part.get("text")))

    def _message_done(self, state: _Item) -> Iterator[Part]:
        yield from self._open_block(state, "message")
        content = state.item.get("content")
        for index, part in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(part, dict):
                continue
            if part.get("type") == "refusal":
                self.refusal = True
                yield from self._fill(state, ("content", index), _str(part.get("refusal")))
            elif part.get("type") == "output_text":
                yield from self._fill(state, ("content", index), _str(part.get("text")))
                yield from self._missed_citations(state, index, part.get("annotations"))
            # other content types (audio, ...) are kept in the payload only
        yield BlockEnd(state.key, self.payload(ITEM, state.item))

    def _missed_citations(self, state: _Item, index: int, annotations: Any) -> Iterator[Part]:
        """Annotations that came only with the finished item (a body, or a terse stream)."""
        cited = state.cited.setdefault(index, set())
        offset = state.parts[("content", index)].offset
        for position, annotation in enumerate(annotations if isinstance(annotations, list) else ()):
            if position in cited or not isinstance(annotation, dict):
                continue
            cited.add(position)
            citation = _citation(
                state.key, annotation, offset, self.payload(ANNOTATION, annotation)
            )
            if citation is not None:
                yield citation

    def _reasoning_done(self, state: _Item) -> Iterator[Part]:
        item = state.item
        texts: list[tuple[tuple[str, int], str]] = []
        for name, kinds in (("summary", "summary_text"), ("content", "reasoning_text")):
            entries = item.get(name)
            for index, entry in enumerate(entries if isinstance(entries, list) else ()):
                if isinstance(entry, dict) and entry.get("type") == kinds:
                    texts.append(((name, index), _str(entry.get("text"))))
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

    # -- tools -----------------------------------------------------------------------------

    def _activity_done(self, state: _Item) -> Iterator[Part]:
        item, name = state.item, HOSTED_ITEMS[state.type]
        describe_input, describe_result = _DESCRIBE[state.type]
        activity_input = describe_input(item)
        status = item.get("status")
        terminal = status in ("completed", "failed")
        payload = self.payload(ITEM, item)
        if not state.activity_started:
            state.activity_started = True
            # The payload goes with the last transition this item gets, once.
            yield Activity(
                state.key, name, "started", activity_input, payload=None if terminal else payload
            )
        if status == "completed":
            summary, sources = describe_result(item)
            yield Activity(
                state.key, name, "completed", activity_input, summary, sources, payload=payload
            )
        elif status == "failed":
            error = item.get("error") if isinstance(item.get("error"), dict) else {}
            code = _str(error.get("code")) or "failed"
            yield Activity(
                state.key, name, "failed", activity_input, code, error_code=code, payload=payload
            )
        # any other status (Azure's "searching"): the call never completed; leave it started

    def _tool_call_done(self, state: _Item) -> Iterator[Part]:
        item = state.item
        self.client_tool_call = True
        if state.type == "function_call":
            arguments = _arguments(_str(item.get("arguments")))
        else:  # custom_tool_call: free-form input text
            arguments = _str(item.get("input"))
        yield ToolCall(
            call_id=_str(item.get("call_id")) or state.key,
            name=_str(item.get("name")),
            arguments=arguments,
            payload=self.payload(ITEM, item),
        )


_Handler = Callable[[_Responses, dict[str, Any], int], Iterator[Part]]
_EVENTS: dict[str, _Handler] = {
    "response.created": _Responses._on_created,
    "response.queued": _Responses._on_created,
    "response.in_progress": _Responses._on_created,
    "response.completed": _Responses._on_completed,
    "response.incomplete": _Responses._on_completed,
    "response.failed": _Responses._on_completed,
    "error": _Responses._on_error,
    "response.output_item.added": _Responses._on_item_added,
    "response.output_item.done": _Responses._on_item_done,
    "response.content_part.added": _Responses._on_content_part_added,
    "response.output_text.delta": _Responses._on_text_delta,
    "response.refusal.delta": _Responses._on_text_delta,
    "response.output_text.annotation.added": _Responses._on_annotation,
    "response.reasoning_summary_part.added": _Responses._on_summary_part_added,
    "response.reasoning_summary_text.delta": _Responses._on_reasoning_delta,
    "response.reasoning_text.delta": _Responses._on_reasoning_delta,
    # Everything else (*.done text events, web_search_call.searching, function-call argument
    # deltas, ...) is covered by output_item.done, which carries the whole item.
}


# ---------------------------------------------------------------------------------------------
# Chat Completions


@dataclass
class _Choice:
    index: int
    text: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    reasoning_field: str = "reasoning_content"
    reasoning_details: list[Any] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    message_open: bool = False
    reasoning_open: bool = False
    closed: bool = False
    finish: str | None = None

    @property
    def key(self) -> str:
        return f"choice-{self.index}"

    @property
    def reasoning_key(self) -> str:
        return f"choice-{self.index}-reasoning"


class _Chat:
    def __init__(self, context: WireContext) -> None:
        request = context.request if isinstance(context.request, dict) else {}
        self.version = _tool_version(request.get("tools"))
        self.started = False
        self.ended = False
        self.errored = False
        self.choices: dict[int, _Choice] = {}

    def payload(self, format: str, value: Any) -> Payload:
        return Payload(PROVIDER, format, self.version, value)

    # As for _Responses: helpers making a part or two return a tuple, not a generator.

    def _begin(self, data: dict[str, Any]) -> tuple[Part, ...]:
        if self.started:
            return ()
        self.started = True
        return (
            ResponseStart(
                provider="openrouter" if _str(data.get("provider")) else PROVIDER,
                model=_str(data.get("model")),
                response_id=_str(data.get("id")),
            ),
        )

    def _end(self, reason: str) -> tuple[Part, ...]:
        if self.ended:
            return ()
        self.ended = True
        return (ResponseEnd(reason),)

    def _end_reason(self) -> str:
        if not self.choices:
            return "end_turn"
        first = self.choices[min(self.choices)]
        reason = FINISH_REASONS.get(first.finish or "stop", UNKNOWN_FINISH)
        return "refusal" if reason == "end_turn" and first.refusal else reason

    def _error(self, data: dict[str, Any]) -> tuple[Part, ...]:
        error = data.get("error")
        if not isinstance(error, dict) or self.errored:
            return ()
        self.errored = True
        code = error.get("code")
        code = str(code) if isinstance(code, str | int) and code != "" else "error"
        return (StreamError(code, _str(error.get("message")), self.payload(ERROR, error)),)

    # -- stream ----------------------------------------------------------------------------

    def stream(self, rows: tuple[Row, ...]) -> Iterator[Part]:
        for line, data, _name in rows:
            if data is DONE:
                if not self.errored:  # after an error the builder keeps open blocks partial
                    yield from self._finish_all()
                yield from self._end("error" if self.errored else self._end_reason())
                return
            if not isinstance(data, dict) or not (
                data.get("object") == "chat.completion.chunk"
                or "choices" in data
                or "error" in data
            ):
                raise MalformedInput("not a Chat Completions chunk", line=line)
            yield from self._begin(data)
            yield from self._error(data)
            choices = data.get("choices") or []
            if not isinstance(choices, list):
                raise MalformedInput("'choices' must be a list", line=line)
            for choice in choices:
                if not isinstance(choice, dict):
                    raise MalformedInput("a choice must be an object", line=line)
                yield from self._on_choice(choice, line)
            usage = data.get("usage")
            counters = _flatten_usage(usage) if usage else None
            if counters:
                yield Usage(counters)
        finished = self.choices and all(c.finish for c in self.choices.values())
        if self.errored:
            yield from self._end("error")
        elif finished:
            # The finish chunk is the real end signal; a recording may omit `[DONE]`.
            yield from self._finish_all()
            yield from self._end(self._end_reason())

    def _choice(self, choice: dict[str, Any]) -> _Choice:
        index = _int(choice.get("index")) or 0
        return self.choices.setdefault(index, _Choice(index))

    def _on_choice(self, choice: dict[str, Any], line: int) -> Iterator[Part]:
        state = self._choice(choice)
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise MalformedInput("'delta' must be an object", line=line)
        if state.closed:
            return  # repeated finish chunks (OpenRouter sends one more with usage)
        for name in ("reasoning_content", "reasoning"):
            text = delta.get(name)
            if isinstance(text, str) and text:
                state.reasoning_field = name
                if not state.reasoning_open:
                    state.reasoning_open = True
                    yield BlockStart(state.reasoning_key, "reasoning")
                state.reasoning.append(text)
                yield TextDelta(state.reasoning_key, text)
        if isinstance(delta.get("reasoning_details"), list):
            state.reasoning_details.extend(delta["reasoning_details"])
        for name, sink in (("content", state.text), ("refusal", state.refusal)):
            text = delta.get(name)
            if isinstance(text, str) and text:
                yield from self._open_message(state)
                sink.append(text)
                yield TextDelta(state.key, text)
        annotations = delta.get("annotations")
        if isinstance(annotations, list) and annotations:
            yield from self._open_message(state)
            for annotation in annotations:
                yield from self._annotation(state, annotation)
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict):
                self._tool_call_delta(state, call)
        if choice.get("finish_reason") is not None:
            state.finish = _str(choice.get("finish_reason")) or "stop"
            yield from self._close(state)

    def _open_message(self, state: _Choice) -> tuple[Part, ...]:
        # The answer follows the reasoning: close it first.
        closed = self._close_reasoning(state) if state.reasoning_open else ()
        if state.message_open:
            return closed
        state.message_open = True
        return (*closed, BlockStart(state.key, "message"))

    def _annotation(self, state: _Choice, annotation: Any) -> Iterator[Part]:
        if not isinstance(annotation, dict):
            return
        state.annotations.append(annotation)
        citation = _chat_citation(state.key, annotation, self.payload(CHAT_ANNOTATION, annotation))
        if citation is not None:
            yield citation

    @staticmethod
    def _tool_call_delta(state: _Choice, call: dict[str, Any]) -> None:
        index = _int(call.get("index"))
        slot = state.tool_calls.setdefault(
            len(state.tool_calls) if index is None else index,
            {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
        )
        if isinstance(call.get("id"), str):
            slot["id"] = call["id"]
        if isinstance(call.get("type"), str):
            slot["type"] = call["type"]
        function = call.get("function")
        if isinstance(function, dict):
            slot["function"]["name"] += _str(function.get("name"))
            slot["function"]["arguments"] += _str(function.get("arguments"))

    def _close_reasoning(self, state: _Choice) -> tuple[Part, ...]:
        state.reasoning_open = False
        value: dict[str, Any] = {state.reasoning_field: "".join(state.reasoning)}
        if state.reasoning_details:
            value["reasoning_details"] = state.reasoning_details
        return (BlockEnd(state.reasoning_key, self.payload(CHAT_REASONING, value)),)

    def _close(self, state: _Choice) -> Iterator[Part]:
        """The choice finished: end its blocks and hand over its tool calls."""
        if state.closed:
            return
        state.closed = True
        if state.reasoning_open:
            yield from self._close_reasoning(state)
        calls = [state.tool_calls[i] for i in sorted(state.tool_calls)]
        if state.message_open:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(state.text) or None,
            }
            if state.refusal:
                message["refusal"] = "".join(state.refusal)
            if state.annotations:
                message["annotations"] = state.annotations
            if calls:
                message["tool_calls"] = calls
            yield BlockEnd(state.key, self.payload(CHAT_MESSAGE, message))
        for call in calls:
            yield _chat_tool_call(call, self.payload(CHAT_TOOL_CALL, call))

    def _finish_all(self) -> Iterator[Part]:
        for index in sorted(self.choices):
            yield from self._close(self.choices[index])

    # -- body ------------------------------------------------------------------------------

    def body(self, data: dict[str, Any], line: int) -> Iterator[Part]:
        yield from self._begin(data)
        choices = _require(data, "choices", list, line, "a Chat Completions body")
        for choice in choices:
            if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
                raise MalformedInput("a choice must be an object with a 'message'", line=line)
            yield from self._body_choice(choice)
        counters = _flatten_usage(data.get("usage"))
        if counters:
            yield Usage(counters)
        yield from self._error(data)
        yield from self._end("error" if self.errored else self._end_reason())

    def _body_choice(self, choice: dict[str, Any]) -> Iterator[Part]:
        state = self._choice(choice)
        state.finish = _str(choice.get("finish_reason")) or None
        message = choice["message"]
        for name in ("reasoning_content", "reasoning"):
            text = message.get(name)
            if isinstance(text, str) and text:
                value = {name: text}
                if isinstance(message.get("reasoning_details"), list):
                    value["reasoning_details"] = message["reasoning_details"]
                yield BlockStart(state.reasoning_key, "reasoning")
                yield TextDelta(state.reasoning_key, text)
                yield BlockEnd(state.reasoning_key, self.payload(CHAT_REASONING, value))
                break
        text = _str(message.get("content"))
        refusal = _str(message.get("refusal"))
        annotations = message.get("annotations")
        if refusal:
            state.refusal.append(refusal)
        if text or refusal or (isinstance(annotations, list) and annotations):
            yield BlockStart(state.key, "message")
            if text or refusal:
                yield TextDelta(state.key, text or refusal)
            for annotation in annotations if isinstance(annotations, list) else ():
                yield from self._annotation(state, annotation)
            yield BlockEnd(state.key, self.payload(CHAT_MESSAGE, message))
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict):
                yield _chat_tool_call(call, self.payload(CHAT_TOOL_CALL, call))
        state.closed = True


def _chat_citation(key: str, annotation: dict[str, Any], replay: Payload) -> Citation | None:
    if annotation.get("type") != "url_citation":
        return None
    # The nested object is the documented shape; tolerate a flat one.
    inner = annotation.get("url_citation")
    inner = inner if isinstance(inner, dict) else annotation
    start, end = _range(inner.get("start_index"), inner.get("end_index"))
    return Citation(
        key,
        url=_str(inner.get("url")),
        title=_str(inner.get("title")),
        excerpt=_str(inner.get("content")),
        start=start,
        end=end,
        unit="codepoint",
        replay=replay,
    )


def _chat_tool_call(call: dict[str, Any], payload: Payload) -> ToolCall:
    if call.get("type") == "custom" and isinstance(call.get("custom"), dict):
        custom = call["custom"]
        return ToolCall(
            _str(call.get("id")), _str(custom.get("name")), custom.get("input"), payload
        )
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    return ToolCall(
        call_id=_str(call.get("id")),
        name=_str(function.get("name")),
        arguments=_arguments(_str(function.get("arguments"))),
        payload=payload,
    )


# ---------------------------------------------------------------------------------------------
# Entry points


def _is_chat(data: Any) -> bool:
    return isinstance(data, dict) and data.get("object") in (
        "chat.completion.chunk",
        "chat.completion",
    )


def parse(wire: WireInput, context: WireContext) -> Iterator[Part]:
    """Translate an OpenAI (or OpenAI-compatible) response into stream parts."""
    rows = wire.rows
    if wire.kind == "body":
        frame = Frame(*rows[0])
        data = frame.data
        if data.get("object") == "response" or isinstance(data.get("output"), list):
            return _Responses(context).body(data, frame.line)
        if data.get("object") == "chat.completion" or (
            "choices" in data and data.get("object") != "chat.completion.chunk"
        ):
            return _Chat(context).body(data, frame.line)
        if _is_chat(data):
            return _Chat(context).stream(rows)  # a single saved chunk
        if _str(data.get("type")).startswith("response."):
            return _Responses(context).stream(rows)  # a single saved event
        if isinstance(data.get("error"), dict):
            error = data["error"]
            raise MalformedInput(
                f"an OpenAI error body ({_str(error.get('code')) or _str(error.get('type'))}: "
                f"{_str(error.get('message'))[:120]}), not a response",
                line=frame.line,
            )
        shown = f"type {data['type']!r}" if isinstance(data.get("type"), str) else "no 'object'"
        raise MalformedInput(
            f"not an OpenAI response body ({shown}; expected object 'response' or "
            "'chat.completion')",
            line=frame.line,
        )
    first = next((Frame(*row) for row in rows if row[1] is not DONE), None)
    if first is None:
        return iter(())
    if _is_chat(first.data) or (
        # a Chat Completions stream may open with a bare {"error": ...} chunk (OpenRouter)
        isinstance(first.data, dict)
        and "type" not in first.data
        and ("choices" in first.data or isinstance(first.data.get("error"), dict))
    ):
        return _Chat(context).stream(rows)
    kind = first.data.get("type") if isinstance(first.data, dict) else None
    if not isinstance(kind, str) or not (kind.startswith("response.") or kind == "error"):
        shown = f"type {kind!r}" if isinstance(kind, str) else "no 'type'"
        raise MalformedInput(
            f"not an OpenAI stream: the first event has {shown} (expected a 'response.*' "
            "event or a Chat Completions chunk)",
            line=first.line,
        )
    return _Responses(context).stream(rows)


# ---------------------------------------------------------------------------------------------
# Stored payloads


_ITEM_FIELDS: dict[str, tuple[tuple[str, type], ...]] = {
    "message": (("content", list),),
    "reasoning": (("id", str),),
    "function_call": (("call_id", str), ("name", str), ("arguments", str)),
    "custom_tool_call": (("call_id", str), ("name", str)),
    "web_search_call": (("id", str),),
    "file_search_call": (("id", str),),
    "code_interpreter_call": (("id", str),),
}


def decode(payload_value: dict, format: str) -> None:
    """Raise ValueError when a stored payload of ``format`` cannot be read by this adapter."""
    if format not in FORMATS:
        raise ValueError(f"unknown openai payload format {format!r}")
    if not isinstance(payload_value, dict):
        raise ValueError(f"{format}: the value must be a JSON object")
    if format == ITEM:
        kind = payload_value.get("type")
        if not isinstance(kind, str):
            raise ValueError(f"{format}: needs a string 'type'")
        for name, kind_of in _ITEM_FIELDS.get(kind, ()):
            if not isinstance(payload_value.get(name), kind_of):
                raise ValueError(f"{format}: a {kind} item needs {name!r} ({kind_of.__name__})")
    elif format in (ANNOTATION, CHAT_ANNOTATION):
        if not isinstance(payload_value.get("type"), str):
            raise ValueError(f"{format}: needs a string 'type'")
    elif format == ERROR:
        if not any(k in payload_value for k in ("code", "message", "type", "error")):
            raise ValueError(f"{format}: needs a 'code' or a 'message'")
    elif format == CHAT_MESSAGE:
        if not isinstance(payload_value.get("role"), str):
            raise ValueError(f"{format}: needs a string 'role'")
        if payload_value.get("content") is not None and not isinstance(
            payload_value.get("content"), str | list
        ):
            raise ValueError(f"{format}: 'content' must be a string, a list or null")
    elif format == CHAT_REASONING:
        if not any(
            isinstance(payload_value.get(k), str) for k in ("reasoning_content", "reasoning")
        ):
            raise ValueError(f"{format}: needs 'reasoning_content' or 'reasoning' text")
    elif format == CHAT_TOOL_CALL:
        inner = payload_value.get("function") or payload_value.get("custom")
        if not isinstance(inner, dict) or not isinstance(inner.get("name"), str):
            raise ValueError(f"{format}: needs a 'function' (or 'custom') object with a 'name'")
