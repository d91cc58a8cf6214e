"""The OpenWOP conversation-turn projection (schemas/v2/conversation-turn.schema.json).

One OpenWOP ``ConversationTurn`` per stored turn:

- ``messageId`` ``"{conversationId}:{turnIndex}:{role}"`` (deterministic, so re-folding is
  idempotent), ``turnIndex``, ``role``, ``ts`` (the turn's creation time, ms since the epoch);
- ``from``: the agent id on agent turns, the literal ``"user"`` on user turns, ``"system"`` on
  system turns; agent turns also carry ``speakerId`` (the same id: one host-side speaker per
  agent) because v2 requires it on ``role: "agent"``;
- ``agent`` only on agent turns: ``{agentId, model?}``. ``model`` is exactly ``{provider, model}``
  as recorded once from the response, present when the provenance is known, and never on user or
  system turns;
- ``content``: ``{"text": …, "events": […]}`` — the concatenated message text and the turn's
  events in the portable projection (OpenWOP leaves content opaque).

Agent ids must match OpenWOP's ``agentId`` grammar (``^[A-Za-z0-9._~:-]{1,128}$``); other
characters (a model name may hold ``/``, ``@`` or ``+``) are escaped as ``~XX`` per UTF-8 byte,
which is reversible, and an id that would exceed 128 characters is shortened with a digest.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from conversations.models import Conversation, Event, Turn
from conversations.projections import event_dict, turns_with_events

_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]")  # "~" is the escape character, so it is escaped too


def agent_id(value: str) -> str:
    """``value`` as a valid OpenWOP agentId."""
    value = value or "agent"
    escaped = _UNSAFE.sub(lambda m: "".join(f"~{b:02X}" for b in m.group().encode()), value)
    if len(escaped) > 128:
        digest = hashlib.sha256(value.encode()).hexdigest()[:16]
        escaped = f"{escaped[:111]}~{digest}"
    return escaped


def _ms(turn: Turn) -> int:
    return max(0, int(turn.created_at.timestamp() * 1000))


def turn_dict(conversation_id: Any, turn: Turn, events: Iterable[Event]) -> dict[str, Any]:
    portable = [event_dict(e, "portable") for e in events]
    text = "".join(e.get("text", "") for e in portable if e["kind"] == "message")
    out: dict[str, Any] = {
        "messageId": f"{conversation_id}:{turn.index}:{turn.role}",
        "from": turn.role,
        "role": turn.role,
        "turnIndex": turn.index,
        "ts": _ms(turn),
        "content": {"text": text, "events": portable},
    }
    if turn.role == Turn.Role.AGENT:
        speaker = agent_id(turn.agent_id)
        out["from"] = speaker
        out["speakerId"] = speaker
        agent: dict[str, Any] = {"agentId": speaker}
        if turn.model_provenance:
            agent["model"] = dict(turn.model_provenance)  # exactly {provider, model}
        out["agent"] = agent
    return out


def conversation_turns(conversation: Conversation) -> list[dict[str, Any]]:
    """Every turn of ``conversation`` as an OpenWOP ConversationTurn, in turn order."""
    return [turn_dict(conversation.pk, t, events)
            for t, events in turns_with_events(conversation, "portable")]
