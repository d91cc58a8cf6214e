"""The Gemini Interactions API: ``event_type`` stream events, or a whole Interaction body.

Events are ``step.*`` (the older ``content.*`` names are accepted too).

* ``thought`` step -> ``reasoning`` block (``thought_summary`` text); a thought with only a
  ``thought_signature`` is redacted reasoning (the signature lives only in the payload).
* ``model_output`` step -> ``message`` block; ``text_annotation_delta`` annotations with a ``url``
  -> ``Citation`` with ``unit="utf8"``: Google's API schema documents ``start_index`` as
  "measured in bytes" (the recorded text is ASCII, so it cannot show the unit either way).
* ``google_search_call`` / ``google_search_result`` -> ``web_search`` activity (id = the call
  id), ``code_execution_call`` / ``code_execution_result`` -> ``code_execution``;
  ``search_suggestions`` -> the search entry point ``Artifact`` generateContent's reader makes
  (``providers.google.generate``).
  ``function_call`` -> ``ToolCall``; other steps/deltas -> ``Artifact``.
* ``interaction.completed``: completed -> ``end_turn`` (``tool_use`` after a function call),
  requires_action -> ``tool_use``, incomplete -> ``max_tokens``, failed / cancelled / other ->
  ``StreamError`` + ``error``. ``usage`` integer counters -> ``Usage``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from providers import served
from providers.google.common import (
    CODE_EXECUTION,
    END_TURN,
    ERROR,
    ERROR_END,
    ITEM,
    MAX_TOKENS,
    PROVIDER,
    STEP,
    TOOL_USE,
    WEB_SEARCH,
    api_version,
    endpoint_model,
    entry_point_artifact,
    keys,
    object_of,
    search_summary,
)
from providers.protocol import WireContext
from providers.values import as_dict, as_int, as_list, as_str, int_counters
from providers.wire import DONE, Row
from streams.errors import MalformedInput
from streams.parts import (
    Activity,
    Artifact,
    BlockEnd,
    BlockKind,
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


@dataclass
class _Step:
    index: int
    type: str
    value: dict[str, Any]
    key: str
    block: bool = False  # BlockStart emitted
    text: list[str] = field(default_factory=list)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    arguments_text: str = ""


# Hosted call/result step types -> activity name.
_HOSTED_CALLS = {"google_search_call": WEB_SEARCH, "code_execution_call": CODE_EXECUTION}
_HOSTED_RESULTS = {"google_search_result": WEB_SEARCH, "code_execution_result": CODE_EXECUTION}


@dataclass
class Interactions:
    context: WireContext
    version: str = ""
    started: bool = False
    ended: bool = False
    steps: dict[int, _Step] = field(default_factory=dict)
    called_function: bool = False
    shown_entry_points: set[str] = field(default_factory=set)
    call_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.version = api_version(self.context.endpoint)

    def payload(self, fmt: str, value: Any) -> Payload:
        return Payload(PROVIDER, fmt, self.version, value)

    def feed(self, row: Row) -> Iterator[Part]:
        line, data, _name = row
        if self.ended or data is DONE:
            return iter(())  # after the interaction completed nothing is read
        data = object_of(data, line, "an Interactions event")
        event_type = data.get("event_type")
        if not isinstance(event_type, str):
            raise MalformedInput(
                f"not a Gemini Interactions event (no event_type; got keys: {keys(data)})",
                line=line,
            )
        handler = _EVENT_HANDLERS.get(event_type, Interactions.unknown_event)
        return handler(self, data)

    def close(self) -> Iterator[Part]:
        return iter(()) if self.ended else self.cut()

    def body(self, data: Any, line: int) -> Iterator[Part]:
        """A whole Interaction: replay its steps as start/stop pairs."""
        interaction = object_of(data, line, "an Interaction")
        yield from self.start(interaction)
        steps = as_list(interaction.get("steps", interaction.get("outputs")))
        for index, step in enumerate(steps):
            yield from self.step_start({"index": index, "step": step})
            yield from self.step_stop({"index": index})
        yield from self.completed({"interaction": interaction})

    def start(self, interaction: dict[str, Any]) -> Iterator[Part]:
        if self.started:
            return
        self.started = True
        model = (
            as_str(interaction.get("model"))
            or as_str(interaction.get("agent"))
            or endpoint_model(self.context.endpoint)
        )
        yield ResponseStart(served.provider(self.context, PROVIDER), model,
                            as_str(interaction.get("id")))

    # -- lifecycle events ------------------------------------------------------------------

    def created(self, data: dict[str, Any]) -> Iterator[Part]:
        yield from self.start(as_dict(data.get("interaction")))

    def status_update(self, data: dict[str, Any]) -> Iterator[Part]:
        return iter(())  # progress only; the outcome comes with interaction.completed

    def completed(self, data: dict[str, Any]) -> Iterator[Part]:
        interaction = as_dict(data.get("interaction"))
        yield from self.start(interaction)
        self.ended = True
        usage = int_counters(interaction.get("usage"))
        if usage:
            yield Usage(usage)
        status = as_str(interaction.get("status"))
        if status == "completed":
            yield ResponseEnd(TOOL_USE if self.called_function else END_TURN)
        elif status == "requires_action":
            yield ResponseEnd(TOOL_USE)
        elif status == "incomplete":
            yield ResponseEnd(MAX_TOKENS)
        else:
            error = as_dict(interaction.get("error")) or {
                "code": status or "unknown",
                "message": f"interaction {status or 'ended'}",
            }
            yield StreamError(
                as_str(error.get("code")) or status or "error",
                as_str(error.get("message")),
                self.payload(ERROR, error),
            )
            yield ResponseEnd(ERROR_END)

    def error(self, data: dict[str, Any]) -> Iterator[Part]:
        yield from self.start({})
        self.ended = True
        error = as_dict(data.get("error")) or {"message": "error event without details"}
        yield StreamError(
            as_str(error.get("code")) or "error",
            as_str(error.get("message")),
            self.payload(ERROR, error),
        )
        yield ResponseEnd(ERROR_END)

    def unknown_event(self, data: dict[str, Any]) -> Iterator[Part]:
        yield from self.start({})
        yield Artifact(
            type=f"google.interactions.event.{data['event_type']}",
            summary=f"Interactions event {data['event_type']}",
            payload=self.payload(ITEM, {"type": data["event_type"], **data}),
        )

    def cut(self) -> Iterator[Part]:
        # A hosted call whose step never stopped is still reported as started.
        for step in list(self.steps.values()):
            if step.type in _HOSTED_CALLS:
                yield from self.hosted_call(step)

    # -- steps -----------------------------------------------------------------------------

    def step_start(self, data: dict[str, Any]) -> Iterator[Part]:
        yield from self.start({})
        index = as_int(data.get("index")) or 0
        value = dict(as_dict(data.get("step", data.get("content"))))
        step = _Step(index, as_str(value.get("type")), value, f"step{index}")
        self.steps[index] = step
        # A step may arrive with its content already filled in (an Interaction body).
        if step.type == "model_output":
            for item in as_list(value.pop("content", None)):
                yield from self.delta(step, as_dict(item))
        elif step.type == "text":
            if "text" in value:
                yield from self.text(step, {"text": value.pop("text")})
            yield from self.annotate(step, {"annotations": value.pop("annotations", None)})
        elif step.type == "thought":
            for item in as_list(value.pop("summary", None)):
                yield from self.thought_summary(step, {"content": item})

    def step_delta(self, data: dict[str, Any]) -> Iterator[Part]:
        step = self.steps.get(as_int(data.get("index")) or 0)
        if step is None:  # a delta for a step we never saw start: keep it whole
            yield from self.start({})
            delta = as_dict(data.get("delta"))
            yield Artifact(
                type=f"google.interactions.{as_str(delta.get('type')) or 'delta'}",
                summary="Interactions delta without a step",
                payload=self.payload(ITEM, {"type": "delta", **delta}),
            )
            return
        yield from self.delta(step, as_dict(data.get("delta")))

    def delta(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        handler = _DELTA_HANDLERS.get(as_str(delta.get("type")))
        if handler is not None:
            yield from handler(self, step, delta)
        elif as_str(delta.get("type")) == step.type or step.type in _HOSTED_CALLS | _HOSTED_RESULTS:
            # Fields of a call/result step (arguments, result, signature): rebuild the step.
            step.value.update({k: v for k, v in delta.items() if k != "type"})
        else:
            kind = as_str(delta.get("type")) or "item"
            yield Artifact(
                type=f"google.interactions.{kind}",
                summary=f"Gemini {kind} output",
                payload=self.payload(ITEM, delta if delta.get("type") else {"type": kind, **delta}),
            )

    def open(self, step: _Step, kind: BlockKind) -> Iterator[Part]:
        if not step.block:
            step.block = True
            yield BlockStart(step.key, kind)

    def text(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        text = as_str(delta.get("text"))
        yield from self.open(step, "message")
        step.text.append(text)
        if text:
            yield TextDelta(step.key, text)

    def annotate(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        for annotation in map(as_dict, as_list(delta.get("annotations"))):
            # url_citation has `url`; the older Annotation shape names it in `source`.
            source = as_str(annotation.get("source"))
            url = as_str(annotation.get("url")) or (source if source.startswith("http") else "")
            if not url:
                kind = as_str(annotation.get("type")) or "annotation"
                yield Artifact(
                    type=f"google.interactions.{kind}",
                    summary=f"Gemini {kind}",
                    payload=self.payload(ITEM, {"type": kind, **annotation}),
                )
                continue
            yield from self.open(step, "message")
            step.annotations.append(annotation)
            start, end = as_int(annotation.get("start_index")), as_int(annotation.get("end_index"))
            has_range = end is not None
            yield Citation(
                step.key,
                url,
                as_str(annotation.get("title")),
                start=(start or 0) if has_range else None,
                end=end,
                unit="utf8",
            )

    def model_text(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        yield from self.text(step, delta)
        if delta.get("annotations"):
            yield from self.annotate(step, delta)

    def thought_summary(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        content = as_dict(delta.get("content"))
        text = as_str(content.get("text"))
        if content.get("type", "text") != "text":
            yield Artifact(
                type="google.interactions.thought_summary",
                summary="Gemini thought summary item",
                payload=self.payload(ITEM, {"type": "thought_summary", **delta}),
            )
            return
        yield from self.open(step, "reasoning")
        step.text.append(text)
        if text:
            yield TextDelta(step.key, text)

    def thought_signature(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        if as_str(delta.get("signature")):
            step.value["signature"] = delta["signature"]  # sent whole, never in pieces
        return iter(())

    def arguments_delta(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        step.arguments_text += as_str(delta.get("arguments") or delta.get("partial_arguments"))
        return iter(())

    def step_stop(self, data: dict[str, Any]) -> Iterator[Part]:
        step = self.steps.pop(as_int(data.get("index")) or 0, None)
        if step is None:
            return
        yield from _STOP_HANDLERS.get(step.type, Interactions.unknown_step)(self, step)

    def stop_thought(self, step: _Step) -> Iterator[Part]:
        value = dict(step.value)
        if step.text:
            value["summary"] = [{"type": "text", "text": "".join(step.text)}]
        payload = self.payload(STEP, value)
        if not step.block:
            if not value.get("signature"):
                return  # an empty thought: nothing to keep
            # Only the signature is known: reasoning whose content is opaque.
            yield BlockStart(step.key, "reasoning", redacted=True, payload=payload)
        yield BlockEnd(step.key, payload)

    def stop_output(self, step: _Step) -> Iterator[Part]:
        if not step.block:
            return  # no text in this step (other outputs were kept as artifacts)
        content: dict[str, Any] = {"type": "text", "text": "".join(step.text)}
        if step.annotations:
            content["annotations"] = step.annotations
        if step.type == "text":
            value = {**step.value, **content}
        else:
            value = {**step.value, "content": [content]}
        yield BlockEnd(step.key, self.payload(STEP, value))

    def function_call(self, step: _Step) -> Iterator[Part]:
        value = step.value
        arguments = value.get("arguments")
        if arguments is None and step.arguments_text:
            try:
                arguments = orjson.loads(step.arguments_text)
            except orjson.JSONDecodeError:
                arguments = step.arguments_text  # kept as sent: the client decides
            value = {**value, "arguments": arguments}
        self.called_function = True
        yield ToolCall(
            as_str(value.get("id")),
            as_str(value.get("name")),
            arguments if arguments is not None else {},
            self.payload(STEP, value),
        )

    def hosted_call(self, step: _Step) -> Iterator[Part]:
        self.steps.pop(step.index, None)
        arguments = as_dict(step.value.get("arguments"))
        if not arguments and step.arguments_text:
            try:
                arguments = as_dict(orjson.loads(step.arguments_text))
            except orjson.JSONDecodeError:
                arguments = {}
        call_id = as_str(step.value.get("id"))
        self.call_inputs[call_id] = arguments
        yield Activity(
            call_id,
            _HOSTED_CALLS[step.type],
            "started",
            input=arguments,
            payload=self.payload(STEP, step.value),
        )

    def hosted_result(self, step: _Step) -> Iterator[Part]:
        value = step.value
        name = _HOSTED_RESULTS[step.type]
        call_id = as_str(value.get("call_id"))
        payload = self.payload(STEP, value)
        if value.get("is_error"):
            yield Activity(
                call_id, name, "failed", summary="error", error_code="is_error", payload=payload
            )
            return
        if name == CODE_EXECUTION:
            yield Activity(call_id, name, "completed", summary="ok", payload=payload)
            return
        results = [as_dict(r) for r in as_list(value.get("result"))]
        sources = tuple(
            {"url": as_str(r["url"]), "title": as_str(r.get("title"))}
            for r in results
            if as_str(r.get("url"))
        )
        # The result names no pages (only suggestion chips): summarize by the call's queries.
        queries = as_list(self.call_inputs.get(call_id, {}).get("queries"))
        summary = search_summary(len(queries), len(sources) if sources else None)
        yield Activity(
            call_id,
            name,
            "completed",
            input=self.call_inputs.get(call_id, {}),
            summary=summary,
            sources=sources,
            payload=payload,
        )
        for result in results:
            html = as_str(result.get("search_suggestions"))
            if html and html not in self.shown_entry_points:
                self.shown_entry_points.add(html)
                yield entry_point_artifact({"renderedContent": html}, html, self.version)

    def unknown_step(self, step: _Step) -> Iterator[Part]:
        if step.block:  # text arrived in a step type we do not know: still a message
            yield from self.stop_output(step)
            return
        kind = step.type or "step"
        value = step.value if step.value.get("type") else {"type": kind, **step.value}
        yield Artifact(
            type=f"google.interactions.{kind}",
            summary=f"Gemini {kind} step",
            payload=self.payload(STEP, value),
        )


_EVENT_HANDLERS: dict[str, Callable[[Interactions, dict[str, Any]], Iterator[Part]]] = {
    "interaction.created": Interactions.created,
    "interaction.start": Interactions.created,
    "interaction.status_update": Interactions.status_update,
    "interaction.completed": Interactions.completed,
    "interaction.complete": Interactions.completed,
    "error": Interactions.error,
    "step.start": Interactions.step_start,
    "step.delta": Interactions.step_delta,
    "step.stop": Interactions.step_stop,
    "content.start": Interactions.step_start,
    "content.delta": Interactions.step_delta,
    "content.stop": Interactions.step_stop,
}

_DELTA_HANDLERS: dict[str, Callable[[Interactions, _Step, dict[str, Any]], Iterator[Part]]] = {
    "text": Interactions.model_text,
    "text_annotation_delta": Interactions.annotate,
    "thought_summary": Interactions.thought_summary,
    "thought_signature": Interactions.thought_signature,
    "arguments_delta": Interactions.arguments_delta,
}

_STOP_HANDLERS: dict[str, Callable[[Interactions, _Step], Iterator[Part]]] = {
    "thought": Interactions.stop_thought,
    "model_output": Interactions.stop_output,
    "text": Interactions.stop_output,
    "function_call": Interactions.function_call,
    **dict.fromkeys(_HOSTED_CALLS, Interactions.hosted_call),
    **dict.fromkeys(_HOSTED_RESULTS, Interactions.hosted_result),
}
