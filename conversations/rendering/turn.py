"""Public entry of the rendering pipeline: one portable-projection turn -> display data.

Everything here is pure and synchronous (no Django, no I/O): callers on the event loop run it
in a thread (``sync_to_async``). Only message HTML and the search-entry-point ``srcdoc`` are
returned as HTML, both sanitized and typed ``SanitizedHTML`` (its ``__html__`` tells Django
and Jinja not to escape it again). Every other string — titles, excerpts, queries, URLs — is
plain text for the template engine to escape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from streams.bodies import (
    ACTIVITY_STATES,
    ActivityBody,
    ArtifactBody,
    ReasoningBody,
    ToolCallBody,
)

from .markdown import Cite, render_markdown
from .sanitize import SEARCH_ENTRY_POINT_SANDBOX, search_entry_point_srcdoc
from .sources import (
    Source,
    SourceRegistry,
    attribution_range,
    citation_order,
    number_sources,
    seq_order,
)
from .text import clean_block_text, clean_text

# Bump on ANY change to rendered output: cached HTML is keyed by (RENDERER_VERSION, event id).
RENDERER_VERSION = 2

__all__ = [
    "RENDERER_VERSION",
    "SEARCH_ENTRY_POINT_SANDBOX",
    "ActivityItem",
    "ArtifactItem",
    "MessageItem",
    "ReasoningItem",
    "RenderedTurn",
    "SanitizedHTML",
    "SourceItem",
    "ToolCallItem",
    "anchor_prefix",
    "render_event_html",
    "render_html_export",
    "render_markdown_export",
    "render_turn",
    "source_anchor",
    "text_fragment",
]


class SanitizedHTML(str):
    """HTML that went through the sanitizer. Template engines honour ``__html__``."""

    __slots__ = ()

    def __html__(self) -> str:
        return str(self)


# --- anchors and links ----------------------------------------------------------------------

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


def _source_href(source: Source) -> str | None:
    if not source.href:
        return None
    fragment = quote(source.fragment, safe="/?:@!$&'()*+,;=-._~%") if source.fragment else ""
    directive = text_fragment(source.excerpts[0]) if source.excerpts else None
    if directive and ":~:" not in fragment:
        return f"{source.href}#{fragment}:~:{directive}"
    return f"{source.href}#{fragment}" if fragment else source.href


# --- display data ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SourceItem:
    number: int | None  # None: consulted, never cited
    title: str  # "" when the provider gave none
    label: str  # title, else domain, else URL
    domain: str
    url: str  # the URL as plain text
    href: str | None  # http(s) only, with a text fragment when there is an excerpt
    excerpt: str | None
    excerpts: tuple[str, ...]
    anchor: str | None  # id of the list entry (cited sources)


def _source_item(source: Source, turn_id: str) -> SourceItem:
    return SourceItem(
        number=source.number,
        title=source.title,
        label=source.label,
        domain=source.domain,
        url=source.url,
        href=_source_href(source),
        excerpt=source.excerpts[0] if source.excerpts else None,
        excerpts=tuple(source.excerpts),
        anchor=source_anchor(turn_id, source.number) if source.number else None,
    )


@dataclass(frozen=True, slots=True)
class MessageItem:
    seq: int | None
    event_id: str  # the first event of the run
    html: SanitizedHTML
    incomplete: bool
    type: str = "message"
    event_ids: tuple[str, ...] = ()  # every event of the run, in seq order


@dataclass(frozen=True, slots=True)
class ActivityItem:
    seq: int | None
    event_ids: tuple[str, ...]
    activity_id: str
    name: str
    state: str  # latest state: started | completed | failed
    never_finished: bool  # started, no terminal transition, and the turn is over
    running: bool  # started and the turn is still streaming
    query: str | None
    inputs: tuple[tuple[str, str], ...]
    summary: str
    sources: tuple[SourceItem, ...]
    error_code: str
    type: str = "activity"


@dataclass(frozen=True, slots=True)
class ReasoningItem:
    seq: int | None
    event_id: str
    text: str  # plain text ("" when redacted)
    redacted: bool
    incomplete: bool
    type: str = "reasoning"


@dataclass(frozen=True, slots=True)
class ToolCallItem:
    seq: int | None
    event_id: str
    call_id: str
    name: str
    arguments: str  # JSON text, plain
    type: str = "tool_call"


@dataclass(frozen=True, slots=True)
class ArtifactItem:
    seq: int | None
    event_id: str
    artifact_type: str
    summary: str
    # Attribute-escaped document for <iframe sandbox="{sandbox}" srcdoc="{srcdoc}">; None when
    # the artifact has nothing to display.
    srcdoc: SanitizedHTML | None
    sandbox: str = SEARCH_ENTRY_POINT_SANDBOX
    type: str = "artifact"


TimelineItem = MessageItem | ActivityItem | ReasoningItem | ToolCallItem | ArtifactItem


@dataclass(frozen=True, slots=True)
class RenderedTurn:
    turn_id: str
    index: int | None
    role: str
    status: str
    end_reason: str
    agent_id: str
    provider: str
    model: str
    html: dict[str, SanitizedHTML]  # message-run HTML by run key (``run_key``)
    fresh_html: dict[str, SanitizedHTML]  # the part of ``html`` rendered now (cache these)
    sources: tuple[SourceItem, ...]
    also_consulted: tuple[SourceItem, ...]
    items: tuple[TimelineItem, ...]  # every event kind, in seq order
    renderer_version: int = RENDERER_VERSION
    incomplete_messages: frozenset[str] = field(default_factory=frozenset)


# --- rendering --------------------------------------------------------------------------------


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _seq(event: dict[str, Any]) -> int | None:
    seq = event.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def _event_id(event: dict[str, Any], position: int) -> str:
    eid = event.get("id")
    return eid if isinstance(eid, str) and eid else f"event-{position}"


def _cites(event: dict[str, Any], registry: SourceRegistry) -> list[Cite]:
    text = _str(event.get("text"))
    cites = []
    for attribution in citation_order(event):
        source = registry.lookup(attribution.get("source"))
        if source is None or source.number is None:
            continue
        rng = attribution_range(attribution, len(text))
        cites.append(
            Cite(
                number=source.number,
                start=rng[0] if rng else None,
                end=rng[1] if rng else None,
                incomplete=attribution.get("incomplete") is True,
                title=source.label,
            )
        )
    return cites


def render_event_html(event: dict[str, Any], registry: SourceRegistry) -> SanitizedHTML:
    """Sanitized HTML of one message event, numbered by the turn's registry."""
    text = _str(event.get("text")) if isinstance(event, dict) else ""
    cites = _cites(event, registry) if isinstance(event, dict) else []
    html = render_markdown(text, cites, anchor_prefix=anchor_prefix(registry.turn_id))
    return SanitizedHTML(html)


_QUERY_KEYS = ("query", "q", "queries", "url", "pattern", "search_query")


def _inputs(value: object) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    if not isinstance(value, dict):
        return None, ()
    query = None
    for key in _QUERY_KEYS:
        candidate = value.get(key)
        if isinstance(candidate, list):
            candidate = next((c for c in candidate if isinstance(c, str) and c.strip()), None)
        if isinstance(candidate, str) and candidate.strip():
            query = clean_text(candidate, limit=500)
            break
    shown = []
    for key, item in list(value.items())[:10]:
        text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False, default=str)
        shown.append((clean_text(str(key), limit=60), clean_text(text, limit=500)))
    return query, tuple(shown)


@dataclass
class _ActivityGroup:
    seq: int | None
    activity_id: str
    event_ids: list[str] = field(default_factory=list)
    name: str = ""
    state: str = ""
    inputs: dict[str, Any] | None = None
    summary: str = ""
    error_code: str = ""
    sources: list[dict[str, Any]] = field(default_factory=list)


def _activity_item(
    group: _ActivityGroup,
    registry: SourceRegistry,
    streaming: bool,
    item_for: Callable[[Source], SourceItem],
) -> ActivityItem:
    query, inputs = _inputs(group.inputs)
    sources = []
    seen: set[str] = set()
    for raw in group.sources:
        source = registry.lookup(raw)
        if source is not None and source.key not in seen:
            seen.add(source.key)
            sources.append(item_for(source))
    started_only = group.state == "started"
    return ActivityItem(
        seq=group.seq,
        event_ids=tuple(group.event_ids),
        activity_id=clean_text(group.activity_id, limit=200),
        name=clean_text(group.name, limit=100) or "activity",
        state=group.state or "started",
        never_finished=started_only and not streaming,
        running=started_only and streaming,
        query=query,
        inputs=inputs,
        summary=clean_text(group.summary, limit=500),
        sources=tuple(sources),
        error_code=clean_text(group.error_code, limit=200),
    )


def _tool_arguments(value: object) -> str:
    if isinstance(value, str):
        return clean_block_text(value, limit=20_000)
    try:
        text = json.dumps(value, ensure_ascii=False, indent=2, default=str, sort_keys=True)
    except (TypeError, ValueError):
        text = ""
    return clean_block_text(text, limit=20_000)


def run_key(event_ids: Sequence[str]) -> str:
    """The cache key of a message run: its first event id, plus its length when > 1."""
    return event_ids[0] if len(event_ids) == 1 else f"{event_ids[0]}+{len(event_ids)}"


def merge_run(run: list[dict[str, Any]]) -> dict[str, Any]:
    """Consecutive message events as one markdown document.

    Providers split one answer into many text blocks (Anthropic sends each cited passage as
    its own block, with list markers and headings in the blocks between), so each block alone
    is not valid markdown. Their texts are concatenated as sent; each attribution's range is
    shifted by its event's offset, and a whole-event attribution becomes that event's span.
    """
    if len(run) == 1:
        return run[0]
    texts: list[str] = []
    attributions: list[dict[str, Any]] = []
    offset = 0
    for event in run:
        text = _str(event.get("text"))
        for attribution in citation_order(event):
            rng = attribution_range(attribution, len(text))
            start, end = rng if rng else (0, len(text))
            if end <= start:
                continue
            attributions.append({**attribution, "range": {"start": offset + start,
                                                          "end": offset + end}})
        texts.append(text)
        offset += len(text)
    return {
        "id": run[0].get("id"),
        "seq": run[0].get("seq"),
        "kind": "message",
        "text": "".join(texts),
        "incomplete": any(e.get("incomplete") is True for e in run),
        "attributions": attributions,
    }


def _message_runs(events: list[dict[str, Any]]) -> list[list[dict[str, Any]] | dict[str, Any]]:
    """Events in seq order, with consecutive message events gathered into lists."""
    out: list[list[dict[str, Any]] | dict[str, Any]] = []
    for event in events:
        if event.get("kind") == "message":
            if out and isinstance(out[-1], list):
                out[-1].append(event)
            else:
                out.append([event])
        else:
            out.append(event)
    return out


def render_turn(turn: dict[str, Any], cached_html: Mapping[str, str] | None = None) -> RenderedTurn:
    """Render one turn. Consecutive message events render as one run (see ``merge_run``).
    ``cached_html`` maps a run's key (``run_key``) -> HTML produced earlier by the same
    ``RENDERER_VERSION`` for this turn; those runs are not rendered again."""
    if not isinstance(turn, dict):
        turn = {}
    registry = number_sources(turn)
    turn_id = registry.turn_id
    streaming = turn.get("status") == "streaming"
    html: dict[str, SanitizedHTML] = {}
    fresh: dict[str, SanitizedHTML] = {}
    incomplete: set[str] = set()
    items: list[Any] = []
    groups: dict[str, _ActivityGroup] = {}

    position = 0
    for entry in _message_runs(seq_order(turn.get("events"))):
        if isinstance(entry, list):
            ids = tuple(_event_id(e, position + i) for i, e in enumerate(entry))
            position += len(entry)
            key = run_key(ids)
            merged = merge_run(entry)
            if cached_html is not None and isinstance(cached_html.get(key), str):
                rendered = SanitizedHTML(cached_html[key])
            else:
                rendered = fresh[key] = render_event_html(merged, registry)
            html[key] = rendered
            incomplete.update(_event_id(e, 0) for e in entry if e.get("incomplete") is True)
            items.append(MessageItem(_seq(entry[0]), ids[0], rendered,
                                     merged.get("incomplete") is True, event_ids=ids))
            continue
        event = entry
        kind = event.get("kind")
        eid = _event_id(event, position)
        position += 1
        seq = _seq(event)
        if kind == "hosted_activity":
            activity = ActivityBody.from_body(event)
            aid = activity.id or f"event:{eid}"
            group = groups.get(aid)
            if group is None:
                group = groups[aid] = _ActivityGroup(seq=seq, activity_id=aid)
                items.append(group)  # replaced by its ActivityItem below
            group.event_ids.append(eid)
            # Events are in seq order, so the last value seen is the latest state.
            if activity.state in ACTIVITY_STATES:
                group.state = activity.state
            group.name = activity.name or group.name
            if activity.input:
                group.inputs = dict(activity.input)
            group.summary = activity.summary or group.summary
            group.error_code = activity.error_code or group.error_code
            group.sources.extend(activity.sources or ())
        elif kind == "reasoning":
            redacted = ReasoningBody.from_body(event).redacted
            items.append(
                ReasoningItem(
                    seq=seq,
                    event_id=eid,
                    text="" if redacted else clean_block_text(event.get("text")),
                    redacted=redacted,
                    incomplete=event.get("incomplete") is True,
                )
            )
        elif kind == "tool_call_request":
            call = ToolCallBody.from_body(event)
            items.append(
                ToolCallItem(
                    seq=seq,
                    event_id=eid,
                    call_id=clean_text(call.id, limit=200),
                    name=clean_text(call.name, limit=200),
                    arguments=_tool_arguments(call.arguments),
                )
            )
        elif kind == "provider_artifact":
            artifact = ArtifactBody.from_body(event)
            display = artifact.display_html
            items.append(
                ArtifactItem(
                    seq=seq,
                    event_id=eid,
                    artifact_type=clean_text(artifact.type, limit=200),
                    summary=clean_text(artifact.summary, limit=500),
                    srcdoc=SanitizedHTML(search_entry_point_srcdoc(display))
                    if display and display.strip()
                    else None,
                )
            )

    made: dict[str, SourceItem] = {}

    def item_for(source: Source) -> SourceItem:
        found = made.get(source.key)
        if found is None:
            found = made[source.key] = _source_item(source, turn_id)
        return found

    final_items = tuple(
        _activity_item(item, registry, streaming, item_for)
        if isinstance(item, _ActivityGroup)
        else item
        for item in items
    )
    agent = turn.get("agent") if isinstance(turn.get("agent"), dict) else {}
    model = agent.get("model") if isinstance(agent.get("model"), dict) else {}
    index = turn.get("index")
    return RenderedTurn(
        turn_id=turn_id,
        index=index if isinstance(index, int) and not isinstance(index, bool) else None,
        role=clean_text(turn.get("role"), limit=40),
        status=clean_text(turn.get("status"), limit=40),
        end_reason=clean_text(turn.get("end_reason"), limit=80),
        agent_id=clean_text(agent.get("agentId"), limit=200),
        provider=clean_text(model.get("provider"), limit=100),
        model=clean_text(model.get("model"), limit=200),
        html=html,
        fresh_html=fresh,
        sources=tuple(item_for(s) for s in registry.cited),
        also_consulted=tuple(item_for(s) for s in registry.consulted),
        items=final_items,
        incomplete_messages=frozenset(incomplete),
    )


def render_markdown_export(conversation_doc: dict[str, Any]) -> str:
    """The conversation as Markdown with footnote citations (see ``exports``)."""
    from .exports import markdown_export  # exports builds on render_turn: import late

    return markdown_export(conversation_doc)


def render_html_export(conversation_doc: dict[str, Any]) -> str:
    """The conversation as one self-contained HTML file (see ``exports``)."""
    from .exports import html_export

    return html_export(conversation_doc)
