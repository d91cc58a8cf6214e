"""Message runs: consecutive message events of a turn, rendered as one markdown document.

Providers split one answer into many text blocks (Anthropic sends each cited passage as its
own block, with list markers and headings in the blocks between), so each block alone is not
valid markdown. The page, the live view and the exports all group and merge them here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .sources import attribution_range, citation_order, event_text


def event_id(event: dict[str, Any], position: int) -> str:
    """An event's id, or a stand-in from its position in the turn (seq order)."""
    eid = event.get("id")
    return eid if isinstance(eid, str) and eid else f"event-{position}"


def run_key(event_ids: Sequence[str]) -> str:
    """The cache key of a message run: its first event id, plus its length when > 1."""
    return event_ids[0] if len(event_ids) == 1 else f"{event_ids[0]}+{len(event_ids)}"


def merge_run(run: list[dict[str, Any]]) -> dict[str, Any]:
    """Consecutive message events as one markdown document: their texts concatenated as
    sent; each attribution's range is shifted by its event's offset, and a whole-event
    attribution becomes that event's span."""
    if len(run) == 1:
        return run[0]
    texts: list[str] = []
    attributions: list[dict[str, Any]] = []
    offset = 0
    for event in run:
        text = event_text(event)
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


def message_runs(events: list[dict[str, Any]]) -> list[list[dict[str, Any]] | dict[str, Any]]:
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
