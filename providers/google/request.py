"""Gemini ``streamGenerateContent`` requests (SSE, ``alt=sse``) from stored turns
(``providers.requests`` describes the interface).

* A user turn -> ``{"role": "user", "parts": [{"text"}]}``.
* An agent turn served by Gemini through generateContent, with payloads -> one ``model``
  content whose parts are the turn's parts as received, in event order: each text or thought
  block's parts (``google.candidate`` payloads: streamed text merged into one part, its
  ``thoughtSignature`` kept where it came), and the function calls, code and Google tool parts
  (``toolCall`` / ``toolResponse``, with their ids and signatures) kept as ``google.part``.
  Grounding metadata, the search entry point and errors are response metadata, not content.
  Text a cut stream left in no payload follows as a text part.
  A turn that came from the Interactions API holds steps, not parts: ``ReplayError``.
* Client tool rounds the recording proxy saw: the ``functionResponse`` parts it kept (inside the
  agent turn, or in the user turn after it) go back in user contents where they came, when
  the agent turn they answer went back natively.
* Any other agent turn -> a ``model`` content with the portable text.
* Consecutive contents of one role are merged into one (turns alternate).

Web search: ``{"googleSearch": {}}``. Thinking: ``generationConfig.thinkingConfig`` with the
budget and ``includeThoughts``, for the models that think (Gemini 2.5 and later).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from providers.google.common import (
    CANDIDATE,
    DEFAULT_API_VERSION,
    ENTRY_POINT,
    ERROR,
    ITEM,
    METADATA,
    PART,
    PROVIDER,
    STEP,
    decode,
)
from providers.requests import (
    PriorTurn,
    ReplayError,
    TurnRequest,
    UpstreamRequest,
    by_role,
    portable_text,
)

_NOT_CONTENT = (METADATA, ENTRY_POINT, ERROR)
_VERSION = re.compile(r"^gemini-(\d+)\.(\d+)")


def build_request(history: Sequence[PriorTurn], turn: TurnRequest) -> UpstreamRequest:
    contents: list[dict[str, Any]] = []
    native_before = False  # whether the agent turn before went back natively
    for prior in history:
        if prior.role == "user":
            results = _responses(prior) if native_before else []
            said = [{"text": prior.text}] if prior.text else []
            if results or said:
                contents.append({"role": "user", "parts": [*results, *said]})
            continue
        native_before = prior.native_for(PROVIDER, turn.host)
        if native_before:
            contents.extend(model_contents(prior))
        elif text := portable_text(prior):
            contents.append({"role": "model", "parts": [{"text": text}]})
    if turn.prompt:
        contents.append(_user(turn.prompt))
    if not contents:
        raise ReplayError("a Gemini request needs a content")
    body: dict[str, Any] = {"contents": by_role(contents, "parts")}
    config: dict[str, Any] = {}
    if turn.max_tokens:
        config["maxOutputTokens"] = turn.max_tokens
    if turn.thinking and thinks(turn.model):
        config["thinkingConfig"] = {"thinkingBudget": turn.thinking, "includeThoughts": True}
    if config:
        body["generationConfig"] = config
    if turn.web_search:
        body["tools"] = [{"googleSearch": {}}]
    version = _api_version(history)
    path = f"/{version}/models/{turn.model}:streamGenerateContent"
    return UpstreamRequest(PROVIDER, path, body, query="alt=sse")


def thinks(model: str) -> bool:
    """Whether the Gemini model takes a thinking budget (2.5 and later)."""
    match = _VERSION.match(model)
    return match is not None and (int(match.group(1)), int(match.group(2))) >= (2, 5)


def build_continuation(
    history: Sequence[PriorTurn], turn: TurnRequest, paused: PriorTurn
) -> UpstreamRequest:
    raise ReplayError("Gemini responses do not pause: there is nothing to continue")


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def _api_version(history: Sequence[PriorTurn]) -> str:
    """The Gemini API version (Vertex AI payloads name theirs too, but the Gemini API's own
    path is what ``upstream.client`` reaches)."""
    for prior in reversed(history):
        for payload in prior.payloads:
            if payload.provider == PROVIDER and payload.version.startswith("v"):
                return payload.version
    return DEFAULT_API_VERSION


def _responses(turn: PriorTurn) -> list[dict[str, Any]]:
    """A user turn's client function responses as recorded (the proxy keeps each part)."""
    found = []
    for payload in turn.payloads:
        if payload.provider == PROVIDER and payload.format == PART:
            value = payload.decoded()
            if isinstance(value, dict) and "functionResponse" in value:
                found.append(value)
    return found


def model_contents(turn: PriorTurn) -> list[dict[str, Any]]:
    """An agent turn as contents: its parts as the model's, and the client function responses
    recorded inside it (a tool round the proxy saw) as the user contents between."""
    return by_role(({"role": "user" if "functionResponse" in part else "model", "parts": [part]}
                    for part in model_parts(turn)), "parts")


def model_parts(turn: PriorTurn) -> list[dict[str, Any]]:
    """The agent turn's content parts as received, from its stored payloads."""
    parts: list[dict[str, Any]] = []
    for payload in turn.payloads:
        if payload.provider != PROVIDER or payload.format in _NOT_CONTENT:
            continue
        if payload.format in (STEP, ITEM):
            raise ReplayError(
                "this turn came from the Gemini Interactions API: its steps are no "
                "generateContent parts"
            )
        value = payload.decoded()
        try:
            decode(value, payload.format)
        except ValueError as exc:
            raise ReplayError(f"a stored Gemini payload does not decode: {exc}") from None
        if payload.format == CANDIDATE:
            content = value.get("content") if isinstance(value, dict) else None
            found = content.get("parts") if isinstance(content, dict) else None
            if not isinstance(found, list):
                raise ReplayError("a stored Gemini candidate has no content parts")
            parts.extend(found)
        elif payload.format == PART:
            parts.append(value)
        else:
            raise ReplayError(f"unexpected Gemini payload format {payload.format!r}")
    if turn.partial_text:  # cut mid-stream: in no payload, so as the text it was
        parts.append({"text": turn.partial_text})
    return parts
