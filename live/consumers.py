"""The websocket a conversation page subscribes to: ``/ws/conversations/<id>/``.

Behind AuthMiddlewareStack and ``live.origins.ExactOriginValidator`` (``turnscope.asgi``; the
session comes from ``live.middleware.WebsocketSession``, so frames are not wrapped by it). Only
the owner of the conversation (or staff) may subscribe; the connection is accepted and then
closed with an application close code, so the browser knows not to retry: 4401 not logged in,
4403 not yours (or no such conversation). Browser messages are validated (``live.protocol``)
and answered to that browser alone; nothing a browser sends reaches the channel layer.

Close codes are application codes (4000 + the HTTP status they mean): the protocol's own 1003,
1008 and 1009 are not codes a server application may send (autobahn, under daphne, refuses them
and the browser saw an abnormal 1006). ``static/live.js`` reads them.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from conversations.actions import announce
from conversations.models import Conversation
from live import protocol, state
from live.hub import hub

log = logging.getLogger("turnscope.live")

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_BAD_MESSAGES = 4400  # too many malformed messages
CLOSE_TOO_BIG = 4413
CLOSE_UNSUPPORTED = 4415  # a binary frame
CLOSE_TOO_FREQUENT = 4429  # over RATE_LIMIT messages in RATE_WINDOW: reconnect after a while

MAX_BAD_MESSAGES = 5
RATE_WINDOW = 10.0  # seconds
RATE_LIMIT = 60  # client messages per window


def _can_view(user: Any, conversation_id: uuid.UUID) -> Conversation | None:
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:
        return None
    if user.is_staff or (conversation.owner_id is not None and conversation.owner_id == user.pk):
        return conversation
    return None


class LiveConsumer(AsyncWebsocketConsumer):
    # No channel of its own: the process's hub (live.hub) reads the group once and hands each
    # message to live_message of every local viewer.
    channel_layer_alias = None
    conversation: Conversation | None = None
    group: str | None = None

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        try:
            conversation_id = uuid.UUID(str(self.scope["url_route"]["kwargs"]["conversation_id"]))
        except (KeyError, ValueError):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.conversation = await database_sync_to_async(_can_view)(user, conversation_id)
        if self.conversation is None:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.group = protocol.group_name(conversation_id)
        self._bad = 0
        self._window_start = time.monotonic()
        self._window_count = 0
        await hub().join(self.group, self)
        from live import demo_hooks

        demo_hooks.viewer_joined(conversation_id)
        # Joined first, then the snapshot: anything committed after it arrives as messages.
        snapshot = await state.shared_conversation_state(self.conversation)
        snapshot["type"] = "hello"
        await self.send(text_data=protocol.dumps(snapshot))

    async def disconnect(self, code: int) -> None:
        if self.group:
            await hub().leave(self.group, self)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.group is None:
            return
        if bytes_data is not None:
            await self.close(code=CLOSE_UNSUPPORTED)
            return
        if text_data is not None and len(text_data) > protocol.MAX_CLIENT_MESSAGE:
            await self.close(code=CLOSE_TOO_BIG)
            return
        if not self._within_rate():
            await self.close(code=CLOSE_TOO_FREQUENT)
            return
        try:
            message = protocol.parse_client_message(text_data, bytes_data)
        except protocol.InvalidClientMessage as exc:
            self._bad += 1
            if self._bad >= MAX_BAD_MESSAGES:
                await self.close(code=CLOSE_BAD_MESSAGES)
                return
            await self.send(text_data=protocol.dumps({"type": "error", "error": str(exc)}))
            return
        if message["type"] == "ping":
            await self.send(text_data=protocol.dumps({"type": "pong", "ts": protocol.now_ts()}))
        elif self.conversation is not None:
            snapshot = await state.shared_conversation_state(self.conversation, message["after"])
            await self.send(text_data=protocol.dumps(snapshot))

    def _within_rate(self) -> bool:
        now = time.monotonic()
        if now - self._window_start > RATE_WINDOW:
            self._window_start, self._window_count = now, 0
        self._window_count += 1
        return self._window_count <= RATE_LIMIT

    async def live_message(self, event: dict[str, Any]) -> None:
        """A message the turn runner or an action published to this group (from the hub)."""
        text = event.get("text")
        if isinstance(text, str):
            await self.send(text_data=text)


class ListConsumer(LiveConsumer):
    """The conversation list's websocket, ``/ws/conversations/``: what the actions announce to
    the viewer's own conversations (``conversations.actions.announce.owner_group``: added,
    renamed, removed). Nothing to resync: the list is a page of a search, and a page that
    lost its socket says it may be out of date. The same guards on what a browser sends."""

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.group = announce.owner_group(user.pk)
        self._bad = 0
        self._window_start = time.monotonic()
        self._window_count = 0
        await hub().join(self.group, self)
        await self.send(text_data=protocol.dumps({"type": "hello", "ts": protocol.now_ts()}))
