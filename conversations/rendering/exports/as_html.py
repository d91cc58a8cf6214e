"""The HTML export: one self-contained file.

Inline CSS, no script, no external request (its own CSP says so), readable without
JavaScript. Message HTML is the sanitized renderer output; every other string is escaped here.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Iterator
from typing import Any

from ..activities import ActivityDetails
from ..entry_point import SEARCH_ENTRY_POINT_SANDBOX
from ..items import (
    ActivityItem,
    ArtifactItem,
    ErrorItem,
    MessageItem,
    ReasoningItem,
    RefusalItem,
    RenderedTurn,
    SourceItem,
    ToolCallItem,
)
from ..markdown.code import highlight_css
from ..text import clean_text
from ..turn import RENDERER_VERSION, render_turn
from .document import activity_line, document_turns, role_label, shows_tools

_CSS = """
:root { color-scheme: light dark; --muted: #666; --line: #ddd; --cite: #fff3bf; }
@media (prefers-color-scheme: dark) { :root { --muted: #aaa; --line: #444; --cite: #4a3f00; } }
body { font: 16px/1.55 system-ui, sans-serif; margin: 0; }
main { max-width: 46rem; margin: 0 auto; padding: 1.5rem 1rem 4rem; }
header .meta, .status, .domain, .pages, .activity, .artifact-type {
  color: var(--muted); font-size: .9em;
}
section.turn { border-top: 1px solid var(--line); padding-top: 1rem; margin-top: 1.5rem; }
section.turn > h2 { font-size: 1.05rem; margin: 0 0 .5rem; }
.model { font-weight: normal; color: var(--muted); }
.message pre, .tool-call pre, .reasoning pre {
  overflow-x: auto; padding: .6rem; background: rgba(127, 127, 127, .12); }
.reasoning pre { white-space: pre-wrap; }
.cite { background: var(--cite); }
.cite-marker { font-size: .75em; vertical-align: super; text-decoration: none; padding: 0 .1em; }
.cite-incomplete { opacity: .6; }
.sources li:target { outline: 2px solid #3b82f6; }
.sources blockquote { margin: .2rem 0 .4rem 1rem; color: var(--muted); font-size: .9em; }
iframe.search-entry-point { border: 0; width: 100%; height: 4.5rem; }
.activity-details pre { overflow-x: auto; padding: .6rem; background: rgba(127, 127, 127, .12);
  white-space: pre-wrap; }
.activity-details img { max-width: 100%; height: auto; }
.error, .refusal .activity { color: #b91c1c; }
table { border-collapse: collapse; } th, td { border: 1px solid var(--line); padding: .2rem .5rem; }
.align-left { text-align: left; } .align-center { text-align: center; }
.align-right { text-align: right; }
.math-display { overflow-x: auto; text-align: center; } .math-display math { display: inline math; }
.contains-task-list { list-style: none; padding-left: 1.1rem; }
.task-list-item-checkbox { margin: 0 .4rem 0 -1.1rem; }
"""

_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)


def _e(value: str) -> str:
    return html.escape(value, quote=True)


def _html_source(source: SourceItem) -> str:
    name = f"<bdi>{_e(source.label)}</bdi>"
    if source.href:
        name = (
            f'<a href="{_e(source.href)}" rel="noopener noreferrer nofollow" '
            f'target="_blank">{name}</a>'
        )
    parts = [name]
    if source.domain:
        parts.append(f' <span class="domain">{_e(source.domain)}</span>')
    if source.redirect:
        parts.append(' <span class="domain">via a Google redirect link</span>')
    elif source.url and source.url != source.label:
        parts.append(f' <span class="domain">{_e(source.url)}</span>')
    if source.pages:
        parts.append(f' <span class="pages">{_e(source.pages)}</span>')
    if source.excerpt:
        parts.append(f"<blockquote>{_e(source.excerpt)}</blockquote>")
    return "".join(parts)


def _html_details(details: ActivityDetails, tools: bool = True) -> str:
    """An activity's code, output and the rest. Images are ``data:`` URLs already checked
    (``activities.safe_image_url``), which this file's CSP allows (``img-src data:``)."""
    out = []
    if details.code:
        out.append(f"<pre><code>{_e(details.code)}</code></pre>")
    for label, text in (("Output", details.output), ("stderr", details.stderr)):
        if text:
            out.append(f'<p class="activity">{label}</p><pre>{_e(text)}</pre>')
    if details.return_code is not None:
        out.append(f'<p class="activity">Exit code {details.return_code}</p>')
    if details.error:
        out.append(f'<p class="error">{_e(details.error)}</p>')
    out.extend(f'<img src="{_e(url)}" alt="Image produced by this activity">'
               for url in details.images)
    if details.tools and tools:
        out.append("<ul>" + "".join(f"<li><code>{_e(t)}</code></li>" for t in details.tools)
                   + "</ul>")
    return f'<div class="activity-details">{"".join(out)}</div>' if out else ""


def _html_item(item: Any) -> str:
    if isinstance(item, MessageItem):
        note = '<p class="status">(This message was cut off.)</p>' if item.incomplete else ""
        return f'<div class="message">{item.html}</div>{note}'
    if isinstance(item, ActivityItem):
        summary = f'<summary class="activity">{_e(activity_line(item))}</summary>'
        details = _html_details(item.details, shows_tools(item))
        if not item.sources:
            return f'<details class="activity-group">{summary}{details}</details>'
        listed = "".join(
            f"<li>{'[' + str(s.number) + '] ' if s.number else ''}{_html_source(s)}</li>"
            for s in item.sources
        )
        return f'<details class="activity-group">{summary}{details}<ul>{listed}</ul></details>'
    if isinstance(item, RefusalItem):
        category = f" ({_e(item.category)})" if item.category else ""
        explanation = f"<p>{_e(item.explanation)}</p>" if item.explanation else ""
        return (f'<div class="refusal"><p class="activity">Refused by the provider{category}'
                f"</p>{explanation}</div>")
    if isinstance(item, ReasoningItem):
        if item.redacted:
            steps = f", {item.count} steps" if item.count > 1 else ""
            return f'<p class="activity">Reasoning (redacted by the provider{steps})</p>'
        if not item.text:
            return ""
        return (
            '<details class="reasoning"><summary class="activity">Reasoning</summary>'
            f"<pre>{_e(item.text)}</pre></details>"
        )
    if isinstance(item, ToolCallItem):
        cut = " (cut off while its arguments arrived)" if item.incomplete else ""
        return (
            f'<div class="tool-call"><p class="activity">Tool call <code>{_e(item.name)}</code>'
            f"{cut}</p><pre>{_e(item.arguments)}</pre></div>"
        )
    if isinstance(item, ErrorItem):
        code = f" <code>{_e(item.code)}</code>" if item.code else ""
        message = f": {_e(item.message)}" if item.message else ""
        return f'<p class="error">Error from the provider{code}{message}</p>'
    if isinstance(item, ArtifactItem):
        head = f'<p class="artifact-type">{_e(item.label or item.artifact_type)}'
        head += f": {_e(item.summary)}</p>" if item.summary and not item.label else "</p>"
        frame = ""
        if item.srcdoc is not None:
            # Already escaped for the attribute by the sanitizer module.
            frame = (
                f'<iframe class="search-entry-point" title="Search suggestions" '
                f'sandbox="{SEARCH_ENTRY_POINT_SANDBOX}" srcdoc="{item.srcdoc}"></iframe>'
            )
        return f'<div class="artifact">{head}{frame}</div>'
    return ""


def html_export(doc: dict[str, Any]) -> str:
    conversation, turns = document_turns(doc)
    chunks = (html_turn(turn, position) for position, turn in enumerate(turns))
    return "".join(join_html(html_head(conversation), chunks))


def html_head(conversation: dict[str, Any]) -> str:
    """The document up to the first turn: the first chunk of the export."""
    title = clean_text(conversation.get("title"), limit=300) or "Conversation"
    meta = [f"Conversation {clean_text(conversation.get('id'), limit=200)}"]
    if conversation.get("created_at"):
        meta.append(f"created {clean_text(conversation.get('created_at'), limit=60)}")
    if conversation.get("forked_from"):
        meta.append(f"forked from {clean_text(conversation.get('forked_from'), limit=200)}")
    meta.append("exported from Turnscope")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="referrer" content="no-referrer">',
        f'<meta name="generator" content="Turnscope (renderer {RENDERER_VERSION})">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}{highlight_css()}</style>",
        "</head><body><main>",
        f'<header><h1><bdi>{_e(title)}</bdi></h1><p class="meta">{_e(" · ".join(meta))}</p>'
        "</header>",
    ]
    return "\n".join(out)


def join_html(head: str, turns: Iterable[str]) -> Iterator[str]:
    """The export as chunks: ``head``, each turn's section on its own lines, the end."""
    yield head
    for turn in turns:
        yield "\n" + turn
    yield "\n</main></body></html>\n"


def html_turn(turn: dict[str, Any], position: int, rendered: RenderedTurn | None = None) -> str:
    """One turn's ``<section>``; ``position`` numbers a turn without an index; ``rendered``:
    the turn as ``render_turn`` gave it already (its message HTML is what the section shows)."""
    if rendered is None:
        rendered = render_turn(turn, ledger=False)
    number = (rendered.index if rendered.index is not None else position) + 1
    heading = f"Turn {number} · {role_label(rendered)}"
    model = ""
    if rendered.provider or rendered.model:
        model = f' <span class="model">{_e(rendered.provider)} / {_e(rendered.model)}</span>'
    out = [f'<section class="turn turn-{_e(rendered.role or "unknown")}">']
    out.append(f"<h2>{_e(heading)}{model}</h2>")
    if rendered.status and rendered.status != "complete":
        reason = f" ({rendered.end_reason})" if rendered.end_reason else ""
        out.append(f'<p class="status">{_e(rendered.status + reason)}</p>')
    out.extend(_html_item(item) for item in rendered.items)
    if rendered.sources or rendered.also_consulted:
        out.append('<section class="sources">')
        if rendered.sources:
            out.append("<h3>Sources</h3><ol>")
            out.extend(
                f'<li id="{_e(s.anchor or "")}" value="{s.number}">{_html_source(s)}</li>'
                for s in rendered.sources
            )
            out.append("</ol>")
        if rendered.also_consulted:
            out.append("<h3>Also consulted</h3><ul>")
            out.extend(f"<li>{_html_source(s)}</li>" for s in rendered.also_consulted)
            out.append("</ul>")
        out.append("</section>")
    out.append("</section>")
    return "\n".join(out)
