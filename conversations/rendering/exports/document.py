"""What both exports read from a conversation document, the same way."""

from __future__ import annotations

from typing import Any

from ..activities import label_text
from ..items import ActivityItem, RenderedTurn


def document_turns(doc: object) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The conversation object and the turn objects of an export document (others ignored)."""
    if not isinstance(doc, dict):
        return {}, []
    conversation, turns = doc.get("conversation"), doc.get("turns")
    return (conversation if isinstance(conversation, dict) else {},
            [t for t in turns if isinstance(t, dict)] if isinstance(turns, list) else [])


def role_label(turn: RenderedTurn) -> str:
    """The heading word of a turn's role: the page's words."""
    return {"user": "User", "agent": "Assistant", "system": "System"}.get(turn.role, "Turn")


def activity_line(item: ActivityItem) -> str:
    """A hosted activity as one line of plain text."""
    if item.label:  # "MCP call `search_events` on Google Calendar — failed: 500"
        query = f" “{item.query}”" if item.query and item.state != "completed" else ""
        return f"{label_text(item.label)}{query} — {item.state_label}{labelled_summary(item)}"
    state = "never finished" if item.never_finished else item.state
    what = item.name.replace("_", " ")
    query = f" “{item.query}”" if item.query else ""
    summary = f" — {item.summary}" if item.summary else ""
    error = f" (error: {item.error_code})" if item.error_code else ""
    return f"{what}{query}: {state}{summary}{error}"


def labelled_summary(item: ActivityItem) -> str:
    """The summary after a labelled activity's state, unless its label or details say it."""
    details = item.details
    if not item.summary or item.summary == item.error_code:
        return ""
    if details.output or details.error or details.tools:
        return ""
    return f" · {item.summary}"


def shows_tools(item: ActivityItem) -> bool:
    """Whether the tools an activity found are listed under it (a tool search's label names
    them already)."""
    return bool(item.details.tools) and item.name != "tool_search"
