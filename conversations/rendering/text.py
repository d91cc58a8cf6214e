"""Plain-string hygiene for untrusted titles, excerpts, queries and URLs shown as text.

These strings are never HTML: templates escape them. What we remove here is what escaping
cannot fix: control characters (log/terminal injection, NUL) and bidi overrides (Trojan-Source
style spoofing of neighbouring text), plus a length cap so oversized metadata cannot bloat a page.
"""

from __future__ import annotations

import re

# C0/C1 controls and DEL. Tab, newline and CR are whitespace and get collapsed instead.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Bidi embeddings, overrides and isolates, plus the implicit marks: none is needed to show a
# title or an excerpt, and the overrides can reorder the text around them.
_BIDI = re.compile(r"[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SPACE = re.compile(r"\s+")
ELLIPSIS = "…"


def clean_text(value: object, limit: int = 300) -> str:
    """A single-line display string: controls and bidi overrides removed, whitespace collapsed,
    at most ``limit`` characters (an ellipsis marks the cut). Non-strings give ""."""
    if not isinstance(value, str) or not value:
        return ""
    if len(value) <= limit and value.isprintable() and "  " not in value and value.strip() == value:
        return value  # the common case: nothing to remove (isprintable is False for controls,
        # bidi marks and line breaks)
    # Cut early so a 10 MB title costs no more than a long one.
    window = limit * 4 + 64
    text = _BIDI.sub("", _CONTROL.sub("", value[:window]))
    text = _SPACE.sub(" ", text).strip()
    if len(text) > limit or len(value) > window:
        text = text[: max(limit - 1, 0)].rstrip() + ELLIPSIS
    return text


def clean_block_text(value: object, limit: int = 200_000) -> str:
    """A multi-line display string (reasoning, tool arguments): line breaks kept, other
    controls and bidi overrides removed, capped at ``limit`` characters."""
    if not isinstance(value, str) or not value:
        return ""
    text = value if len(value) <= limit else value[:limit]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _BIDI.sub("", _CONTROL.sub("", text))
    if len(value) > limit:
        text += "\n" + ELLIPSIS + " (truncated)"
    return text
