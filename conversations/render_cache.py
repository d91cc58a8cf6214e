"""A message's sanitized HTML, rendered once: the ``RenderedHTML`` rows that the page, the live
view's fragments, the shared page and the HTML export all read before rendering a message run.

A stored event never changes, so a run's HTML is cached by (its first event id, renderer
version, run length); a new ``RENDERER_VERSION`` misses every older row (never stale), and a run
that grew while streaming has another length, so another key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conversations import cache_rows
from conversations.models import RenderedHTML
from conversations.rendering import RENDERER_VERSION, RenderedTurn

VERSION = str(RENDERER_VERSION)
FIELDS = ("event", "renderer_version", "html")
UNIQUE = ("event", "renderer_version")

Row = tuple[str, str, str]  # (event id, renderer_version, html)


def row_key(key: str) -> tuple[str, str]:
    """(event id, renderer_version) of a run key (``rendering.runs.run_key``): a run of N > 1
    events is cached on its first event under "<version>+N", so a run that grew while streaming
    never hits a stale entry."""
    event_id, _, length = key.partition("+")
    return event_id, f"{VERSION}+{length}" if length else VERSION


def cached_html(turns: Sequence[dict[str, Any]]) -> dict[str, str]:
    """The cached HTML of every message run of ``turns`` (portable turn dicts), by run key:
    what ``render_turn(..., cached_html=...)`` takes."""
    return cached_runs([e["id"] for d in turns for e in d["events"] if e["kind"] == "message"])


def cached_runs(message_ids: Sequence[Any]) -> dict[str, str]:
    """``cached_html`` of the runs that start at any of these message events."""
    first_ids = list(message_ids)
    if not first_ids:
        return {}
    rows = RenderedHTML.objects.filter(
        event_id__in=first_ids, renderer_version__startswith=VERSION
    ).values_list("event_id", "renderer_version", "html")
    out = {}
    for event_id, version, html in rows:
        _, _, length = version.partition("+")
        if version.split("+")[0] == VERSION:
            out[f"{event_id}+{length}" if length else str(event_id)] = html
    return out


def fresh_rows(rendered: RenderedTurn, known: dict[str, str]) -> list[Row]:
    """The rows of the message HTML ``rendered`` made that the cache (``known``) did not hold."""
    fresh = []
    for key, html in rendered.fresh_html.items():
        if key not in known:
            event_id, version = row_key(key)
            fresh.append((event_id, version, str(html)))
    return fresh


def put(rows: Sequence[Row], *, connection: Any = None) -> None:
    """Cache ``rows``; a row another request wrote first is kept (it is the same HTML). The
    caller holds the transaction."""
    cache_rows.put(RenderedHTML, FIELDS, rows, unique=UNIQUE, connection=connection)
