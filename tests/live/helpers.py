"""Helpers for the live tests: a listener on a conversation group, a reference client."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from live import protocol


class Listener:
    """A raw channel-layer subscriber to one conversation group (no consumer in between)."""

    def __init__(self, conversation_id: Any, layer: Any = None) -> None:
        self.conversation_id = conversation_id
        self.layer = layer or get_channel_layer()
        self.messages: list[dict[str, Any]] = []
        self.channel = ""
        self._receiving: asyncio.Future[Any] | None = None

    async def __aenter__(self) -> Listener:
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(protocol.group_name(self.conversation_id), self.channel)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._receiving is not None:
            self._receiving.cancel()
        await self.layer.group_discard(protocol.group_name(self.conversation_id), self.channel)

    async def drain(self, until: asyncio.Task[Any] | None = None, quiet: float = 0.3) -> list:
        """Every message until none came for ``quiet`` seconds (and ``until`` is done). One
        receive stays pending across quiet spells: a receive cancelled by a timeout can take
        a message with it (Redis layer, a loaded machine: deltas missing from the middle)."""
        while True:
            if self._receiving is None:
                self._receiving = asyncio.ensure_future(self.layer.receive(self.channel))
            done, _ = await asyncio.wait({self._receiving}, timeout=quiet)
            if not done:
                if until is None or until.done():
                    return self.messages
                continue
            message, self._receiving = self._receiving.result(), None
            self.messages.extend(unbatch(orjson.loads(message["text"])))


def unbatch(message: dict[str, Any]) -> list[dict[str, Any]]:
    if message.get("type") == "batch":
        return list(message["messages"])
    return [message]


def by_type(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in messages if m["type"] == kind]


class ReferenceClient:
    """What static/live.js does, in Python: apply messages by seq, resync from the state
    document on a gap. Used to check the protocol converges whatever the layer drops."""

    def __init__(self, conversation: Any, state_fn: Any) -> None:
        self.conversation = conversation
        self.state_fn = state_fn  # async (after) -> state document
        self.last_seq = 0
        self.committed: dict[int, str] = {}  # seq -> text (message / reasoning events)
        self.tails: dict[str, dict[str, Any]] = {}  # turn -> {"delta_seq", "text"}
        self.resyncs = 0

    async def resync(self) -> None:
        self.resyncs += 1
        state = await self.state_fn(self.last_seq)
        from conversations.models import Event

        events = await sync_to_async(list)(
            Event.objects.filter(conversation_id=self.conversation.pk,
                                 seq__gt=self.last_seq, seq__lte=state["last_seq"])
            .values_list("seq", "text")
        )
        self.committed.update(dict(events))
        self.last_seq = max(self.last_seq, state["last_seq"])
        self.tails = {
            turn: {"delta_seq": t["delta_seq"], "text": t["text"]}
            for turn, t in state["tails"].items()
        }

    async def handle(self, m: dict[str, Any]) -> None:
        if m["type"] == "batch":
            for inner in m["messages"]:
                await self.handle(inner)
        elif m["type"] == "events":
            if m["seq_to"] <= self.last_seq:
                return
            if m["seq_from"] != self.last_seq + 1:
                await self.resync()
                return
            from conversations.models import Event

            rows = await sync_to_async(list)(
                Event.objects.filter(conversation_id=self.conversation.pk,
                                     seq__gte=m["seq_from"], seq__lte=m["seq_to"])
                .values_list("seq", "text")
            )
            self.committed.update(dict(rows))
            self.last_seq = m["seq_to"]
        elif m["type"] == "delta":
            tail = self.tails.setdefault(m["turn"], {"delta_seq": 0, "text": ""})
            if m["delta_seq"] <= tail["delta_seq"]:
                return
            if m["delta_seq"] != tail["delta_seq"] + 1:
                await self.resync()
                return
            if m["block_seq"] == m["delta_seq"]:
                tail["text"] = ""
            tail["text"] += m["text"]
            tail["delta_seq"] = m["delta_seq"]
        elif m["type"] == "turn" and m["seq"] > self.last_seq:
            await self.resync()
