"""The human-readable exports of a conversation document (the JSON export contract, portable
projection): ``render_export(doc, "markdown")`` or ``render_export(doc, "html")``.

Both use ``render_turn``, so source numbers are the same as on the page. Each export is a head,
one chunk per turn and an end, so a caller can stream a long conversation a turn at a time
(and cache each finished turn's chunk): ``export_head``, ``export_turn``, ``join_export``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Literal

from ..items import RenderedTurn
from .as_html import html_export, html_head, html_turn, join_html
from .as_markdown import join_markdown, markdown_export, markdown_head, markdown_turn
from .document import document_turns

DocumentFormat = Literal["markdown", "html"]


def _check(fmt: str) -> None:
    if fmt not in ("markdown", "html"):
        raise ValueError(f"unknown export format {fmt!r} (expected markdown or html)")


def render_export(doc: dict[str, Any], fmt: DocumentFormat) -> str:
    """The document as Markdown with footnote citations, or as one self-contained HTML file."""
    if fmt == "markdown":
        return markdown_export(doc)
    if fmt == "html":
        return html_export(doc)
    raise ValueError(f"unknown export format {fmt!r} (expected markdown or html)")


def export_head(conversation: dict[str, Any], fmt: DocumentFormat) -> str:
    """What comes before the first turn, from the document's ``conversation`` object."""
    _check(fmt)
    return markdown_head(conversation) if fmt == "markdown" else html_head(conversation)


def export_turn(turn: dict[str, Any], position: int, fmt: DocumentFormat, *,
                rendered: RenderedTurn | None = None) -> str:
    """One portable turn's chunk; it depends on nothing but the turn (and ``position`` for a
    turn without an index), so a finished turn's chunk can be cached. ``rendered``: this same
    turn already rendered by ``render_turn`` (message HTML included, from a cache or not), so
    that it is not rendered again."""
    _check(fmt)
    if fmt == "markdown":
        return markdown_turn(turn, position, rendered)
    return html_turn(turn, position, rendered)


def join_export(head: str, turns: Iterable[str], fmt: DocumentFormat) -> Iterator[str]:
    """The export as chunks, byte for byte what ``render_export`` returns whole."""
    _check(fmt)
    return join_markdown(head, turns) if fmt == "markdown" else join_html(head, turns)


__all__ = ["DocumentFormat", "document_turns", "export_head", "export_turn", "join_export",
           "render_export"]
