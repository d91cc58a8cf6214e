"""Markdown and HTML exports of a whole conversation document (the JSON export contract).

Both use ``render_turn`` (same source numbers as the page). The HTML export is one
self-contained file: inline CSS, no script, no external request (its own CSP says so), readable
without JavaScript; message HTML is the sanitized renderer output and every other string is
escaped here. The Markdown export keeps the model's Markdown as written and adds footnote
references; titles, excerpts and queries are escaped so they stay literal text.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_right
from typing import Any

from .markdown import MAX_MARKDOWN_CHARS, block_tokens, line_starts, prepare_text, remap
from .sanitize import SEARCH_ENTRY_POINT_SANDBOX
from .sources import attribution_range, citation_order, number_sources, seq_order
from .text import clean_text
from .turn import (
    RENDERER_VERSION,
    ActivityItem,
    ArtifactItem,
    MessageItem,
    ReasoningItem,
    RenderedTurn,
    SourceItem,
    ToolCallItem,
    _event_id,
    merge_run,
    render_turn,
)


def _turns(doc: object) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if not isinstance(doc, dict):
        return {}, []
    conversation = doc.get("conversation") if isinstance(doc.get("conversation"), dict) else {}
    turns = doc.get("turns") if isinstance(doc.get("turns"), list) else []
    return conversation, [t for t in turns if isinstance(t, dict)]


def _role_label(turn: RenderedTurn) -> str:
    return {"user": "User", "agent": "Agent", "system": "System"}.get(turn.role, "Turn")


def _activity_line(item: ActivityItem) -> str:
    state = "never finished" if item.never_finished else item.state
    what = item.name.replace("_", " ")
    query = f" “{item.query}”" if item.query else ""
    summary = f" — {item.summary}" if item.summary else ""
    error = f" (error: {item.error_code})" if item.error_code else ""
    return f"{what}{query}: {state}{summary}{error}"


# --- Markdown ---------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#!|~&])")


def _md_text(value: str) -> str:
    """Plain text made literal in Markdown (no links, emphasis, HTML or entities)."""
    return _MD_SPECIAL.sub(r"\\\1", value)


def _md_url(href: str) -> str:
    return "<" + href.replace("<", "%3C").replace(">", "%3E").replace(" ", "%20") + ">"


def _fence(text: str, info: str = "text") -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _footnote_offsets(text: str, ends: list[int]) -> list[tuple[int, bool]]:
    """Where to put each footnote reference: ``(offset, on_its_own_line)``.

    Inline positions are unknown to the block parser, so a reference goes at the end of the
    paragraph/heading/list item where the cited span ends, or on its own line after a code
    block or table: never inside Markdown syntax.
    """
    if len(text) > MAX_MARKDOWN_CHARS:
        return [(len(text.rstrip()), False)] * len(ends)
    tokens = block_tokens(text)
    starts = line_starts(text)
    nlines = len(starts)

    def line_end(line: int) -> int:
        end = starts[line + 1] - 1 if line + 1 < nlines else len(text)
        while end > starts[line] and text[end - 1] in " \t":
            end -= 1
        return end

    blocks: list[tuple[int, tuple[int, bool]]] = []  # (span start, insertion point)
    in_table = False
    for token in tokens:
        if token.type in ("table_open", "table_close"):
            in_table = token.type == "table_open"
        if not token.map or token.map[0] >= nlines:
            continue
        first, last = token.map
        if token.type == "inline" and not in_table:
            blocks.append((starts[first], (line_end(last - 1), False)))
        elif token.type in ("fence", "code_block", "html_block", "table_open"):
            blocks.append((starts[first], (line_end(last - 1), True)))
    blocks.sort()
    span_starts = [b[0] for b in blocks]
    out = []
    for end in ends:
        i = bisect_right(span_starts, max(end - 1, 0)) - 1
        out.append(blocks[i][1] if i >= 0 else (len(text.rstrip()), False))
    return out


def _markdown_message(text: str, refs: list[tuple[int, str]]) -> str:
    prepared, removed = prepare_text(text)
    if not refs:
        return prepared.strip("\n")
    ends = [remap(end, removed) for end, _ in refs]
    inserts: dict[tuple[int, bool], list[str]] = {}
    for where, (_, label) in zip(_footnote_offsets(prepared, ends), refs, strict=True):
        bucket = inserts.setdefault(where, [])
        if label not in bucket:
            bucket.append(label)
    out = prepared
    for (at, own_line), labels in sorted(inserts.items(), reverse=True):
        refs_text = "".join(f"[^{label}]" for label in labels)
        out = out[:at] + (f"\n\n{refs_text}\n" if own_line else refs_text) + out[at:]
    return out.strip("\n")


def _md_source(source: SourceItem) -> str:
    name = _md_text(source.label)
    link = f"[{name}]({_md_url(source.href)})" if source.href else name
    if not source.href and source.url and source.url != source.label:
        link += f" ({_md_text(source.url)})"
    if source.excerpt:
        link += f" — “{_md_text(source.excerpt)}”"
    return link


def markdown_export(doc: dict[str, Any]) -> str:
    conversation, turns = _turns(doc)
    title = clean_text(conversation.get("title"), limit=300) or "Conversation"
    lines = [f"# {_md_text(title)}", ""]
    meta = [f"Conversation {_md_text(clean_text(conversation.get('id'), limit=200))}"]
    if conversation.get("created_at"):
        meta.append(f"created {_md_text(clean_text(conversation.get('created_at'), limit=60))}")
    if conversation.get("forked_from"):
        meta.append(f"forked from {_md_text(clean_text(conversation.get('forked_from'), 200))}")
    meta.append(f"exported by Turnscope (renderer {RENDERER_VERSION})")
    lines += [" · ".join(meta), ""]

    for position, turn in enumerate(turns):
        rendered = render_turn(turn)
        registry = number_sources(turn)
        label_prefix = f"t{(rendered.index if rendered.index is not None else position) + 1}"
        heading = f"## Turn {label_prefix[1:]} · {_role_label(rendered)}"
        if rendered.provider or rendered.model:
            heading += f" · {_md_text(rendered.provider)} / {_md_text(rendered.model)}"
        lines += ["---", "", heading, ""]
        if rendered.status and rendered.status != "complete":
            reason = f" ({_md_text(rendered.end_reason)})" if rendered.end_reason else ""
            lines += [f"_Status: {_md_text(rendered.status)}{reason}_", ""]
        events = {_event_id(e, i): e for i, e in enumerate(seq_order(turn.get("events")))}
        for item in rendered.items:
            if isinstance(item, MessageItem):
                run = [events[i] for i in item.event_ids or (item.event_id,) if i in events]
                event = merge_run(run) if run else {}
                text = event.get("text") if isinstance(event.get("text"), str) else ""
                refs = []
                for attribution in citation_order(event):
                    number = registry.number_for(attribution.get("source"))
                    if number is None:
                        continue
                    rng = attribution_range(attribution, len(text))
                    refs.append((rng[1] if rng else len(text), f"{label_prefix}-{number}"))
                lines += [_markdown_message(text, refs), ""]
                if item.incomplete:
                    lines += ["_(This message was cut off.)_", ""]
            elif isinstance(item, ActivityItem):
                lines += [f"> {_md_text(_activity_line(item))}", ""]
            elif isinstance(item, ReasoningItem):
                if item.redacted:
                    lines += ["> _Reasoning (redacted by the provider)_", ""]
                elif item.text:
                    lines += [
                        "<details><summary>Reasoning</summary>",
                        "",
                        _fence(item.text),
                        "",
                        "</details>",
                        "",
                    ]
            elif isinstance(item, ToolCallItem):
                lines += [
                    f"Tool call `{item.name.replace('`', '')}`:",
                    "",
                    _fence(item.arguments, "json"),
                    "",
                ]
            elif isinstance(item, ArtifactItem):
                summary = f": {_md_text(item.summary)}" if item.summary else ""
                lines += [f"> Provider artifact {_md_text(item.artifact_type)}{summary}", ""]
        for source in rendered.sources:
            lines += [f"[^{label_prefix}-{source.number}]: {_md_source(source)}"]
        if rendered.sources:
            lines.append("")
        if rendered.also_consulted:
            lines += ["Also consulted:", ""]
            lines += [f"- {_md_source(source)}" for source in rendered.also_consulted]
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


# --- HTML -------------------------------------------------------------------------------------

_CSS = """
:root { color-scheme: light dark; --muted: #666; --line: #ddd; --cite: #fff3bf; }
@media (prefers-color-scheme: dark) { :root { --muted: #aaa; --line: #444; --cite: #4a3f00; } }
body { font: 16px/1.55 system-ui, sans-serif; margin: 0; }
main { max-width: 46rem; margin: 0 auto; padding: 1.5rem 1rem 4rem; }
header .meta, .status, .domain, .activity, .artifact-type { color: var(--muted); font-size: .9em; }
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
table { border-collapse: collapse; } th, td { border: 1px solid var(--line); padding: .2rem .5rem; }
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
    elif source.url and source.url != source.label:
        parts.append(f' <span class="domain">{_e(source.url)}</span>')
    if source.excerpt:
        parts.append(f"<blockquote>{_e(source.excerpt)}</blockquote>")
    return "".join(parts)


def _html_item(item: Any) -> str:
    if isinstance(item, MessageItem):
        note = '<p class="status">(This message was cut off.)</p>' if item.incomplete else ""
        return f'<div class="message">{item.html}</div>{note}'
    if isinstance(item, ActivityItem):
        summary = f'<summary class="activity">{_e(_activity_line(item))}</summary>'
        if not item.sources:
            return f'<details class="activity-group">{summary}</details>'
        listed = "".join(
            f"<li>{'[' + str(s.number) + '] ' if s.number else ''}{_html_source(s)}</li>"
            for s in item.sources
        )
        return f'<details class="activity-group">{summary}<ul>{listed}</ul></details>'
    if isinstance(item, ReasoningItem):
        if item.redacted:
            return '<p class="activity">Reasoning (redacted by the provider)</p>'
        if not item.text:
            return ""
        return (
            '<details class="reasoning"><summary class="activity">Reasoning</summary>'
            f"<pre>{_e(item.text)}</pre></details>"
        )
    if isinstance(item, ToolCallItem):
        return (
            f'<div class="tool-call"><p class="activity">Tool call <code>{_e(item.name)}</code>'
            f"</p><pre>{_e(item.arguments)}</pre></div>"
        )
    if isinstance(item, ArtifactItem):
        head = f'<p class="artifact-type">{_e(item.artifact_type)}'
        head += f": {_e(item.summary)}</p>" if item.summary else "</p>"
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
    conversation, turns = _turns(doc)
    title = clean_text(conversation.get("title"), limit=300) or "Conversation"
    meta = [f"Conversation {clean_text(conversation.get('id'), limit=200)}"]
    if conversation.get("created_at"):
        meta.append(f"created {clean_text(conversation.get('created_at'), limit=60)}")
    if conversation.get("forked_from"):
        meta.append(f"forked from {clean_text(conversation.get('forked_from'), limit=200)}")
    meta.append(f"exported by Turnscope (renderer {RENDERER_VERSION})")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head><body><main>",
        f'<header><h1><bdi>{_e(title)}</bdi></h1><p class="meta">{_e(" · ".join(meta))}</p>'
        "</header>",
    ]
    for position, turn in enumerate(turns):
        rendered = render_turn(turn)
        number = (rendered.index if rendered.index is not None else position) + 1
        heading = f"Turn {number} · {_role_label(rendered)}"
        model = ""
        if rendered.provider or rendered.model:
            model = f' <span class="model">{_e(rendered.provider)} / {_e(rendered.model)}</span>'
        out.append(f'<section class="turn turn-{_e(rendered.role or "unknown")}">')
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
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


__all__ = ["html_export", "markdown_export"]
