"""The human-readable exports of a conversation document (the JSON export contract, portable
projection): ``render_export(doc, "markdown")`` or ``render_export(doc, "html")``.

Both use ``render_turn``, so source numbers are the same as on the page.
"""

from __future__ import annotations

from typing import Any, Literal

from .as_html import html_export
from .as_markdown import markdown_export

DocumentFormat = Literal["markdown", "html"]


def render_export(doc: dict[str, Any], fmt: DocumentFormat) -> str:
    """The document as Markdown with footnote citations, or as one self-contained HTML file."""
    if fmt == "markdown":
        return markdown_export(doc)
    if fmt == "html":
        return html_export(doc)
    raise ValueError(f"unknown export format {fmt!r} (expected markdown or html)")


__all__ = ["DocumentFormat", "render_export"]
