"""The one rendering pipeline: portable-projection dicts in, sanitized HTML and plain data out.

Pure Python, no Django model access; run it in a worker thread from async code.

* ``sources``   — per-turn source registry (``number_sources``): same URL, same number.
* ``markdown``  — markdown-it-py with attributed spans placed by code-point range.
* ``sanitize``  — the bleach policies (``clean_html``, the search entry point ``srcdoc``).
* ``turn``      — ``render_turn`` (public entry), ``render_event_html``, the exports.
"""

from .markdown import MAX_MARKDOWN_CHARS, Cite, render_markdown
from .sanitize import (
    SEARCH_ENTRY_POINT_SANDBOX,
    clean_html,
    clean_search_entry_point,
    search_entry_point_srcdoc,
)
from .sources import Source, SourceRegistry, normalise_url, number_sources
from .turn import (
    RENDERER_VERSION,
    RenderedTurn,
    SanitizedHTML,
    render_event_html,
    render_html_export,
    render_markdown_export,
    render_turn,
    source_anchor,
    text_fragment,
)

__all__ = [
    "MAX_MARKDOWN_CHARS",
    "RENDERER_VERSION",
    "SEARCH_ENTRY_POINT_SANDBOX",
    "Cite",
    "RenderedTurn",
    "SanitizedHTML",
    "Source",
    "SourceRegistry",
    "clean_html",
    "clean_search_entry_point",
    "normalise_url",
    "number_sources",
    "render_event_html",
    "render_html_export",
    "render_markdown",
    "render_markdown_export",
    "render_turn",
    "search_entry_point_srcdoc",
    "source_anchor",
    "text_fragment",
]
