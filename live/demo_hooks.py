"""In-process signal for the demo: start streaming when the first viewer opens the page."""

from __future__ import annotations

import asyncio
from typing import Any

_waiting: dict[str, asyncio.Event] = {}


def watch(conversation_id: Any) -> asyncio.Event:
    """An event set when a viewer subscribes to ``conversation_id`` in this process."""
    return _waiting.setdefault(str(conversation_id), asyncio.Event())


def viewer_joined(conversation_id: Any) -> None:
    event = _waiting.get(str(conversation_id))
    if event is not None:
        event.set()
