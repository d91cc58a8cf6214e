"""OpenAI requests from stored turns: the Responses API (default) and Chat Completions
(``TurnRequest.api == "chat"``). ``providers.requests`` describes the interface.

Responses (``POST /v1/responses``):

* A user turn -> ``{"role": "user", "content": [{"type": "input_text", "text"}]}``.
* An agent turn served by OpenAI through Responses, with payloads -> its output items exactly
  as received (``openai.responses.output_item`` payloads, in event order): reasoning items with
  their ``encrypted_content``, message items with their annotations, web_search_call,
  file_search_call and the other hosted items, function calls. Annotation and error payloads
  are not items of their own (an annotation rides inside its message item). Text a cut stream
  left in no payload follows as an assistant message.
* What cannot go back is left out: a reasoning item whose following item never came (a cut
  answer: the API refuses "Item 'rs_…' of type 'reasoning' was provided without its required
  following item"), and, when nothing is stored upstream, a reasoning item without its
  ``encrypted_content`` (nothing could find it; the reasoning guide: reasoning items of earlier
  turns are dropped by the API anyway); in a cut answer, an item still ``in_progress`` (added,
  never done: never held whole). An item that was done goes back as it was, whatever its
  status says (Azure's searches stay "searching").
* ``previous_response_id`` instead, when the request asks to keep responses upstream
  (``TurnRequest.store``) and the last agent turn's own request did too (its recorded
  ``request`` says ``store`` is not false): then only what follows that response is sent.
* Any other agent turn (another provider, a Chat Completions turn, no payloads) -> an
  ``assistant`` message with the portable text.
* Reasoning models (o-series, gpt-5, codex) are asked for ``reasoning.encrypted_content``
  when nothing is stored upstream, so a later turn can send the reasoning back; a thinking
  budget becomes their ``reasoning.effort`` (other models take none: it is left out).

Chat Completions (``POST /v1/chat/completions``): text messages; an agent turn served through
Chat Completions goes back as its stored assistant message (content, tool calls; annotations
are output only). Web search there is a model choice (``*-search-*`` models), so the flag adds
``web_search_options``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from providers.openai import chat, items
from providers.openai import decode as decode_payload
from providers.openai.common import ERROR, PROVIDER
from providers.requests import (
    PriorTurn,
    ReplayError,
    TurnRequest,
    UpstreamRequest,
    portable_text,
)

RESPONSES_PATH = "/v1/responses"
CHAT_PATH = "/v1/chat/completions"
_REASONING_MODEL = re.compile(r"^(o\d|gpt-5|codex)")
_NOT_ITEMS = (items.ANNOTATION, ERROR)


def build_request(history: Sequence[PriorTurn], turn: TurnRequest) -> UpstreamRequest:
    if turn.api == "chat":
        return _chat_request(history, turn)
    if turn.api not in ("", "responses"):
        raise ValueError(f"unknown OpenAI API {turn.api!r} (expected 'responses' or 'chat')")
    return _responses_request(history, turn)


def build_continuation(
    history: Sequence[PriorTurn], turn: TurnRequest, paused: PriorTurn
) -> UpstreamRequest:
    raise ReplayError("OpenAI responses do not pause: there is nothing to continue")


def _decoded(payload: Any) -> Any:
    value = payload.decoded()
    try:
        decode_payload(value, payload.format)
    except ValueError as exc:
        raise ReplayError(f"a stored OpenAI payload does not decode: {exc}") from None
    return value


def output_items(turn: PriorTurn, store: bool = True) -> list[dict[str, Any]]:
    """The agent turn's Responses output items as received, from its stored payloads, less
    what cannot go back (see the module docstring; ``store``: the request keeps responses
    upstream)."""
    cut = turn.end_reason == "interrupted"
    found: list[dict[str, Any]] = []
    for payload in turn.payloads:
        if payload.provider != PROVIDER or payload.format in _NOT_ITEMS:
            continue
        if payload.format != items.ITEM:
            raise ReplayError(
                f"a {payload.format} payload is no Responses output item: this turn was not "
                "served through the Responses API"
            )
        item = _decoded(payload)
        if item.get("type") == "reasoning" and not store and not item.get("encrypted_content"):
            continue
        if cut and item.get("status") == "in_progress":  # added, never done
            continue
        found.append(item)
    while found and found[-1].get("type") == "reasoning":  # its following item never came
        found.pop()
    if turn.partial_text:  # cut mid-stream: in no payload, so as the text it was
        found.append({"role": "assistant", "content": turn.partial_text})
    return found


def _served_by_responses(turn: PriorTurn, host: str) -> bool:
    return turn.native_for(PROVIDER, host) and any(p.format == items.ITEM for p in turn.payloads)


def _served_by_chat(turn: PriorTurn, host: str) -> bool:
    return (turn.native_for(PROVIDER, host)
            and any(p.format == chat.CHAT_MESSAGE for p in turn.payloads))


def _user_item(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "input_text", "text": text}]}


def _previous_response(history: Sequence[PriorTurn], host: str) -> tuple[str, int] | None:
    """The id of the last agent turn's last response, and where the history after it starts,
    when that response was kept upstream."""
    for index in range(len(history) - 1, -1, -1):
        prior = history[index]
        if prior.role != "agent":
            continue
        request = prior.request
        if (prior.provider != (host or PROVIDER) or not prior.response_ids or request is None
                or request.get("store") is False):
            return None
        return prior.response_ids[-1], index + 1
    return None


def _responses_request(history: Sequence[PriorTurn], turn: TurnRequest) -> UpstreamRequest:
    body: dict[str, Any] = {"model": turn.model, "stream": True, "store": turn.store}
    previous = _previous_response(history, turn.host) if turn.store else None
    if previous is not None:
        body["previous_response_id"], start = previous
        history = history[start:]
    inputs: list[dict[str, Any]] = []
    native_before = previous is not None  # what came before is kept upstream, natively
    for prior in history:
        if prior.role == "user":
            if native_before:  # client tool outputs the proxy kept, answering that turn
                inputs.extend(_decoded(p) for p in prior.payloads
                              if p.provider == PROVIDER and p.format == items.ITEM)
            if prior.text:
                inputs.append(_user_item(prior.text))
            continue
        native_before = _served_by_responses(prior, turn.host)
        if native_before:
            inputs.extend(output_items(prior, turn.store))
        elif text := portable_text(prior):
            inputs.append({"role": "assistant", "content": text})
    if turn.prompt:
        inputs.append(_user_item(turn.prompt))
    if not inputs:
        raise ReplayError("an OpenAI request needs an input")
    body["input"] = inputs
    if turn.max_tokens:
        body["max_output_tokens"] = turn.max_tokens
    # Reasoning is asked of the models that reason (others refuse the parameter).
    reasoning = bool(_REASONING_MODEL.match(turn.model))
    if turn.thinking and reasoning:
        body["reasoning"] = {"effort": _effort(turn.thinking), "summary": "auto"}
    if reasoning and not turn.store:
        body["include"] = ["reasoning.encrypted_content"]
    if turn.web_search:
        body["tools"] = [{"type": "web_search"}]
    return UpstreamRequest(PROVIDER, RESPONSES_PATH, body)


def _effort(budget: int) -> str:
    """A token budget as the effort level Responses takes instead."""
    if budget < 2048:
        return "low"
    return "medium" if budget < 16384 else "high"


def _chat_messages(turn: PriorTurn) -> list[dict[str, Any]]:
    """A Chat Completions agent turn as request messages: its stored assistant messages (text
    and tool calls; annotations are output only), and the ``tool`` messages the proxy kept
    inside it (a tool round) between them."""
    out: list[dict[str, Any]] = []
    for payload in turn.payloads:
        if payload.format != chat.CHAT_MESSAGE:
            continue
        message = _decoded(payload)
        if message.get("role") == "tool":
            out.append(message)
            continue
        if not out or out[-1]["role"] != "assistant":
            out.append({"role": "assistant"})
        last = out[-1]
        if isinstance(message.get("content"), str) and message["content"]:
            last["content"] = last.get("content", "") + message["content"]
        if message.get("tool_calls"):
            last["tool_calls"] = [*last.get("tool_calls", ()), *message["tool_calls"]]
    for message in out:
        if message["role"] == "assistant" and "content" not in message and (
                "tool_calls" not in message):
            message["content"] = ""
    return out


def _chat_request(history: Sequence[PriorTurn], turn: TurnRequest) -> UpstreamRequest:
    messages: list[dict[str, Any]] = []
    for prior in history:
        if prior.role == "user":
            if prior.text:
                messages.append({"role": "user", "content": prior.text})
        elif _served_by_chat(prior, turn.host):
            messages.extend(_chat_messages(prior))
        elif text := portable_text(prior):
            messages.append({"role": "assistant", "content": text})
    if turn.prompt:
        messages.append({"role": "user", "content": turn.prompt})
    if not messages:
        raise ReplayError("a Chat Completions request needs a message")
    body: dict[str, Any] = {"model": turn.model, "messages": messages, "stream": True,
                            "stream_options": {"include_usage": True}}
    if turn.max_tokens:
        body["max_completion_tokens"] = turn.max_tokens
    if turn.thinking and _REASONING_MODEL.match(turn.model):
        body["reasoning_effort"] = _effort(turn.thinking)
    if turn.web_search:
        body["web_search_options"] = {}
    return UpstreamRequest(PROVIDER, CHAT_PATH, body)
