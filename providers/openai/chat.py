"""OpenAI Chat Completions: ``chat.completion.chunk`` streams and ``chat.completion`` bodies
(OpenRouter and other compatible gateways speak the same shape).

The choices' blocks, OpenRouter's and Perplexity's hosted search and the marker citations are
one reader's shared state over the same chunks; taking Perplexity's ``[n]`` markers out of
text that arrives in pieces is ``markers``' job.

Mapping: ``delta.content``/``message.content`` (and ``refusal``) -> a message
block per choice; ``reasoning_content``/``reasoning`` (DeepSeek, OpenRouter) -> a reasoning
block; ``annotations[]`` ``url_citation`` -> ``Citation`` (a zero-length range such as
OpenRouter's ``0/0`` is no range; ``content`` is the excerpt); ``tool_calls`` -> ``ToolCall``;
``finish_reason`` stop/length/tool_calls/content_filter -> end_turn/max_tokens/tool_use/refusal.
``ResponseEnd`` comes at ``[DONE]``, or at the end of input once every choice has finished.

Provenance: chunks that carry a ``provider`` field come from OpenRouter (the field names
OpenRouter's upstream, e.g. "OpenAI", which stays in the payload): the provider is "openrouter",
the one that answered the call. A response with a top-level ``citations`` list (or
``search_results``) comes from Perplexity: the provider is "perplexity".

Hosted search: OpenRouter's web search plugin runs the search itself and says so only in
``usage.server_tool_use_details.web_search_requests``: each request is one ``web_search``
activity (``started`` then ``completed``, id ``"{id}:web_search:{n}"``), the annotations' URLs
its sources (on the first). Perplexity searches for every answer: its ``citations`` URLs (titles
from ``search_results``) are the sources of one ``web_search`` activity (``"{id}:web_search:0"``)
and its text cites them with ``[n]`` markers. The markers are removed from the stored text (the
payload keeps the text verbatim) and each becomes a ``Citation`` of ``citations[n-1]`` over the
sentence it follows (``streams.ranges.sentence_before``), as chat exports' markers are.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from providers import served
from providers.openai import groq
from providers.openai.common import (
    ERROR,
    PROVIDER,
    char_range,
    flatten_usage,
    json_arguments,
    require,
    tool_version,
)
from providers.openai.markers import Markers
from providers.protocol import WireContext
from providers.values import as_dict, as_int, as_list, as_str, count
from providers.wire import DONE, Row
from streams.errors import MalformedInput
from streams.parts import (
    Activity,
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
from streams.ranges import sentence_before
from streams.registries import ACTIVITY_NAMES, END_REASONS

CHAT_MESSAGE = "openai.chat.message"  # choices[i].message, verbatim or reconstructed
CHAT_REASONING = "openai.chat.reasoning"  # {"reasoning_content"|"reasoning": text, ...}
CHAT_TOOL_CALL = "openai.chat.tool_call"  # one tool_calls[] entry
CHAT_ANNOTATION = "openai.chat.annotation"  # one message annotation, verbatim
FORMATS = (CHAT_MESSAGE, CHAT_REASONING, CHAT_TOOL_CALL, CHAT_ANNOTATION)

FINISH_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
    "error": "error",
}
UNKNOWN_FINISH = "end_turn"  # the choice finished; a future reason is not an error
_PRODUCER = __package__ or __name__  # the adapter package is the producer
for _reason in ("end_turn", "max_tokens", "tool_use", "refusal", "error"):
    END_REASONS.register(_reason, producer=_PRODUCER)
WEB_SEARCH = ACTIVITY_NAMES.register("web_search", producer=_PRODUCER)
_SEARCH_REQUESTS = "server_tool_use_details.web_search_requests"  # OpenRouter's usage counter


_MARKER = re.compile(r"\[(\d{1,4})\](?!\()")


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
    markers: Markers | None = None  # Perplexity: the text's [n] markers, taken out
    # Groq: the built-in tools it ran (``executed_tools``) by index, and which are reported.
    executed: dict[int, dict[str, Any]] = field(default_factory=dict)
    executed_started: set[int] = field(default_factory=set)
    executed_done: set[int] = field(default_factory=set)
    raw: list[str] = field(default_factory=list)  # the content as sent, when markers are out
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


class Chat:
    """One Chat Completions response: a stream fed chunk by chunk, or a body (``body``)."""

    def __init__(self, context: WireContext) -> None:
        self.context = context
        request = context.request if isinstance(context.request, dict) else {}
        self.version = tool_version(request.get("tools"))
        self.started = False
        self.ended = False
        self.errored = False
        self.choices: dict[int, _Choice] = {}
        self.response_id = ""
        # Perplexity: the URLs its [n] markers cite (and titles from search_results).
        self.citations: list[str] = []
        self.titles: dict[str, str] = {}
        self.searched = False

    def payload(self, format: str, value: Any) -> Payload:
        return Payload(PROVIDER, format, self.version, value)

    # Helpers making a part or two return a tuple, not a generator: cheaper to make and use.

    def _begin(self, data: dict[str, Any]) -> tuple[Part, ...]:
        if self.started:
            return ()
        self.started = True
        self.response_id = as_str(data.get("id"))
        model = as_str(data.get("model"))
        return (ResponseStart(served.provider(self.context, PROVIDER, shown=_shown(data),
                                              model=model), model, self.response_id),)

    def _perplexity(self, data: dict[str, Any]) -> None:
        """Perplexity's ``citations`` (and ``search_results``), once a chunk carries them."""
        if self.citations:
            return
        urls = [u for u in as_list(data.get("citations")) if isinstance(u, str)]
        results = [r for r in as_list(data.get("search_results")) if isinstance(r, dict)]
        self.citations = urls or [as_str(r.get("url")) for r in results]
        self.titles = {as_str(r.get("url")): as_str(r.get("title")) for r in results}

    def _searches(self, usage: Any, annotations: list[dict[str, Any]]) -> list[Part]:
        """The hosted web searches the response reports (OpenRouter's counter, Perplexity's
        citations), each started and completed, once per response."""
        requests = as_int(as_dict(as_dict(usage).get("server_tool_use_details")).get(
            "web_search_requests")) or 0
        if self.searched or not (requests or self.citations):
            return []
        self.searched = True
        if self.citations:
            sources = [{"url": u, "title": self.titles.get(u, "")} for u in self.citations]
            requests = max(requests, 1)
        else:
            sources = []
            for annotation in annotations:
                inner = as_dict(annotation.get("url_citation")) or annotation
                url = as_str(inner.get("url"))
                if url and all(s["url"] != url for s in sources):
                    sources.append({"url": url, "title": as_str(inner.get("title"))})
        out: list[Part] = []
        for n in range(requests):
            search_id = f"{self.response_id or 'response'}:web_search:{n}"
            found = tuple(sources) if n == 0 else ()
            summary = count(len(found), "source") if n == 0 else ""
            out.append(Activity(search_id, WEB_SEARCH, "started"))
            out.append(Activity(search_id, WEB_SEARCH, "completed", summary=summary,
                                sources=found))
        return out

    def _marker_citations(self, state: _Choice, text: str) -> list[Part]:
        """A Citation of ``citations[n-1]`` for every ``[n]`` marker taken out of ``text``,
        over the sentence the marker follows (the whole block when there is none)."""
        if state.markers is None:
            return []
        out: list[Part] = []
        for position, n in state.markers.found:
            span = sentence_before(text, position)
            url = self.citations[n - 1]
            out.append(Citation(
                state.key, url, self.titles.get(url, ""),
                start=span[0] if span else None, end=span[1] if span else None,
            ))
        return out

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
        return (StreamError(code, as_str(error.get("message")), self.payload(ERROR, error)),)

    # -- stream ----------------------------------------------------------------------------

    def feed(self, row: Row) -> Iterator[Part]:
        if self.ended:
            return  # after [DONE] nothing is read
        line, data, _name = row
        if data is DONE:
            if not self.errored:  # after an error the builder keeps open blocks partial
                yield from self._finish_all()
            yield from self._end("error" if self.errored else self._end_reason())
            return
        if not isinstance(data, dict) or not (
            data.get("object") == "chat.completion.chunk" or "choices" in data or "error" in data
        ):
            raise MalformedInput("not a Chat Completions chunk", line=line)
        yield from self._begin(data)
        self._perplexity(data)
        yield from self._error(data)
        choices = data.get("choices") or []
        if not isinstance(choices, list):
            raise MalformedInput("'choices' must be a list", line=line)
        for choice in choices:
            if not isinstance(choice, dict):
                raise MalformedInput("a choice must be an object", line=line)
            yield from self._on_choice(choice, line)
        usage = data.get("usage")
        counters = flatten_usage(usage) if usage else None
        if counters:
            if counters.get(_SEARCH_REQUESTS) or self.citations:
                annotations = [a for c in self.choices.values() for a in c.annotations]
                yield from self._searches(usage, annotations)
            yield Usage(counters)

    def close(self) -> Iterator[Part]:
        """The input ended without [DONE]: the end still counts once every choice finished."""
        if self.ended:
            return
        finished = self.choices and all(c.finish for c in self.choices.values())
        if self.errored:
            yield from self._end("error")
        elif finished:
            # The finish chunk is the real end signal; a recording may omit `[DONE]`.
            yield from self._finish_all()
            yield from self._end(self._end_reason())

    def _choice(self, choice: dict[str, Any]) -> _Choice:
        index = as_int(choice.get("index")) or 0
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
                if name == "content" and self.citations:
                    text = self._strip_markers(state, text)
                    if not text:
                        continue
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
        if delta.get("executed_tools"):
            yield from self._executed(state, delta["executed_tools"])
        if choice.get("finish_reason") is not None:
            state.finish = as_str(choice.get("finish_reason")) or "stop"
            yield from self._close(state)

    def _executed(self, state: _Choice, entries: Any) -> list[Part]:
        """Groq's built-in tool runs (``providers.openai.groq``): each started once, completed
        once its outcome is in."""
        out: list[Part] = []
        prefix = self.response_id or "response"
        if state.index:
            prefix += f":{state.index}"
        for index in groq.merge(state.executed, entries):
            if index in state.executed_done:
                continue
            entry = state.executed[index]
            out.extend(groq.activities(f"{prefix}:executed_tool:{index}", entry,
                                       index in state.executed_started))
            state.executed_started.add(index)
            if groq.finished(entry):
                state.executed_done.add(index)
        return out

    def _strip_markers(self, state: _Choice, text: str) -> str:
        if state.markers is None:
            state.markers = Markers(len(self.citations))
        state.raw.append(text)
        return state.markers.feed(text)

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
        index = as_int(call.get("index"))
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
            slot["function"]["name"] += as_str(function.get("name"))
            slot["function"]["arguments"] += as_str(function.get("arguments"))

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
            if state.markers is not None:  # a held piece of a marker that was not one
                rest = state.markers.close()
                if rest:
                    state.text.append(rest)
                    yield TextDelta(state.key, rest)
                yield from self._marker_citations(state, "".join(state.text))
            message: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(state.raw if state.markers is not None else state.text)
                or None,
            }
            if state.refusal:
                message["refusal"] = "".join(state.refusal)
            if state.annotations:
                message["annotations"] = state.annotations
            if state.executed:
                message["executed_tools"] = [state.executed[i] for i in sorted(state.executed)]
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
        self._perplexity(data)
        choices = require(data, "choices", list, line, "a Chat Completions body")
        annotations = [
            a for c in choices if isinstance(c, dict)
            for a in as_list(as_dict(c.get("message")).get("annotations")) if isinstance(a, dict)
        ]
        yield from self._searches(data.get("usage"), annotations)
        for choice in choices:
            if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
                raise MalformedInput("a choice must be an object with a 'message'", line=line)
            yield from self._body_choice(choice)
        counters = flatten_usage(data.get("usage"))
        if counters:
            yield Usage(counters)
        yield from self._error(data)
        yield from self._end("error" if self.errored else self._end_reason())

    def _body_choice(self, choice: dict[str, Any]) -> Iterator[Part]:
        state = self._choice(choice)
        state.finish = as_str(choice.get("finish_reason")) or None
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
        if message.get("executed_tools"):  # run before the answer was written
            yield from self._executed(state, message["executed_tools"])
        text = as_str(message.get("content"))
        refusal = as_str(message.get("refusal"))
        annotations = message.get("annotations")
        if refusal:
            state.refusal.append(refusal)
        markers: list[Part] = []
        if text and self.citations:
            text, markers = self._body_markers(state, text)
        if text or refusal or (isinstance(annotations, list) and annotations):
            yield BlockStart(state.key, "message")
            if text or refusal:
                yield TextDelta(state.key, text or refusal)
            yield from markers
            for annotation in annotations if isinstance(annotations, list) else ():
                yield from self._annotation(state, annotation)
            yield BlockEnd(state.key, self.payload(CHAT_MESSAGE, message))
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict):
                yield _chat_tool_call(call, self.payload(CHAT_TOOL_CALL, call))
        state.closed = True


    def _body_markers(self, state: _Choice, text: str) -> tuple[str, list[Part]]:
        """A whole text without its ``[n]`` markers, and their citations."""
        markers = state.markers = Markers(len(self.citations))
        pieces, last = [], 0
        for match in _MARKER.finditer(text):
            n = int(match.group(1))
            if not 1 <= n <= markers.limit:
                continue
            pieces.append(text[last:match.start()])
            markers.length += match.start() - last
            markers.found.append((markers.length, n))
            last = match.end()
        pieces.append(text[last:])
        clean = "".join(pieces)
        return clean, self._marker_citations(state, clean)


def _shown(data: dict[str, Any]) -> str:
    """The service a chunk or body shows served it ("" when it shows none): OpenRouter names
    its upstream in ``provider``, Perplexity sends ``citations`` / ``search_results``, Groq
    its ``x_groq`` object."""
    if as_str(data.get("provider")):
        return "openrouter"
    if isinstance(data.get("citations"), list) or isinstance(data.get("search_results"), list):
        return "perplexity"
    if isinstance(data.get("x_groq"), dict):
        return "groq"
    return ""


def _chat_citation(key: str, annotation: dict[str, Any], replay: Payload) -> Citation | None:
    if annotation.get("type") != "url_citation":
        return None
    # The nested object is the documented shape; tolerate a flat one.
    inner = annotation.get("url_citation")
    inner = inner if isinstance(inner, dict) else annotation
    start, end = char_range(inner.get("start_index"), inner.get("end_index"))
    return Citation(
        key,
        url=as_str(inner.get("url")),
        title=as_str(inner.get("title")),
        excerpt=as_str(inner.get("content")),
        start=start,
        end=end,
        unit="codepoint",
        replay=replay,
    )


def _chat_tool_call(call: dict[str, Any], payload: Payload) -> ToolCall:
    if call.get("type") == "custom" and isinstance(call.get("custom"), dict):
        custom = call["custom"]
        return ToolCall(
            as_str(call.get("id")), as_str(custom.get("name")), custom.get("input"), payload
        )
    function = as_dict(call.get("function"))
    return ToolCall(
        call_id=as_str(call.get("id")),
        name=as_str(function.get("name")),
        arguments=json_arguments(as_str(function.get("arguments"))),
        payload=payload,
    )


# ---------------------------------------------------------------------------------------------
# Stored payloads


def check_payload(value: dict[str, Any], format: str) -> None:
    """Raise ValueError when a stored Chat Completions payload cannot be read."""
    if format == CHAT_ANNOTATION:
        if not isinstance(value.get("type"), str):
            raise ValueError(f"{format}: needs a string 'type'")
    elif format == CHAT_MESSAGE:
        if not isinstance(value.get("role"), str):
            raise ValueError(f"{format}: needs a string 'role'")
        if value.get("content") is not None and not isinstance(value.get("content"), str | list):
            raise ValueError(f"{format}: 'content' must be a string, a list or null")
    elif format == CHAT_REASONING:
        if not any(isinstance(value.get(k), str) for k in ("reasoning_content", "reasoning")):
            raise ValueError(f"{format}: needs 'reasoning_content' or 'reasoning' text")
    elif format == CHAT_TOOL_CALL:
        inner = value.get("function") or value.get("custom")
        if not isinstance(inner, dict) or not isinstance(inner.get("name"), str):
            raise ValueError(f"{format}: needs a 'function' (or 'custom') object with a 'name'")
