"""Anchors and links of a turn's sources: the ids markers point at, and source links that
highlight the cited excerpt on the page (a text fragment, ``#:~:text=``)."""

from __future__ import annotations

import re
from urllib.parse import quote

from .sources import Source
from .text import clean_text

_ANCHOR_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def anchor_prefix(turn_id: str) -> str:
    """Prefix of the source-list ids of a turn: ``src-{turn}-``; the number follows."""
    safe = _ANCHOR_UNSAFE.sub("-", turn_id if isinstance(turn_id, str) else "")[:80]
    return f"src-{safe}-"


def source_anchor(turn_id: str, number: int) -> str:
    """The ``id`` of source ``number``'s list entry (the markers link to ``#`` + this)."""
    return f"{anchor_prefix(turn_id)}{number}"


_ELLIPSIS_SPLIT = re.compile(r"\s*(?:\[\s*(?:\.{3}|…)\s*\]|\.{3,}|…)\s*")
_FRAGMENT_WORDS = 5  # words kept at each end of a long excerpt
_FRAGMENT_SHORT = 10  # excerpts up to this many words are used whole


def _directive_value(text: str) -> str:
    # Percent-encode everything but unreserved characters, and "-" too: "-", "," and "&" are
    # the text directive's own delimiters.
    return quote(text, safe="").replace("-", "%2D")


def text_fragment(excerpt: str) -> str | None:
    """A ``text=`` directive that highlights the excerpt on the source page, or None.

    Leading/trailing ellipses are trimmed; an excerpt with a gap ("a … b") or more than ten
    words becomes ``text=start,end`` with five words from each end, so a long excerpt still
    matches when the page wraps or formats it differently in the middle.
    """
    text = clean_text(excerpt, limit=2000)
    segments = [s for s in (part.strip() for part in _ELLIPSIS_SPLIT.split(text)) if s]
    if not segments:
        return None
    first_words = segments[0].split()
    last_words = segments[-1].split()
    if len(segments) == 1 and len(first_words) <= _FRAGMENT_SHORT:
        return "text=" + _directive_value(" ".join(first_words))
    start = " ".join(first_words[:_FRAGMENT_WORDS])
    end = " ".join(last_words[-_FRAGMENT_WORDS:])
    if len(segments) == 1 and len(first_words) < 2 * _FRAGMENT_WORDS:
        # Short enough that start and end would overlap.
        return "text=" + _directive_value(" ".join(first_words))
    return "text=" + _directive_value(start) + "," + _directive_value(end)


def source_href(source: Source) -> str | None:
    """The link to a source, with a text fragment for its first excerpt."""
    if not source.href:
        return None
    fragment = quote(source.fragment, safe="/?:@!$&'()*+,;=-._~%") if source.fragment else ""
    directive = text_fragment(source.excerpts[0]) if source.excerpts else None
    if directive and ":~:" not in fragment:
        return f"{source.href}#{fragment}:~:{directive}"
    return f"{source.href}#{fragment}" if fragment else source.href
