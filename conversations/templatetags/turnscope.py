from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

from conversations.rendering.plain import plain_line

register = template.Library()

_ACTIVITY_LABELS = {
    "web_search": "Web search",
    "web_fetch": "Web fetch",
    "file_search": "File search",
    "code_execution": "Code execution",
}


@register.filter
def ago(value: datetime | None) -> str:
    """"just now" under a minute, else "5 minutes ago" (never "0 minutes ago")."""
    if value is None:
        return ""
    if timezone.now() - value < timedelta(minutes=1):
        return "just now"
    return f"{timesince(value)} ago"


@register.filter
def activity_label(name: str) -> str:
    """A hosted activity's display name: "web_search" -> "Web search"."""
    return _ACTIVITY_LABELS.get(name) or name.replace("_", " ").capitalize()


@register.filter
def plain_title(title: str) -> str:
    """A title as plain text: "## **Tides**" reads "Tides" (the markdown syntax a title taken
    from a message kept is not shown)."""
    return plain_line(title or "").strip()
