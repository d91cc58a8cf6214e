"""The one rendering pipeline: portable-projection dicts in, sanitized HTML and plain data out.

Pure Python, no Django model access; run it in a worker thread from async code.

* ``turn``        — ``render_turn`` (the page and live view's entry), ``render_event_html``.
* ``items``       — the display data it returns (``RenderedTurn``, timeline items).
* ``runs``        — consecutive message events as one markdown document.
* ``sources``     — per-turn source registry (``number_sources``): same URL, same number.
* ``links``       — source anchors and text-fragment links.
* ``markdown``    — markdown-it-py with attributed spans placed by code-point range
  (``cite_plugin``).
* ``sanitize``    — the markdown sanitizer policy (``clean_html``); ``urls`` — the URL policy.
* ``entry_point`` — Google's search entry point: its own document, policy and sandbox.
* ``exports``     — ``render_export``: the Markdown and HTML exports of a whole document.
* ``text``        — plain-string hygiene for titles, excerpts and queries.
"""

from .entry_point import (
    ENTRY_POINT_POLICY,
    SEARCH_ENTRY_POINT_SANDBOX,
    clean_search_entry_point,
    search_entry_point_document,
    search_entry_point_srcdoc,
)
from .exports import DocumentFormat, export_head, export_turn, join_export, render_export
from .items import RenderedTurn, SanitizedHTML
from .links import source_anchor, text_fragment
from .markdown import MAX_MARKDOWN_CHARS, Cite, cite_plugin, render_markdown
from .sanitize import clean_html
from .sources import Source, SourceRegistry, normalise_url, number_sources
from .turn import RENDERER_VERSION, render_event_html, render_turn

__all__ = [
    "ENTRY_POINT_POLICY",
    "MAX_MARKDOWN_CHARS",
    "RENDERER_VERSION",
    "SEARCH_ENTRY_POINT_SANDBOX",
    "Cite",
    "DocumentFormat",
    "RenderedTurn",
    "SanitizedHTML",
    "Source",
    "SourceRegistry",
    "cite_plugin",
    "clean_html",
    "clean_search_entry_point",
    "export_head",
    "export_turn",
    "join_export",
    "normalise_url",
    "number_sources",
    "render_event_html",
    "render_export",
    "render_markdown",
    "render_turn",
    "search_entry_point_document",
    "search_entry_point_srcdoc",
    "source_anchor",
    "text_fragment",
]
