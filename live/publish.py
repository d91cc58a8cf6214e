"""Publishing to a conversation's group: the fast path, which may drop (the DB is the truth).

When the layer fails (Redis down or restarting), publishing backs off: the first publish after
each backoff interval (doubling from ``BACKOFF_FIRST`` to ``BACKOFF_MAX`` seconds) tries again,
the ones in between are dropped at once, so a turn streams on at full speed without waiting
on a dead server. Viewers recover what was dropped as from any other loss: the next message they
get shows a gap in its seqs, or their idle check asks for the state, and they resync from the
store.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

from channels.layers import get_channel_layer

from conversations.actions import announce
from live import protocol
from live.loop_io import off_loop

log = logging.getLogger("turnscope.live")

BACKOFF_FIRST = 0.25  # seconds
BACKOFF_MAX = 2.0
PUBLISH_TIMEOUT = 2.0  # a layer that hangs (not just refuses) must not stall the turn


class _Outage:
    """The layer's state as publishing sees it, per layer: up, or down until a next try."""

    def __init__(self) -> None:
        self.retry_at = 0.0
        self.backoff = 0.0
        self.dropped = 0

    def may_try(self) -> bool:
        if self.backoff and time.monotonic() < self.retry_at:
            self.dropped += 1
            return False
        return True

    def failed(self) -> None:
        if not self.backoff:
            log.warning("publishing failed: backing off (viewers resync from the store)",
                        exc_info=True)
        self.backoff = min(BACKOFF_MAX, self.backoff * 2 or BACKOFF_FIRST)
        self.retry_at = time.monotonic() + self.backoff
        self.dropped += 1

    def succeeded(self) -> None:
        if self.backoff:
            log.warning("publishing again (%d messages dropped meanwhile)", self.dropped)
        self.backoff, self.dropped = 0.0, 0


# Per layer object (never by id(): a new layer may reuse a dead one's id, and its outage).
_outages: weakref.WeakKeyDictionary[Any, _Outage] = weakref.WeakKeyDictionary()


def _outage(layer: Any) -> _Outage:
    outage = _outages.get(layer)
    if outage is None:
        outage = _outages[layer] = _Outage()
    return outage


async def publish(conversation_id: Any, message: dict[str, Any], layer: Any = None) -> None:
    message.setdefault("conversation", str(conversation_id))
    message.setdefault("ts", protocol.now_ts())
    if (relay := announce.current_relay()) is not None and layer is None:  # a recorder process
        try:
            await off_loop(relay, [protocol.group_name(conversation_id)],
                            protocol.dumps(message))
        except Exception:  # viewers resync from the store, as from any other loss
            log.warning("could not hand a message to the server", exc_info=True)
        return
    layer = layer or get_channel_layer()
    if layer is None:
        return
    outage = _outage(layer)
    if not outage.may_try():
        return
    try:
        async with asyncio.timeout(PUBLISH_TIMEOUT):  # no task of its own, unlike wait_for
            await layer.group_send(
                protocol.group_name(conversation_id),
                {"type": protocol.GROUP_MESSAGE_TYPE, "text": protocol.dumps(message)},
            )
    except Exception:  # a broken layer must never break the turn: viewers resync from the DB
        outage.failed()
    else:
        outage.succeeded()


async def publish_all(
    conversation_id: Any, messages: list[dict[str, Any]], layer: Any = None
) -> None:
    """Several messages in order, as one frame: ``{"type": "batch", "messages": [...]}``
    (a single message goes as itself). Each message keeps its own seqs and timestamp."""
    if not messages:
        return
    ts = protocol.now_ts()
    for message in messages:
        message.setdefault("conversation", str(conversation_id))
        message.setdefault("ts", ts)
    if len(messages) == 1:
        await publish(conversation_id, messages[0], layer)
    else:
        await publish(conversation_id, {"type": "batch", "messages": messages}, layer)
