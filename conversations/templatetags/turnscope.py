from django import template

register = template.Library()

_ACTIVITY_LABELS = {
    "web_search": "Web search",
    "web_fetch": "Web fetch",
    "file_search": "File search",
    "code_execution": "Code execution",
}


@register.filter
def activity_label(name: str) -> str:
    """A hosted activity's display name: "web_search" -> "Web search"."""
    return _ACTIVITY_LABELS.get(name) or name.replace("_", " ").capitalize()
