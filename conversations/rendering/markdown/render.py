"""``render_markdown``: one event's text and citations to sanitized HTML.

Input longer than ``MAX_MARKDOWN_CHARS`` is not parsed at all (markdown-it-py has inputs that
cost ~50 us per character): it is shown escaped in a ``<pre>``, which bounds render time for
any input.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from ..sanitize import clean_html
from .cites import Cite, marker_html
from .parser import parser
from .plugin import cite_env
from .prepare import prepare_text, remap

MAX_MARKDOWN_CHARS = 100_000  # per event; above it the text is shown escaped, not parsed
MAX_PLAIN_CHARS = 1_000_000  # shown at most, on the escaped path
MAX_ATTRIBUTIONS = 10_000  # per event


def _capped_html(text: str, cites: Sequence[Cite], anchor_prefix: str) -> str:
    # Built only from escaped text and constants, so it needs no sanitizer pass (bleach is
    # superlinear on long entity-heavy text, which is exactly what this path must avoid).
    shown = text[:MAX_PLAIN_CHARS]
    note = f"This message is {len(text):,} characters long, so it is shown as plain text" + (
        " (cut at 1,000,000 characters; the export has all of it)." if shown != text else "."
    )
    parts = [
        f'<p class="render-note">{html.escape(note)}</p>',
        f'<pre class="render-plain">{html.escape(shown, quote=False)}</pre>',
    ]
    numbers: dict[int, bool] = {}
    titles: dict[int, str] = {}
    for cite in cites:
        numbers[cite.number] = numbers.get(cite.number, True) and cite.incomplete
        titles.setdefault(cite.number, cite.title)
    if numbers:
        markers = "".join(
            marker_html(n, titles[n], anchor_prefix, numbers[n]) for n in sorted(numbers)
        )
        parts.append(f"<p>{markers}</p>")
    return "\n".join(parts) + "\n"


def render_markdown(text: object, cites: Sequence[Cite] = (), *, anchor_prefix: str = "") -> str:
    """Markdown to sanitized HTML, with ``cites`` marked as spans + markers.

    Ranges in ``cites`` are code-point offsets into ``text`` (invalid ones are the caller's
    problem: pass ``start=end=None`` for "whole text"). ``anchor_prefix`` + number is the id of
    the source list entry a marker links to.
    """
    if not isinstance(text, str):
        text = ""
    prepared, removed = prepare_text(text)
    cites = list(cites)[:MAX_ATTRIBUTIONS]
    if removed:
        cites = [
            Cite(
                c.number,
                None if c.start is None else remap(c.start, removed),
                None if c.end is None else remap(c.end, removed),
                c.incomplete,
                c.title,
                c.repaired,
            )
            for c in cites
        ]
    if len(prepared) > MAX_MARKDOWN_CHARS:
        return _capped_html(prepared, cites, anchor_prefix)
    md = parser()
    env = cite_env(prepared, cites, anchor_prefix)
    rendered = md.renderer.render(md.parse(prepared, env), md.options, env)
    return clean_html(rendered)
