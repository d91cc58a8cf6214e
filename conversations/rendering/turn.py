"""``render_turn``: one portable-projection turn to display data (``items``).

Everything here is pure and synchronous (no Django, no I/O): callers on the event loop run it
in a thread (``sync_to_async``). Message runs (``runs``) are rendered by ``render_markdown``,
numbered by the turn's one source registry (``sources``); every other event becomes a
timeline item of plain, cleaned strings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from streams.bodies import (
    ACTIVITY_STATES,
    ActivityBody,
    ArtifactBody,
    ErrorBody,
    ReasoningBody,
    RefusalBody,
    ToolCallBody,
    ToolResultBody,
)

from .activities import activity_details, activity_label, state_label
from .entry_point import search_entry_point_srcdoc
from .items import (
    ActivityItem,
    ArtifactItem,
    ErrorItem,
    MessageItem,
    ReasoningItem,
    RefusalItem,
    RenderedTurn,
    SanitizedHTML,
    SourceItem,
    ToolCallItem,
    ToolResultItem,
    source_item,
)
from .ledger import Ledger, build_ledger
from .links import anchor_prefix
from .markdown import Cite, render_markdown
from .runs import event_id, merge_run, message_runs, run_key
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
RENDERER_VERSION = 7


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _seq(event: dict[str, Any]) -> int | None:
    seq = event.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


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
                repaired=attribution.get("integrity") == "repaired",
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
    sources: list[Mapping[str, Any]] = field(default_factory=list)
    output: dict[str, Any] = field(default_factory=dict)  # every transition's, merged


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
    name = clean_text(group.name, limit=100) or "activity"
    state = group.state or "started"
    error_code = clean_text(group.error_code, limit=200)
    details = activity_details(group.inputs, group.output)
    if details.return_code is not None and group.summary.startswith(
        f"exit code {details.return_code}"
    ):
        details = replace(details, return_code=None)  # the summary says it already
    never_finished = started_only and not streaming
    label = activity_label(name, state, group.inputs, details)
    if name == "web_search" and label:
        query = None  # the page action's label says the address or pattern already
    return ActivityItem(
        seq=group.seq,
        event_ids=tuple(group.event_ids),
        activity_id=clean_text(group.activity_id, limit=200),
        name=name,
        state=state,
        never_finished=never_finished,
        running=started_only and streaming,
        query=query,
        inputs=inputs,
        summary=clean_text(group.summary, limit=500),
        sources=tuple(sources),
        error_code=error_code,
        label=label,
        state_label=state_label(name, state, error_code, never_finished=never_finished,
                                running=started_only and streaming),
        details=details,
    )


# Provider artifacts named in the reader's words (others show their summary or type).
ARTIFACT_LABELS = {"google.search_entry_point": "Google Search suggestions"}


def _group_redacted(items: tuple[Any, ...]) -> tuple[Any, ...]:
    """Redacted reasoning rows between two messages (one timeline run) as one row with a
    count, where the first was: OpenAI sends one per step, interleaved with its searches."""
    out: list[Any] = []
    first: int | None = None
    for item in items:
        if isinstance(item, MessageItem):
            first = None
        elif isinstance(item, ReasoningItem) and item.redacted:
            if first is not None:
                out[first] = replace(out[first], count=out[first].count + 1,
                                     incomplete=out[first].incomplete or item.incomplete)
                continue
            first = len(out)
        out.append(item)
    return tuple(out)


def _tool_arguments(value: object) -> str:
    if isinstance(value, str):
        return clean_block_text(value, limit=20_000)
    try:
        text = json.dumps(value, ensure_ascii=False, indent=2, default=str, sort_keys=True)
    except (TypeError, ValueError):
        text = ""
    return clean_block_text(text, limit=20_000)


@dataclass
class _Timeline:
    """What a turn's events make, in order: their items, and each activity's transitions
    gathered into one group (made into its ``ActivityItem`` once every event is read)."""

    items: list[Any] = field(default_factory=list)
    groups: dict[str, _ActivityGroup] = field(default_factory=dict)


def _activity(timeline: _Timeline, event: dict[str, Any], seq: int | None, eid: str) -> None:
    activity = ActivityBody.from_body(event)
    aid = activity.id or f"event:{eid}"
    group = timeline.groups.get(aid)
    if group is None:
        group = timeline.groups[aid] = _ActivityGroup(seq=seq, activity_id=aid)
        timeline.items.append(group)  # replaced by its ActivityItem at the end
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
    if activity.output:
        group.output.update(activity.output)


def _reasoning(timeline: _Timeline, event: dict[str, Any], seq: int | None, eid: str) -> None:
    redacted = ReasoningBody.from_body(event).redacted
    timeline.items.append(
        ReasoningItem(
            seq=seq,
            event_id=eid,
            text="" if redacted else clean_block_text(event.get("text")),
            redacted=redacted,
            incomplete=event.get("incomplete") is True,
        )
    )


def _tool_call(timeline: _Timeline, event: dict[str, Any], seq: int | None, eid: str) -> None:
    call = ToolCallBody.from_body(event)
    timeline.items.append(
        ToolCallItem(
            seq=seq,
            event_id=eid,
            call_id=clean_text(call.id, limit=200),
            name=clean_text(call.name, limit=200),
            arguments=_tool_arguments(call.arguments),
            incomplete=call.incomplete is True,
        )
    )


def _refusal(timeline: _Timeline, event: dict[str, Any], seq: int | None, eid: str) -> None:
    refusal = RefusalBody.from_body(event)
    timeline.items.append(
        RefusalItem(
            seq=seq,
            event_id=eid,
            category=clean_text(refusal.category, limit=100),
            explanation=clean_block_text(refusal.explanation, limit=5_000),
        )
    )


def _tool_result(timeline: _Timeline, event: dict[str, Any], seq: int | None, eid: str) -> None:
    result = ToolResultBody.from_body(event)
    timeline.items.append(ToolResultItem(
        seq=seq, event_id=eid, call_id=clean_text(result.id, limit=200),
        output=clean_text(result.output, limit=4000), is_error=result.is_error,
    ))


def _error(timeline: _Timeline, event: dict[str, Any], seq: int | None, eid: str) -> None:
    error = ErrorBody.from_body(event)
    timeline.items.append(ErrorItem(
        seq=seq, event_id=eid, code=clean_text(error.code, limit=200),
        message=clean_text(error.message, limit=2000),
    ))


def _artifact(timeline: _Timeline, event: dict[str, Any], seq: int | None, eid: str) -> None:
    artifact = ArtifactBody.from_body(event)
    display = artifact.display_html
    artifact_type = clean_text(artifact.type, limit=200)
    timeline.items.append(
        ArtifactItem(
            seq=seq,
            event_id=eid,
            artifact_type=artifact_type,
            label=ARTIFACT_LABELS.get(artifact_type, ""),
            summary=clean_text(artifact.summary, limit=500),
            srcdoc=SanitizedHTML(search_entry_point_srcdoc(display))
            if display and display.strip()
            else None,
        )
    )


# How each event kind other than a message shows on the timeline (message events render in
# runs, ``render_turn``). A kind without a renderer here is not shown.
EventRenderer = Callable[[_Timeline, dict[str, Any], int | None, str], None]
RENDERERS: dict[str, EventRenderer] = {
    "hosted_activity": _activity,
    "reasoning": _reasoning,
    "tool_call_request": _tool_call,
    "tool_call_response": _tool_result,
    "refusal": _refusal,
    "error": _error,
    "provider_artifact": _artifact,
}


def render_turn(turn: object, cached_html: Mapping[str, str] | None = None, *,
                messages_html: bool = True, ledger: bool = True) -> RenderedTurn:
    """Render one turn. Consecutive message events render as one run (see ``merge_run``).
    ``cached_html`` maps a run's key (``run_key``) -> HTML produced earlier by the same
    ``RENDERER_VERSION`` for this turn; those runs are not rendered again.
    ``messages_html=False``: the turn's structure only, its message runs without their HTML
    (what the Markdown export reads: it writes the text itself). ``ledger=False``: no research
    ledger (the page shows it; the exports do not)."""
    if not isinstance(turn, dict):
        turn = {}
    registry = number_sources(turn)
    turn_id = registry.turn_id
    streaming = turn.get("status") == "streaming"
    html: dict[str, SanitizedHTML] = {}
    fresh: dict[str, SanitizedHTML] = {}
    timeline = _Timeline()
    position = 0
    for entry in message_runs(seq_order(turn.get("events"))):
        if isinstance(entry, list):
            ids = tuple(event_id(e, position + i) for i, e in enumerate(entry))
            position += len(entry)
            key = run_key(ids)
            merged = merge_run(entry)
            if not messages_html:
                rendered = SanitizedHTML("")
            elif cached_html is not None and isinstance(cached_html.get(key), str):
                rendered = SanitizedHTML(cached_html[key])
            else:
                rendered = fresh[key] = render_event_html(merged, registry)
            html[key] = rendered
            timeline.items.append(MessageItem(_seq(entry[0]), ids[0], rendered,
                                              merged.get("incomplete") is True, event_ids=ids))
            continue
        render = RENDERERS.get(_str(entry.get("kind")))  # a kind that is no string: none
        if render is not None:
            render(timeline, entry, _seq(entry), event_id(entry, position))
        position += 1

    made: dict[str, SourceItem] = {}

    def item_for(source: Source) -> SourceItem:
        found = made.get(source.key)
        if found is None:
            found = made[source.key] = source_item(source, turn_id)
        return found

    final_items = _group_redacted(tuple(
        _activity_item(item, registry, streaming, item_for)
        if isinstance(item, _ActivityGroup)
        else item
        for item in timeline.items
    ))
    agent = _dict(turn.get("agent"))
    model = _dict(agent.get("model"))
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
        ledger=build_ledger(turn, registry) if ledger else Ledger(),
    )
