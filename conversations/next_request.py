"""The next request to a provider, built from a conversation's stored turns: the stored turns
as the request side of the adapters reads them (``providers.requests``), and the request for the
next turn or for the continuation of a paused one. The adapters send a turn's native payloads
back exactly to the provider that produced them (a *native replay*) and the portable projection
to any other; a *live replay* (``live.live_replay``) is something else: a recording played again
into a new conversation.

* ``history_for(conversation, upto_turn_index=None) -> list[PriorTurn]``: the conversation's
  user and agent turns before ``upto_turn_index`` (all of them when None), in order, each with
  its portable text, its hosted activity as short texts, the native payloads of its events in
  seq order (a user turn's: the client tool results the recording proxy kept), and (agent
  turns) the hosted tool versions those payloads were read under and its response ids
  (``Turn.responses``).
* ``request_for_next_turn(conversation, turn_request, upto=None) -> UpstreamRequest``: the
  request answering ``turn_request.prompt`` after those turns. With an empty prompt the history
  must end with the user's message (a re-run of the agent turn ``upto``: pass its index).
* ``request_for_continuation(conversation, turn_request, agent_turn_index)``: the request that
  continues the agent turn at ``agent_turn_index`` after it ended with ``pause_turn`` (its
  blocks so far sent back). ``turn_request`` is the one that started the turn; its prompt is
  empty when the user turn before it is stored (the usual case). How often a turn is continued
  is the live call's loop guard (``conversations.limits.may_continue``).

Payload rows are read as stored (JSON text) and handed over unchanged; the adapters decide what
each is. Events cut before their end carry no payload, so they are never sent back natively:
their text is the turn's ``partial_text``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from conversations.models import Conversation, Event, Turn
from providers.requests import (
    PriorTurn,
    StoredPayload,
    TurnRequest,
    UpstreamRequest,
    build_continuation,
    build_request,
)
from streams.bodies import ActivityBody

_TOOL_VERSION = re.compile(r"^([a-z_]+?)_(\d{8})$")  # web_search_20250305 -> web_search
_TERMINAL = ("completed", "failed")


def history_for(conversation: Conversation, upto_turn_index: int | None = None) -> list[PriorTurn]:
    """The turns before ``upto_turn_index`` (all when None), as ``PriorTurn`` values."""
    turns = Turn.objects.filter(conversation=conversation, role__in=("user", "agent"))
    if upto_turn_index is not None:
        turns = turns.filter(index__lt=upto_turn_index)
    return _prior_turns(list(turns.order_by("index")))


def prior_turn(turn: Turn) -> PriorTurn:
    """One stored turn as a ``PriorTurn`` (e.g. the paused agent turn to continue)."""
    return _prior_turns([turn])[0]


def request_for_next_turn(
    conversation: Conversation, turn_request: TurnRequest, upto: int | None = None
) -> UpstreamRequest:
    return build_request(history_for(conversation, upto), turn_request)


def request_for_continuation(
    conversation: Conversation, turn_request: TurnRequest, agent_turn_index: int
) -> UpstreamRequest:
    paused = Turn.objects.get(conversation=conversation, index=agent_turn_index)
    if paused.role != Turn.Role.AGENT:
        raise ValueError(f"turn {agent_turn_index} is no agent turn: it cannot be continued")
    return build_continuation(
        history_for(conversation, agent_turn_index), turn_request, prior_turn(paused)
    )


def _prior_turns(turns: list[Turn]) -> list[PriorTurn]:
    events: dict[Any, list[Event]] = {turn.pk: [] for turn in turns}
    if turns:
        rows = (
            Event.objects.filter(turn_id__in=list(events))
            .select_related("payload")
            .order_by("seq")
        )
        for event in rows:
            events[event.turn_id].append(event)
    return [_prior(turn, events[turn.pk]) for turn in turns]


def _prior(turn: Turn, events: list[Event]) -> PriorTurn:
    texts = [e.text for e in events if e.kind == "message" and e.text]
    text = "\n\n".join(texts)
    payloads = tuple(
        StoredPayload(p.provider, p.format, p.version, p.value)
        for p in (e.payload for e in events) if p is not None
    )
    if turn.role == Turn.Role.USER:
        # A user turn's payloads are the client tool results the recording proxy kept.
        return PriorTurn(role="user", text=text, payloads=payloads)
    response_ids = tuple(
        r["response_id"] for r in turn.responses_list
        if isinstance(r, dict) and isinstance(r.get("response_id"), str) and r["response_id"]
    )
    # The text of blocks cut mid-stream: stored, but in no payload.
    partial = "\n\n".join(e.text for e in events
                           if e.kind == "message" and e.text and e.payload is None)
    return PriorTurn(
        role="agent", text=text, provider=turn.provider, model=turn.model, payloads=payloads,
        tool_versions=_tool_versions(payloads), hosted=_hosted(events),
        response_ids=response_ids, end_reason=turn.end_reason, partial_text=partial,
    )


def _tool_versions(payloads: Iterable[StoredPayload]) -> dict[str, str]:
    """Hosted tool family -> the versioned tool type the payloads were read under (their
    version is ``"<api>+<tool type>"`` when the request declared one)."""
    versions: dict[str, str] = {}
    for payload in payloads:
        for piece in payload.version.split("+")[1:]:
            match = _TOOL_VERSION.match(piece)
            if match:
                versions.setdefault(match.group(1), piece)
    return versions


def _hosted(events: list[Event]) -> tuple[str, ...]:
    """Each hosted activity's last transition as a short text, in the order they started:
    what another provider is told of it (it cannot take the native result)."""
    last: dict[str, ActivityBody] = {}
    for event in events:
        if event.kind != "hosted_activity":
            continue
        body = event.typed_body
        if isinstance(body, ActivityBody):
            last[body.id] = body
    return tuple(_note(body) for body in last.values())


def _note(body: ActivityBody) -> str:
    name = body.name.replace("_", " ")
    query = body.input.get("query") if isinstance(body.input, dict) else None
    queries = body.input.get("queries") if isinstance(body.input, dict) else None
    if not isinstance(query, str) and isinstance(queries, list):
        query = "; ".join(q for q in queries if isinstance(q, str) and q)
    what = f'{name} "{query}"' if isinstance(query, str) and query else name
    state = body.summary or ("" if body.state in _TERMINAL else "did not finish")
    if body.state == "failed":
        state = f"failed: {body.summary or body.error_code or 'error'}"
    return f"{what}: {state}" if state else what
