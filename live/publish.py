"""Publishing to a conversation's group: the fast path, which may drop (the DB is the truth)."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
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


def publish_sync(conversation_id: Any, message: dict[str, Any]) -> None:
    async_to_sync(publish)(conversation_id, message)
