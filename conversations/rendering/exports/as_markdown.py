"""The Markdown export: the model's Markdown as written, with footnote citations.

Titles, excerpts and queries are escaped so they stay literal text. The model's own raw HTML
and images are escaped so the file is as inert in a viewer that renders HTML as the page is
(``source``); footnote references go where the page puts the citation markers, never inside
Markdown syntax.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from typing import Any

from ..activities import ActivityDetails
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
from ..markdown import MAX_MARKDOWN_CHARS, prepare_text, remap
from ..markdown.prepare import escaped
from ..runs import event_id, merge_run
from ..sources import (
    attribution_range,
    citation_order,
    event_text,
    number_sources,
    seq_order,
)
from ..text import clean_text
from ..turn import render_turn
from .document import activity_line, document_turns, labelled_summary, role_label, shows_tools
from .source import neutralise

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


def _markdown_message(text: str, refs: list[tuple[int, str]]) -> str:
    """The model's Markdown with raw HTML and images made inert (``source.neutralise``) and
    each footnote reference where the page puts the citation's marker (``Layout.place``)."""
    prepared, removed = prepare_text(text)
    ends = [remap(end, removed) for end, _ in refs]
    layout = None
    # Over the cap the page shows the text escaped, unparsed: so does the export (and so when
    # neutralise cannot lay it out).
    if len(prepared) <= MAX_MARKDOWN_CHARS:
        safe, ends, layout = neutralise(prepared, ends)
    if layout is None:
        labels = "".join(dict.fromkeys(f"[^{label}]" for _, label in refs))
        return _fence(prepared) + (f"\n\n{labels}" if labels else "")
    inserts: dict[tuple[int, bool], list[str]] = {}
    for end, (_, label) in zip(ends, refs, strict=True):
        bucket = inserts.setdefault(layout.place(end), [])
        if label not in bucket:
            bucket.append(label)
    out = safe
    for (at, own_line), placed in sorted(inserts.items(), reverse=True):
        refs_text = "".join(f"[^{label}]" for label in placed)
        if not own_line and at > 0 and out[at - 1] == "!" and not escaped(out, at - 1):
            # "![^1]" would read as an image: the "!" is escaped (it shows the same).
            out = out[: at - 1] + "\\!" + refs_text + out[at:]
            continue
        if not own_line and out[at : at + 1] in ("(", "["):
            # "[^1](x)" / "[^1][x]" would read as a link: a space keeps the reference alone.
            refs_text += " "
        out = out[:at] + (f"\n\n{refs_text}\n" if own_line else refs_text) + out[at:]
    return out.strip("\n")


def _md_activity(item: ActivityItem) -> str:
    """An activity's line: a labelled one with its code parts as Markdown code."""
    if not item.label:
        return _md_text(activity_line(item))
    label = "".join(f"`{text.replace('`', '')}`" if code else _md_text(text)
                    for text, code in item.label)
    query = f" “{_md_text(item.query)}”" if item.query and item.state != "completed" else ""
    return f"{label}{query} — {_md_text(item.state_label)}{_md_text(labelled_summary(item))}"


def _md_details(details: ActivityDetails, tools: bool = True) -> list[str]:
    """An activity's code, output and the rest as Markdown lines. Images are named, not
    embedded: a Markdown file has no policy that allows ``data:`` images."""
    lines: list[str] = []
    if details.code:
        lines += [_fence(details.code, details.code_language or "text"), ""]
    for label, text in (("Output", details.output), ("stderr", details.stderr)):
        if text:
            lines += [f"{label}:", "", _fence(text), ""]
    if details.return_code is not None:
        lines += [f"Exit code {details.return_code}.", ""]
    if details.error:
        lines += [f"Error: {_md_text(details.error)}", ""]
    for url in details.images:
        media = url[5:url.index(";")]
        lines += [f"_(An image, {_md_text(media)}: kept in the JSON export.)_", ""]
    if details.tools and tools:
        lines += ["Tools: " + ", ".join(f"`{t.replace('`', '')}`" for t in details.tools), ""]
    return lines


def _md_source(source: SourceItem) -> str:
    name = _md_text(source.label)
    link = f"[{name}]({_md_url(source.href)})" if source.href else name
    if not source.href and source.url and source.url != source.label:
        link += f" ({_md_text(source.url)})"
    if source.redirect:
        link += " (via a Google redirect link)"
    if source.pages:
        link += f", {_md_text(source.pages)}"
    if source.excerpt:
        link += f" — “{_md_text(source.excerpt)}”"
    return link


def markdown_export(doc: dict[str, Any]) -> str:
    conversation, turns = document_turns(doc)
    chunks = (markdown_turn(turn, position) for position, turn in enumerate(turns))
    return "".join(join_markdown(markdown_head(conversation), chunks))


def markdown_head(conversation: dict[str, Any]) -> str:
    """The title and the conversation's line: the first chunk of the export."""
    title = clean_text(conversation.get("title"), limit=300) or "Conversation"
    lines = [f"# {_md_text(title)}", ""]
    meta = [f"Conversation {_md_text(clean_text(conversation.get('id'), limit=200))}"]
    if conversation.get("created_at"):
        meta.append(f"created {_md_text(clean_text(conversation.get('created_at'), limit=60))}")
    if conversation.get("forked_from"):
        meta.append(f"forked from {_md_text(clean_text(conversation.get('forked_from'), 200))}")
    meta.append("exported from Turnscope")
    lines += [" · ".join(meta), ""]
    return "\n".join(lines)


def join_markdown(head: str, turns: Iterable[str]) -> Iterator[str]:
    """The export as chunks: ``head``, then each turn's chunk after a line break, and one
    final newline (trailing blank lines are held back until more text follows, so the result
    is the whole document's ``rstrip("\n") + "\n"``, one turn in memory at a time)."""
    held = ""
    for piece in itertools.chain([head], ("\n" + turn for turn in turns)):
        body = piece.rstrip("\n")
        if body:
            yield held + body
            held = piece[len(body):]
        else:
            held += piece
    yield "\n"


def markdown_turn(turn: dict[str, Any], position: int,
                  rendered: RenderedTurn | None = None) -> str:
    """One turn of the export (its lines, joined); ``position`` numbers a turn without an
    index; ``rendered``: the turn as ``render_turn`` gave it already (its HTML unused)."""
    if rendered is None:
        # The text is written here, not HTML; the ledger is the page's.
        rendered = render_turn(turn, messages_html=False, ledger=False)
    registry = number_sources(turn)
    label_prefix = f"t{(rendered.index if rendered.index is not None else position) + 1}"
    heading = f"## Turn {label_prefix[1:]} · {role_label(rendered)}"
    if rendered.provider or rendered.model:
        heading += f" · {_md_text(rendered.provider)} / {_md_text(rendered.model)}"
    lines = ["---", "", heading, ""]
    if rendered.status and rendered.status != "complete":
        reason = f" ({_md_text(rendered.end_reason)})" if rendered.end_reason else ""
        lines += [f"_Status: {_md_text(rendered.status)}{reason}_", ""]
    events = {event_id(e, i): e for i, e in enumerate(seq_order(turn.get("events")))}
    for item in rendered.items:
        if isinstance(item, MessageItem):
            run = [events[i] for i in item.event_ids or (item.event_id,) if i in events]
            event = merge_run(run) if run else {}
            text = event_text(event)
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
            lines += [f"> {_md_activity(item)}", ""]
            lines += _md_details(item.details, shows_tools(item))
        elif isinstance(item, ReasoningItem):
            if item.redacted:
                steps = f", {item.count} steps" if item.count > 1 else ""
                lines += [f"> _Reasoning (redacted by the provider{steps})_", ""]
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
            cut = " (cut off while its arguments arrived)" if item.incomplete else ""
            lines += [
                f"Tool call `{item.name.replace('`', '')}`{cut}:",
                "",
                _fence(item.arguments, "json"),
                "",
            ]
        elif isinstance(item, RefusalItem):
            category = f" ({_md_text(item.category)})" if item.category else ""
            lines += [f"> **Refused by the provider**{category}", ""]
            if item.explanation:
                lines += [f"> {_md_text(line)}" for line in item.explanation.splitlines()]
                lines.append("")
        elif isinstance(item, ErrorItem):
            code = f" `{item.code.replace('`', '')}`" if item.code else ""
            message = f": {_md_text(item.message)}" if item.message else ""
            lines += [f"> **Error from the provider**{code}{message}", ""]
        elif isinstance(item, ArtifactItem):
            summary = f": {_md_text(item.summary)}" if item.summary else ""
            what = _md_text(item.label) if item.label else (
                f"Provider artifact {_md_text(item.artifact_type)}{summary}")
            lines += [f"> {what}", ""]
    for source in rendered.sources:
        # "Source N: " first, as the page's marker says it, and so that a viewer without
        # footnotes never reads the line as a link reference definition (a one-word
        # source would become every reference's link target).
        lines += [f"[^{label_prefix}-{source.number}]: Source {source.number}: "
                  f"{_md_source(source)}"]
    if rendered.sources:
        lines.append("")
    if rendered.also_consulted:
        lines += ["Also consulted:", ""]
        lines += [f"- {_md_source(source)}" for source in rendered.also_consulted]
        lines.append("")
    return "\n".join(lines)
