"""What both exports read from a conversation document, the same way."""

from __future__ import annotations

from typing import Any

from ..items import ActivityItem, RenderedTurn


def document_turns(doc: object) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The conversation object and the turn objects of an export document (others ignored)."""
    if not isinstance(doc, dict):
        return {}, []
    conversation = doc.get("conversation") if isinstance(doc.get("conversation"), dict) else {}
    turns = doc.get("turns") if isinstance(doc.get("turns"), list) else []
    return conversation, [t for t in turns if isinstance(t, dict)]


def role_label(turn: RenderedTurn) -> str:
    """The heading word of a turn's role."""
    return {"user": "User", "agent": "Agent", "system": "System"}.get(turn.role, "Turn")


def activity_line(item: ActivityItem) -> str:
    """A hosted activity as one line of plain text."""
    state = "never finished" if item.never_finished else item.state
    what = item.name.replace("_", " ")
    query = f" “{item.query}”" if item.query else ""
    summary = f" — {item.summary}" if item.summary else ""
    error = f" (error: {item.error_code})" if item.error_code else ""
    return f"{what}{query}: {state}{summary}{error}"
