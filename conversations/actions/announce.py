"""Telling open pages what an action changed, on commit, through the live channel layer.

The messages go to the groups the live runner publishes to (``conversation_group``: a
conversation's page, ``live.consumers.LiveConsumer``) and to one group per owner
(``owner_group``: the conversation list, ``live.consumers.ListConsumer``). Server -> browser,
beside ``live.protocol``'s messages:

* ``{"type": "conversation", "op": "add", "conversation", "title", "shown"}`` (owner group): a
  conversation was created (a new one, a fork, an import, a replay, one the proxy or OTLP
  started);
* ``{"type": "conversation", "op": "update", "conversation", "title", "shown"}`` (both): it was
  renamed; ``title`` is the stored title, ``shown`` it as plain text (what pages show);
* ``{"type": "conversation", "op": "remove", "conversation"}`` (both): it was deleted;
* ``{"type": "share", "op": "add" | "update" | "remove", "share", "conversation",
  "turn_count"}`` (owner group): a link made, moved to now, revoked (``actions.share``; never
  its token);
* ``live.protocol``'s ``turn`` message (``turn_message``, the runner's too) for each turn
  stored into a conversation outside the runner (an API ingest, an OTLP span): a page whose
  ``last_seq`` is behind the message's ``seq`` resyncs and fetches the turns.

A process whose layer reaches no page (a recorder process beside the server) sets a relay
(``relay_to``): what it announces, and what ``live.publish`` publishes there, goes to the relay
instead, and the server sends it on (``deliver``).

Announcing is the fast path and may drop (the layer is down, the message expires): the
database stays the truth, and a page that reconnects reads the title again from the state
document. A message is sent only once its transaction has committed, so a page never shows a
change that was rolled back, and one that refetches on it reads the change.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from conversations.models import Turn
from conversations.rendering.plain import plain_line

log = logging.getLogger("turnscope.live")

GROUP_MESSAGE_TYPE = "live.message"  # handled by the consumers' live_message
SEND_TIMEOUT = 2.0  # seconds: a layer that hangs must not hold the request that committed
QUIET_AFTER_FAILURE = 5.0  # seconds: announcements dropped at once after a failed send

# A process whose channel layer reaches no open page (a recorder beside the server:
# proxy.recorders) hands what it announces to one whose layer does: ``(groups, text)``.
Relay = Callable[[Sequence[str], str], None]
_relay: Relay | None = None


def relay_to(relay: Relay | None) -> None:
    global _relay
    _relay = relay


def current_relay() -> Relay | None:
    return _relay


# When a send last failed: an import of a hundred conversations with Redis down waits on it
# once, not a hundred times (live.publish backs off the same way for the runner).
_failed_at = -QUIET_AFTER_FAILURE


def conversation_group(conversation_id: Any) -> str:
    return f"conv.{uuid.UUID(str(conversation_id)).hex}"


def owner_group(owner_id: Any) -> str:
    return f"owner.{int(owner_id)}"


def shown_title(title: str) -> str:
    """A title as the pages show it (the markdown syntax of a title taken from a message is
    not shown); empty when there is nothing to show, and each page says "Untitled" its way."""
    return plain_line(title or "").strip()


def turn_message(turn: Turn, seq: int) -> dict[str, Any]:
    """A turn as it stands, ``seq`` the conversation's last committed event seq."""
    return {
        "type": "turn", "turn": str(turn.pk), "index": turn.index, "role": turn.role,
        "status": turn.status, "end_reason": turn.end_reason or None,
        "model": turn.model_provenance, "seq": seq,
    }


def added(conversation_id: Any, owner_id: Any, title: str) -> None:
    announce({"type": "conversation", "op": "add", "conversation": str(conversation_id),
              "title": title, "shown": shown_title(title)}, owner=owner_id)


def updated(conversation_id: Any, owner_id: Any, title: str) -> None:
    announce({"type": "conversation", "op": "update", "conversation": str(conversation_id),
              "title": title, "shown": shown_title(title)},
             conversation=conversation_id, owner=owner_id)


def removed(conversation_id: Any, owner_id: Any) -> None:
    announce({"type": "conversation", "op": "remove", "conversation": str(conversation_id)},
             conversation=conversation_id, owner=owner_id)


def announce(message: dict[str, Any], *, conversation: Any = None, owner: Any = None) -> None:
    """Send ``message`` to the conversation's and the owner's groups once the current
    transaction commits (at once outside one). A conversation without an owner has no list
    to tell."""
    groups = []
    if conversation is not None:
        groups.append(conversation_group(conversation))
    if owner is not None:
        groups.append(owner_group(owner))
    if not groups:
        return
    transaction.on_commit(lambda: send(groups, message), robust=True)


def send(groups: Sequence[str], message: dict[str, Any]) -> None:
    text = orjson.dumps({**message, "ts": round(time.time() * 1000, 3)}).decode()
    if _relay is not None:
        try:
            _relay(groups, text)
        except Exception:
            _failed()
        return
    layer = get_channel_layer()
    if layer is None or time.monotonic() - _failed_at < QUIET_AFTER_FAILURE:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    try:
        if loop is not None:  # committed on an event loop's own thread: send from it
            loop.create_task(deliver(groups, text, layer))
        else:
            async_to_sync(deliver)(groups, text, layer)
    except Exception:  # never the committed action's failure: pages resync from the store
        _failed()


async def deliver(groups: Sequence[str], text: str, layer: Any = None) -> None:
    """``text`` (a message as sent) to ``groups`` on this process's layer."""
    layer = layer or get_channel_layer()
    if layer is None or time.monotonic() - _failed_at < QUIET_AFTER_FAILURE:
        return
    try:
        async with asyncio.timeout(SEND_TIMEOUT):
            for group in groups:
                await layer.group_send(group, {"type": GROUP_MESSAGE_TYPE, "text": text})
    except Exception:
        _failed()


def _failed() -> None:
    global _failed_at
    log.warning("announcing failed: what changed is not announced for %.0f s (pages read it "
                "when they load or reconnect)", QUIET_AFTER_FAILURE, exc_info=True)
    _failed_at = time.monotonic()
