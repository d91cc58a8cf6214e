"""Human-readable exports: markdown with footnote citations, and one self-contained HTML file.
Both go through the one renderer and sanitizer, reading the portable projection."""

from __future__ import annotations

from typing import Literal

from conversations.models import Conversation
from conversations.projections import conversation_dict

DocumentFormat = Literal["markdown", "html"]
CONTENT_TYPES = {"markdown": "text/markdown; charset=utf-8", "html": "text/html; charset=utf-8"}


def render_document(conversation: Conversation, fmt: DocumentFormat) -> str:
    from conversations.rendering import render_html_export, render_markdown_export

    doc = conversation_dict(conversation, "portable")
    if fmt == "markdown":
        return render_markdown_export(doc)
    if fmt == "html":
        return render_html_export(doc)
    raise ValueError(f"unknown export format {fmt!r} (expected markdown or html)")
