"""The request side of the adapters: from a conversation's stored turns, the provider's native
request for the next turn (or for the continuation of a paused one).

Plain data in, plain data out: this never touches Django models
(``conversations.next_request`` reads the store and hands over ``PriorTurn`` values). The interface:

* ``StoredPayload`` — one native payload as the store keeps it (its JSON text, verbatim).
* ``PriorTurn`` — one stored turn: ``role`` ("user" / "agent"), who served it (``provider``,
  ``model``), its portable ``text``, its ``hosted`` activity as short texts, and for an agent
  turn the native ``payloads`` of its responses in order (event seq order), the ``request``
  recorded for it when there is one, the hosted ``tool_versions`` it used (family -> versioned
  tool type, e.g. ``web_search`` -> ``web_search_20250305``), its ``response_ids`` and
  ``end_reason``, and ``partial_text``: the text of a block the stream was cut in (an
  interrupted turn), which no payload holds, sent after the native content as plain text. A
  user turn's ``payloads`` are the client tool results the recording proxy kept with it; they
  go back only after an agent turn that went back natively (they answer its calls).
* ``TurnRequest`` — what the person asks for: ``provider``, ``model``, ``prompt``,
  ``web_search`` on/off, ``max_tokens``, ``thinking`` (a token budget; None: not asked for,
  the model's default), ``api`` (OpenAI: "responses", the default, or "chat"), ``store``
  (OpenAI: let the provider keep the response, so a later turn can name it by
  ``previous_response_id``).
* ``UpstreamRequest`` — what to send: ``provider``, ``method``, ``path`` (appended to the
  configured base URL, ``upstream.client.url``), ``query``, ``headers`` (never the key: the
  caller adds it), ``body`` (a JSON object), ``stream``; ``wire_context(endpoint)`` is what
  the adapter reading the answer takes (the runner parses the response with it, so the
  payloads it stores are stamped with this request's hosted tool versions).
* ``build_request(history, turn)`` — the request for a new agent turn answering ``turn.prompt``
  after ``history``. An empty prompt means the history already ends with the user's message
  (a re-run of the agent turn after it).
* ``build_continuation(history, turn, paused)`` — Anthropic ``pause_turn``: the same request
  with the paused agent turn so far (``paused``, its payloads) sent back as the last assistant
  message, which the API continues.

Same provider: earlier agent turns are sent back from their native payloads, unchanged
(``providers/<provider>/request.py`` knows which payload is which block, item or part). Another
provider, or a turn with no payloads (an imported chat export): the portable projection only —
the text, with hosted results as short text; never fabricated native state. A payload that does
not decode, or cannot be sent back as it was received, raises ``ReplayError``: never a silent
downgrade to text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from providers.protocol import WireContext
from streams.errors import MalformedInput

__all__ = [
    "PriorTurn",
    "ReplayError",
    "StoredPayload",
    "TurnRequest",
    "UpstreamRequest",
    "build_continuation",
    "build_request",
    "portable_text",
]


class ReplayError(MalformedInput):
    """A stored turn cannot be sent back to its provider as it was received (a payload that does
    not decode, or one this version cannot replay exactly). Never answered by a downgrade."""


@dataclass(frozen=True, slots=True)
class StoredPayload:
    """A native provider payload as stored: ``value`` is its JSON text, verbatim."""

    provider: str
    format: str
    version: str
    value: str

    def decoded(self) -> Any:
        """The value as JSON; ``ReplayError`` when the stored text is not JSON."""
        try:
            return orjson.loads(self.value)
        except orjson.JSONDecodeError as exc:
            raise ReplayError(
                f"a stored {self.provider} {self.format} payload is not JSON ({exc})"
            ) from None


@dataclass(frozen=True, slots=True)
class PriorTurn:
    """One stored turn, as the request builders read it."""

    role: Literal["user", "agent"]
    text: str = ""
    provider: str = ""
    model: str = ""
    payloads: tuple[StoredPayload, ...] = ()
    request: Mapping[str, Any] | None = None
    tool_versions: Mapping[str, str] = field(default_factory=dict)
    hosted: tuple[str, ...] = ()
    response_ids: tuple[str, ...] = ()
    end_reason: str = ""
    partial_text: str = ""  # text of blocks cut mid-stream: in no payload (sent as plain text)

    def native_for(self, provider: str, host: str = "") -> bool:
        """Whether this turn goes back from its native payloads to a request in ``provider``'s
        wire format sent to ``host`` (the service: "" for ``provider``'s own API; Azure,
        Vertex AI or a named OpenAI-compatible upstream otherwise). Only to the service that
        served it: another one cannot take its ids, signatures or encrypted content."""
        return (self.role == "agent" and self.provider == (host or provider)
                and any(p.provider == provider for p in self.payloads))


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """The next turn as the person asks for it."""

    provider: str
    model: str
    prompt: str = ""
    web_search: bool = False
    max_tokens: int | None = None
    thinking: int | None = None  # a reasoning budget in tokens; None: the provider's default
    api: str = ""  # OpenAI: "responses" (default) or "chat"
    # The service the request goes to when it is not ``provider``'s own API (``azure``,
    # ``vertex``, a named upstream such as ``xai``): its earlier answers go back natively.
    host: str = ""
    store: bool = False  # OpenAI Responses: keep the response upstream (previous_response_id)


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    """A provider request ready to send (the key is added by the caller, never here)."""

    provider: str
    path: str
    body: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = (("content-type", "application/json"),)
    method: str = "POST"
    query: str = ""
    stream: bool = True

    def content(self) -> bytes:
        """The body as the bytes to send."""
        return orjson.dumps(self.body)

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def wire_context(self, endpoint: str | None = None) -> WireContext:
        """What the adapter reading the answer needs to know of this request: the API version,
        the body (it names the hosted tool versions the payloads are stamped with) and the URL
        it went to (``endpoint``, without any key; it names Gemini's API version)."""
        return WireContext(self.header("anthropic-version"), self.body, endpoint)


def build_request(history: Sequence[PriorTurn], turn: TurnRequest) -> UpstreamRequest:
    """The native request of ``turn.provider`` for the agent turn after ``history``."""
    from providers import registry  # the provider packages' builders import this module

    return registry.get(turn.provider).build_request(history, turn)


def build_continuation(
    history: Sequence[PriorTurn], turn: TurnRequest, paused: PriorTurn
) -> UpstreamRequest:
    """The request continuing ``paused`` (an agent turn that ended with ``pause_turn``)."""
    from providers import registry

    return registry.get(turn.provider).build_continuation(history, turn, paused)


def portable_text(turn: PriorTurn) -> str:
    """A turn in the portable projection, as text another provider can take: its hosted
    activity as short bracketed lines, then its text."""
    notes = [f"[{note}]" for note in turn.hosted if note]
    return "\n".join([*notes, turn.text] if turn.text else notes)


def by_role(items: Iterable[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Consecutive messages (Anthropic ``content``) or contents (Gemini ``parts``) of one role
    as one: a conversation's turns alternate between the user and the model. The items are
    not changed."""
    merged: list[dict[str, Any]] = []
    for item in items:
        if merged and merged[-1]["role"] == item["role"]:
            merged[-1] = {"role": item["role"], key: [*merged[-1][key], *item[key]]}
        else:
            merged.append(item)
    return merged
