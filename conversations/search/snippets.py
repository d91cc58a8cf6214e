"""A search's passages as a list row shows them (``conversations.search``): the match in
``<mark>``, escaped, around it what fits."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from typing import Any

from django.db import connections
from django.utils.safestring import SafeString, mark_safe

from conversations.models import SearchDoc
from conversations.rendering.plain import plain_text
from conversations.search.common import _contains, _like

SNIPPET_CONTEXT = 70  # characters either side of the match


def snippet(body: str, query: str) -> SafeString | None:
    """``body`` around the first case-insensitive occurrence of ``query``, escaped, with the
    match in ``<mark>``; None if it does not occur."""
    found = re.search(re.escape(query), body, re.IGNORECASE)
    if found is None:
        return None
    start, end = found.span()
    left = max(0, start - SNIPPET_CONTEXT)
    right = min(len(body), end + SNIPPET_CONTEXT)
    if left > 0:  # start on a word
        space = body.find(" ", left, start)
        left = space + 1 if space != -1 else left
    if right < len(body):
        space = body.rfind(" ", end, right)
        right = space if space != -1 else right

    def clean(text: str) -> str:
        return html.escape(" ".join(text.split()), quote=True)

    before, match, after = body[left:start], body[start:end], body[end:right]
    lead = "…" if left > 0 else ""
    tail = "…" if right < len(body) else ""
    # Whitespace collapsed per piece; keep a space where a piece ended on one.
    sep_before = " " if before[-1:].isspace() else ""
    sep_after = " " if after[:1].isspace() else ""
    return mark_safe(f"{lead}{clean(before)}{sep_before}<mark>{clean(match)}</mark>"
                     f"{sep_after}{clean(after)}{tail}")


def cut(text: str, limit: int) -> tuple[str, str]:
    """What a list row shows of ``text`` in at most ``limit`` characters: its head, and the
    ellipsis that follows it ("" when the text is whole)."""
    return (text, "") if len(text) <= limit else (text[:limit - 1], "…")


def marked_head(text: str, query: str, limit: int) -> SafeString | None:
    """``text`` as a list row shows it (``cut``), escaped, with the first case-insensitive
    occurrence of ``query`` in ``<mark>``; None if no whole occurrence is in what is shown
    (the row's snippet then shows the match)."""
    head, tail = cut(text, limit)
    found = re.search(re.escape(query), head, re.IGNORECASE) if query else None
    if found is None:
        return None
    start, end = found.span()
    return mark_safe(f"{html.escape(head[:start], quote=True)}<mark>"
                     f"{html.escape(head[start:end], quote=True)}</mark>"
                     f"{html.escape(head[end:], quote=True)}{tail}")


def snippets(conversation_ids: Iterable[Any], query: str,
             using: str = "default") -> dict[Any, SafeString]:
    """A snippet of the first message or source matching ``query`` in each conversation (the
    title is shown anyway): one query for the page, reading only its conversations' docs."""
    ids = list(conversation_ids)
    if not ids:
        return {}
    connection = connections[using]
    q = connection.ops.quote_name
    field = SearchDoc._meta.get_field("conversation")
    keys = [field.get_db_prep_value(pk, connection) for pk in ids]
    marks = ", ".join(["%s"] * len(keys))
    sql = (
        f"SELECT {q('conversation_id')}, {q('body')} FROM (SELECT {q('conversation_id')}, "
        f"{q('body')}, ROW_NUMBER() OVER (PARTITION BY {q('conversation_id')} ORDER BY "
        f"{q('id')}) AS n FROM {q(SearchDoc._meta.db_table)} WHERE {q('conversation_id')} "
        f"IN ({marks}) AND {q('source')} <> %s AND {_contains(connection, 'body')}) first "
        "WHERE n = 1"
    )
    by_key = {str(key): pk for key, pk in zip(keys, ids, strict=True)}
    out: dict[Any, SafeString] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, [*keys, SearchDoc.Source.TITLE, _like(query)])
        for key, body in cursor.fetchall():
            # The passage as the reader sees it: without its markdown syntax, unless the
            # match is in that syntax.
            marked = snippet(plain_text(body), query) or snippet(body, query)
            pk = by_key.get(str(key))
            if marked is not None and pk is not None:
                out[pk] = marked
    return out
