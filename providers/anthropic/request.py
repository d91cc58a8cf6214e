"""Anthropic Messages requests from stored turns (``providers.requests`` describes the interface).

* A user turn -> a ``user`` message with one text block.
* An agent turn served by Anthropic, with payloads -> an ``assistant`` message whose content is
  the turn's content blocks exactly as received (``anthropic.content_block`` payloads, in event
  order: the stream parser stored each block rebuilt whole at its ``content_block_stop``):
  thinking with its signature, redacted_thinking with its data, server_tool_use and the
  ``*_tool_result`` blocks with their encrypted_content, text with its citations (and their
  encrypted_index), client tool_use. Citation, stop and error payloads are not content (a
  citation rides inside its text block). A block this version kept only as pieces (an unknown
  block streamed with deltas, an unknown delta on a known block) cannot be sent back as it was
  received: ``ReplayError``. Text a cut stream left in no payload follows as a text block.
* Client tool rounds the recording proxy saw: the ``tool_result`` blocks it kept (inside the
  agent turn, or in the user turn after it) go back in user messages where they came, when
  the agent turn they answer went back natively.
* Any other agent turn -> an ``assistant`` text block with the portable text (hosted results
  as short bracketed lines). An agent turn with no text at all is left out.
* Consecutive messages of one role are merged into one (the API would combine them anyway).
* Tool uses the next message does not answer are left out of an earlier turn: a server tool
  use whose result never came (a cut answer, a paused one not continued) and a client
  ``tool_use`` with no ``tool_result`` after it. The API refuses them ("Each `tool_use` block
  must have a corresponding `tool_result` block in the next message"; "Server tools": the
  result follows the ``server_tool_use`` in the same assistant turn), and after a cut the
  docs keep whole blocks only ("Streaming messages" > "Error recovery": "Tool use and
  extended thinking blocks cannot be partially recovered. You can resume streaming from the
  most recent text block"): a block cut mid-stream has no payload, and the text that
  streamed of a cut text block goes back as text.
* ``pause_turn``: the continuation sends the paused turn's blocks back as the last assistant
  message, unchanged, with the same tools: the API continues that message.

Hosted web search: ``web_search_<version>`` as the stored turns used it (the payload versions
name it), else the newest the model takes. A continuation keeps the paused turn's hosted tools
(its recorded request's, else each one its blocks name, at the version they name).
Thinking: ``{"type": "enabled", "budget_tokens"}`` (models from Claude 3.7 on), ``max_tokens``
raised above the budget when it is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from providers.anthropic.blocks import (
    BLOCK,
    CITATION,
    DEFAULT_API_VERSION,
    DELTA,
    ERROR,
    PROVIDER,
    STOP,
    STREAMED_BLOCK,
)
from providers.anthropic.messages import decode
from providers.requests import (
    PriorTurn,
    ReplayError,
    TurnRequest,
    UpstreamRequest,
    by_role,
    portable_text,
)

PATH = "/v1/messages"
DEFAULT_MAX_TOKENS = 4096
NEWEST_WEB_SEARCH = "web_search_20260209"
# Models that predate the newest web search tool version take the first one.
LEGACY_WEB_SEARCH = "web_search_20250305"
_LEGACY_MODELS = ("claude-3", "claude-opus-4-0", "claude-opus-4-1", "claude-sonnet-4-0",
                  "claude-opus-4-2025", "claude-sonnet-4-2025", "claude-sonnet-4-5",
                  "claude-haiku-4-5", "claude-opus-4-5")
_NOT_CONTENT = (CITATION, STOP, ERROR)
# Models before extended thinking (Claude 3.7 was the first to take it).
_NO_THINKING = ("claude-3-5", "claude-3-opus", "claude-3-sonnet", "claude-3-haiku",
                "claude-2", "claude-instant")  # payloads that are no content block of their own


def build_request(history: Sequence[PriorTurn], turn: TurnRequest) -> UpstreamRequest:
    return _request(history, turn, None)


def build_continuation(
    history: Sequence[PriorTurn], turn: TurnRequest, paused: PriorTurn
) -> UpstreamRequest:
    if not paused.native_for(PROVIDER, turn.host):
        raise ReplayError("only an Anthropic turn with its stored content blocks can be continued")
    return _request(history, turn, paused)


def content_blocks(turn: PriorTurn) -> list[dict[str, Any]]:
    """The agent turn's content blocks as received, from its stored payloads (with the client
    ``tool_result`` blocks recorded inside it, in order: ``agent_messages`` puts those in the
    user messages they came in)."""
    blocks: list[dict[str, Any]] = []
    for payload in turn.payloads:
        if payload.provider != PROVIDER or payload.format in _NOT_CONTENT:
            continue
        value = payload.decoded()
        try:
            decode(value, payload.format)
        except ValueError as exc:
            raise ReplayError(f"a stored Anthropic payload does not decode: {exc}") from None
        if payload.format in (STREAMED_BLOCK, DELTA):
            what = (value.get("content_block") or {}).get("type") if payload.format == (
                STREAMED_BLOCK) else value.get("type")
            raise ReplayError(
                f"this turn holds a streamed {what!r} that was kept as pieces: it cannot be "
                "sent back to Anthropic as it was received"
            )
        if payload.format != BLOCK:
            raise ReplayError(f"unexpected Anthropic payload format {payload.format!r}")
        blocks.append(value)
    if turn.partial_text:  # cut mid-stream: in no payload, so as the text it was
        blocks.append({"type": "text", "text": turn.partial_text})
    return blocks


def api_version(history: Sequence[PriorTurn]) -> str:
    """The API version the stored Anthropic payloads were read under (the newest turn's)."""
    for prior in reversed(history):
        for payload in prior.payloads:
            if payload.provider == PROVIDER and payload.version:
                return payload.version.split("+", 1)[0]
    return DEFAULT_API_VERSION


def web_search_tool(history: Sequence[PriorTurn], model: str) -> dict[str, Any]:
    for prior in reversed(history):
        version = (prior.tool_versions.get("web_search")
                   if any(p.provider == PROVIDER for p in prior.payloads) else None)
        if version:
            return {"type": version, "name": "web_search"}
    legacy = model.startswith(_LEGACY_MODELS)
    return {"type": LEGACY_WEB_SEARCH if legacy else NEWEST_WEB_SEARCH, "name": "web_search"}


def _tools(
    history: Sequence[PriorTurn], turn: TurnRequest, paused: PriorTurn | None
) -> list[dict[str, Any]]:
    """The hosted tools of the request. A continuation keeps the paused turn's: its recorded
    request's tools verbatim when there is one, else every hosted tool its blocks were read
    under, at that version (a search left open needs its tool), plus web search if asked."""
    if paused is not None and paused.request is not None:
        recorded = paused.request.get("tools")
        if isinstance(recorded, list) and recorded:
            return list(recorded)
    known = [*history, paused] if paused is not None else list(history)
    tools = [web_search_tool(known, turn.model)] if turn.web_search else []
    if paused is not None:
        for family, version in paused.tool_versions.items():
            if all(t["name"] != family for t in tools):
                tools.append({"type": version, "name": family})
    return tools


def _text_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


def _messages(history: Sequence[PriorTurn], host: str = "") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    native_before = False  # whether the agent turn before went back natively
    for prior in history:
        if prior.role == "user":
            results = _results(prior) if native_before else []
            said = [{"type": "text", "text": prior.text}] if prior.text else []
            if results or said:
                messages.append({"role": "user", "content": [*results, *said]})
            continue
        native_before = prior.native_for(PROVIDER, host)
        if native_before:
            messages.extend(agent_messages(prior))
            continue
        text = portable_text(prior)
        if text:
            messages.append(_text_message("assistant", text))
    return messages


def _results(turn: PriorTurn) -> list[dict[str, Any]]:
    """A user turn's client tool results as recorded (the proxy keeps each ``tool_result``
    block of the request): they answer the tool calls of the agent turn before."""
    found = []
    for payload in turn.payloads:
        if payload.provider == PROVIDER and payload.format == BLOCK:
            value = payload.decoded()
            if isinstance(value, dict) and value.get("type") == "tool_result":
                found.append(value)
    return found


def agent_messages(turn: PriorTurn) -> list[dict[str, Any]]:
    """An agent turn as messages: its content blocks as the assistant's, and the client tool
    results recorded inside it (a tool round the proxy saw) as the user messages between."""
    return by_role(({"role": "user" if block.get("type") == "tool_result" else "assistant",
                     "content": [block]} for block in content_blocks(turn)), "content")


_SERVER_TOOL_USES = ("server_tool_use", "mcp_tool_use")


def _paired(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without the tool uses the message after each does not answer (see the
    module docstring); a message left empty is left out."""
    out: list[dict[str, Any]] = []
    for n, message in enumerate(messages):
        if message["role"] != "assistant" or n == len(messages) - 1:
            out.append(message)
            continue
        after = messages[n + 1]["content"]
        answered = {b.get("tool_use_id") for b in after if b.get("type") == "tool_result"}
        content = [b for b in message["content"]
                   if b.get("type") != "tool_use" or b.get("id") in answered]
        here = {b.get("tool_use_id") for b in content if b.get("tool_use_id")}
        calls_client = any(b.get("type") == "tool_use" for b in content)
        content = [b for b in content if b.get("type") not in _SERVER_TOOL_USES
                   or b.get("id") in here or calls_client]
        if content:
            out.append({**message, "content": content})
    return out


def _request(
    history: Sequence[PriorTurn], turn: TurnRequest, paused: PriorTurn | None
) -> UpstreamRequest:
    messages = by_role(_messages(history, turn.host), "content")
    if turn.prompt:
        messages.append(_text_message("user", turn.prompt))
    messages = _paired(by_role(messages, "content"))
    if paused is not None:
        messages.extend(agent_messages(paused))
    if not messages or messages[0]["role"] != "user":
        raise ReplayError("an Anthropic request needs a user message first: this conversation "
                          "starts with an agent turn (no prompt was recorded before it)")
    max_tokens = turn.max_tokens or DEFAULT_MAX_TOKENS
    body: dict[str, Any] = {"model": turn.model, "max_tokens": max_tokens,
                            "messages": by_role(messages, "content"), "stream": True}
    if turn.thinking and not turn.model.startswith(_NO_THINKING):
        body["thinking"] = {"type": "enabled", "budget_tokens": turn.thinking}
        if max_tokens <= turn.thinking:
            body["max_tokens"] = turn.thinking + DEFAULT_MAX_TOKENS
    tools = _tools(history, turn, paused)
    if tools:
        body["tools"] = tools
    headers = (("content-type", "application/json"),
               ("anthropic-version", api_version([*history, *(p for p in [paused] if p)])))
    return UpstreamRequest(PROVIDER, PATH, body, headers)
