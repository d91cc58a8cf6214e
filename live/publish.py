"""Publishing to a conversation's group: the fast path, which may drop (the DB is the truth)."""

from __future__ import annotations

import logging
from typing import Any

from channels.layers import get_channel_layer

from live import protocol

log = logging.getLogger("turnscope.live")


async def publish(conversation_id: Any, message: dict[str, Any], layer: Any = None) -> None:
    layer = layer or get_channel_layer()
    if layer is None:
        return
    message.setdefault("conversation", str(conversation_id))
    message.setdefault("ts", protocol.now_ts())
    try:
        await layer.group_send(
            protocol.group_name(conversation_id),
            {"type": protocol.GROUP_MESSAGE_TYPE, "text": protocol.dumps(message)},
        )
    except Exception:  # a broken layer must never break the turn: viewers resync from the DB
        log.warning("publish to %s failed", conversation_id, exc_info=True)


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
