"""Read-side assembly for pages: the portable projection, rendered once per event.

Rendering reads only the portable projection. A stored event never changes, so its HTML is
cached by (event id, renderer version) in ``RenderedHTML`` (``render_cache``); a reload of a
finished conversation does no markdown work.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import Exists, Max, OuterRef, QuerySet, Subquery
from django.template.loader import get_template, render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from conversations import cache_rows, domains, render_cache, search, streaming
from conversations.models import (
    Conversation,
    Event,
    Turn,
    TurnFragment,
)
from conversations.projections import Snapshot, turn_dict, turns_with_events
from conversations.rendering import (
    RENDERER_VERSION,
    RenderedTurn,
    export_turn,
    render_turn,
)
from conversations.rendering import live as live_text
from conversations.rendering.plain import plain_line, plain_text

_VERSION = str(RENDERER_VERSION)
FRAGMENT_TEMPLATE = "conversations/_turn.html"
FRAGMENT_PARTIALS = ("conversations/_ledger.html", "conversations/_activity_labelled.html",
                     "conversations/_activity_details.html")


@dataclass
class Segment:
    """A run of the turn as the page shows it: one message, or consecutive timeline items."""

    kind: str  # "message" | "timeline"
    items: list[Any]


@dataclass
class TurnView:
    turn: Turn
    data: dict[str, Any] | None = None  # the portable turn, when it was rendered now
    rendered: RenderedTurn | None = None
    tail: dict[str, Any] | None = None
    html: str = ""  # the turn's page fragment
    branch: Any = None  # the branches at this turn (``branches.BranchPoint``), set by the page

    @property
    def segments(self) -> list[Segment]:
        out: list[Segment] = []
        for item in self.rendered.items if self.rendered else ():
            kind = "message" if item.type == "message" else "timeline"
            if kind == "timeline" and out and out[-1].kind == "timeline":
                out[-1].items.append(item)
            else:
                out.append(Segment(kind, [item]))
        return out


@functools.cache
def _fragment_version() -> str:
    # An edited turn template never serves a stale fragment.
    # The partials it includes count too.
    digest = hashlib.sha256()
    for name in (FRAGMENT_TEMPLATE, *FRAGMENT_PARTIALS):
        digest.update(get_template(name).template.source.encode())
    return f"{_VERSION}:{digest.hexdigest()[:16]}"


def _fragment_key(turn: Turn) -> str:
    return f"{_fragment_version()}:{turn.status}:{turn.end_reason}:{turn.last_seq or 0}"


def _store(html: list[tuple[str, str, str]], fragments: list[tuple[Any, str, str]]) -> None:
    """Cache what a page rendered: its new message HTML and (turn, key, html) fragments, in
    one transaction of an executemany each (a commit per turn was most of a cold page's time
    on PostgreSQL: 459 queries for 50 turns)."""
    if not html and not fragments:
        return
    try:
        with transaction.atomic():
            render_cache.put(html)
            cache_rows.put(TurnFragment, ("turn", "key", "html"), fragments,
                           unique=("turn",), replace=("key", "html"))
    except IntegrityError:
        pass  # a turn or event deleted meanwhile: nothing to cache for it


def turn_views(conversation: Conversation, turns: list[Turn] | None = None) -> list[TurnView]:
    """Every turn (or the given ones) of ``conversation`` with its page fragment.

    A finished turn's fragment is cached whole (``TurnFragment``), so a reload reads one row per
    turn; other turns are rendered from the portable projection (message HTML cached per run).
    """
    qs = conversation.turns.all()
    return _views(conversation, qs.filter(pk__in=[t.pk for t in turns]) if turns is not None
                  else qs)


@dataclass
class TurnWindow:
    """The turns a page shows of a long conversation: indexes ``start`` to ``end`` (exclusive)
    of ``total``, at most ``size`` of them, so a request's work and memory do not grow with the
    conversation."""

    views: list[TurnView]
    start: int
    end: int
    total: int
    size: int

    @property
    def earlier_from(self) -> int | None:
        """Where the window of the turns just before this one starts (None: none before)."""
        return max(0, self.start - self.size) if self.start > 0 else None

    @property
    def later_from(self) -> int | None:
        """Where the window after this one starts (None: this window ends the conversation)."""
        return self.end if self.end < self.total else None

    @property
    def later_count(self) -> int:
        return self.total - self.end

    @property
    def at_end(self) -> bool:
        return self.end >= self.total


def window_bounds(total: int, size: int, start: int | None = None,
                  around: int | None = None) -> tuple[int, int]:
    """``(start, end)`` of the window: the newest ``size`` turns; from ``start`` when given;
    around index ``around`` (a deep link) when that turn is not among the newest."""
    newest = max(0, total - size)
    if around is not None and 0 <= around < newest:
        start = max(0, around - size // 2)
    if start is None or start >= newest:
        start = newest
    start = max(0, start)
    return start, min(total, start + size)


def turn_window(conversation: Conversation, *, size: int, start: int | None = None,
                turn_id: Any = None, end: int | None = None) -> TurnWindow:
    """The window of turns a page shows (see ``window_bounds``); ``turn_id`` names a turn that
    must be in it (ignored if it is not one of this conversation's); ``end`` caps it (the page's
    "Earlier turns" fetches the turns before what it already shows)."""
    total = conversation.turns.count()
    around = None
    if turn_id is not None:
        around = conversation.turns.filter(pk=turn_id).values_list("index", flat=True).first()
    first, last = window_bounds(total, size, start, around)
    if end is not None:
        last = max(first, min(last, end))
    qs = conversation.turns.filter(index__gte=first, index__lt=last)
    return TurnWindow(_views(conversation, qs), first, last, total, size)


def _views(conversation: Conversation, qs: QuerySet[Turn]) -> list[TurnView]:
    turns = list(qs.annotate(last_seq=Max("events__seq")).order_by("index"))
    finished = [t for t in turns if t.status != Turn.Status.STREAMING]
    fragments = {
        row.turn_id: row for row in TurnFragment.objects.filter(turn__in=finished)
    }
    views: dict[Any, TurnView] = {}
    for turn in finished:
        row = fragments.get(turn.pk)
        if row is not None and row.key == _fragment_key(turn):
            # Our own template's output, read back from the cache.
            views[turn.pk] = TurnView(turn, html=mark_safe(row.html))
    todo = [t for t in turns if t.pk not in views]
    rendered, html = _render(conversation, todo)
    for view in rendered:
        views[view.turn.pk] = view
    _store(html, [(view.turn.pk, _fragment_key(view.turn), str(view.html))
                  for view in rendered if view.turn.status != Turn.Status.STREAMING])
    return [views[t.pk] for t in turns]


def _render(conversation: Conversation, turns: list[Turn]
            ) -> tuple[list[TurnView], list[tuple[str, str, str]]]:
    """The views of ``turns``, rendered, and the message HTML rows to cache for them."""
    if not turns:
        return [], []
    # The tails before the events: a block the runner stores meanwhile is then among the
    # events, and ``streaming.shown_tail`` drops the tail's copy (after them, it could be in
    # neither).
    tails = streaming.current_tails([str(t.id) for t in turns
                                     if t.status == Turn.Status.STREAMING])
    with_events = turns_with_events(conversation, turns=turns)
    datas = [turn_dict(t, events, ledger=False) for t, events in with_events]
    known = render_cache.cached_html(datas)
    views, html = [], []
    for (turn, events), data in zip(with_events, datas, strict=True):
        rendered = render_turn(data, cached_html=known)
        # A streaming turn's numbering and source titles may still change: cache it once done.
        if turn.status != Turn.Status.STREAMING:
            html += render_cache.fresh_rows(rendered, known)
        tail = streaming.shown_tail(tails.get(str(turn.id)), events)
        view = TurnView(turn, data, rendered, _tail(turn, tail))
        view.html = render_to_string(FRAGMENT_TEMPLATE, {"t": view})  # a SafeString
        views.append(view)
    return views, html


def snapshot_window(conversation: Conversation, snapshot: Snapshot, share: Any, *, size: int,
                    start: int | None = None, turn_id: Any = None,
                    end: int | None = None) -> TurnWindow:
    """The window of a shared snapshot's turns (``turn_window``'s rules, within the snapshot):
    rendered from the portable projection up to its horizon, reasoning left out if the owner
    chose so. The fragments are made for the shared page (``share`` in the template: no turn
    actions, the share's own URLs) and never cached as the owner's; message HTML is read from
    the cache, and written to it only when the events are the owner's page's own."""
    total = snapshot.turn_count
    around = None
    if turn_id is not None:
        around = conversation.turns.filter(pk=turn_id, index__lt=total) \
            .values_list("index", flat=True).first()
    first, last = window_bounds(total, size, start, around)
    if end is not None:
        last = max(first, min(last, end))
    turns = list(conversation.turns.filter(index__gte=first, index__lt=last).order_by("index"))
    datas = [turn_dict(t, [e for e in events if snapshot.keeps(e)], ledger=False)
             for t, events in turns_with_events(conversation, turns=turns,
                                                upto=snapshot.last_seq)]
    known = render_cache.cached_html(datas)
    views, html = [], []
    for turn, data in zip(turns, datas, strict=True):
        rendered = render_turn(data, cached_html=known)
        if snapshot.reasoning:
            html += render_cache.fresh_rows(rendered, known)
        view = TurnView(turn, data, rendered)
        view.html = render_to_string(FRAGMENT_TEMPLATE, {"t": view, "share": share})
        views.append(view)
    _store(html, [])
    return TurnWindow(views, first, last, total, size)


def _tail(turn: Turn, tail: dict[str, Any] | None) -> dict[str, Any] | None:
    """The streaming block's text as the live view shows it: a message's finished markdown
    blocks rendered (``rendering.live``, where the runner splits them too), the rest raw."""
    if turn.status != Turn.Status.STREAMING:
        return None
    if tail and tail.get("kind") in ("message", None) and tail.get("text"):
        finished, rest = live_text.split_finished(str(tail["text"]))
        if finished:
            tail = {**tail, "rendered_html": "".join(live_text.render_block(b)
                                                     for b in finished), "rest": rest}
    return tail


class InvalidFilter(ValueError):
    """A search or filter text the database cannot run: the page and the API answer 400."""

    def __init__(self, name: str, message: str) -> None:
        self.name, self.message = name, message
        super().__init__(f"{name}: {message}")


def check_filter_text(name: str, value: str) -> str:
    """``value`` if the database can compare it: PostgreSQL refuses a NUL character in any
    text (an error, not a non-match), so one is refused before a query is built."""
    if "\x00" in value:
        raise InvalidFilter(name, "must not contain NUL characters")
    return value


def conversation_rows(
    user: Any, *, query: str = "", provider: str = "", model: str = "", domain: str = ""
) -> QuerySet[Conversation]:
    """The conversations ``user`` sees, searched and filtered through the list's indexes
    (``conversations.search``), newest first; without the per-row counts (``annotated`` adds
    them to a page's rows). Raises ``InvalidFilter`` for a text the database cannot compare."""
    for name, value in (("q", query), ("provider", provider), ("model", model),
                        ("domain", domain)):
        check_filter_text(name, value)
    domain = domains.query_domain(domain)  # a host, or a pasted URL's
    qs = search.filtered(Conversation.objects.visible_to(user), query=query,
                         provider=provider, model=model, domain=domain)
    return qs.order_by("-updated_at", "-id")


def _annotated_rows(ids: list[Any]) -> QuerySet[Conversation]:
    """The rows ``ids`` with their first user line and live flag: correlated subqueries over
    those rows only, each bounded by an index (the counts are the rows' own columns)."""
    first_user_line = Event.objects.filter(
        conversation=OuterRef("pk"), kind="message", turn__role=Turn.Role.USER
    ).order_by("seq").values("text")[:1]
    return Conversation.objects.filter(pk__in=ids).annotate(
        first_user_text=Subquery(first_user_line),
        is_live=Exists(Turn.objects.filter(conversation=OuterRef("pk"),
                                           status=Turn.Status.STREAMING)),
    )


# The SQL of ``_annotated_rows`` for n rows, per connection: (sql, params, the position in
# ``ids`` of each param that is one). Building and compiling its subqueries was most of the
# call (4 of 5 ms on every list page, with five of them); the query itself is the same for
# every page of n rows.
_ANNOTATED_SQL: dict[tuple[str, int], tuple[str, tuple[Any, ...], dict[int, int]]] = {}


def annotated(ids: list[Any]) -> dict[Any, Conversation]:
    """The rows of one page (``ids``) with their counts, first user line and live flag
    (``_annotated_rows``), by id."""
    if not ids:
        return {}
    connection = connections[Conversation.objects.db]
    pk = Conversation._meta.pk
    compiled = _ANNOTATED_SQL.get((connection.alias, len(ids)))
    if compiled is None:
        # Stand-in ids, told apart from the query's other params by their prepared values.
        stand_ins = [uuid.UUID(int=n + 1) for n in range(len(ids))]
        sql, params = _annotated_rows(stand_ins).query.sql_with_params()
        slot = {pk.get_db_prep_value(s, connection): n for n, s in enumerate(stand_ins)}
        at = {i: slot[p] for i, p in enumerate(params) if isinstance(p, Hashable) and p in slot}
        assert sorted(at.values()) == list(range(len(ids))), "each id is one param"
        compiled = _ANNOTATED_SQL[(connection.alias, len(ids))] = (sql, tuple(params), at)
    sql, constants, at = compiled
    prepared = [pk.get_db_prep_value(i, connection) for i in ids]
    params = [prepared[at[i]] if i in at else p for i, p in enumerate(constants)]
    rows = {}
    for row in Conversation.objects.raw(sql, params):
        row.is_live = bool(row.is_live)  # SQLite gives 0 or 1
        rows[row.pk] = row
    return rows


FIRST_LINE = 160  # characters of a list row's first user message that the row shows


@dataclass
class ListPage:
    """One keyset page of the conversation list: its rows, and the cursors of the pages before
    and after it (None: there is none). A cursor names the row a page starts after (or ends
    before), so a link stays valid however many conversations are added meanwhile."""

    rows: list[Conversation]
    newer: str | None  # ?before=...
    older: str | None  # ?after=...
    at_end: bool = False


def encode_cursor(conversation: Conversation) -> str:
    return f"{conversation.updated_at.isoformat()}_{conversation.pk}"


def decode_cursor(cursor: str) -> tuple[Any, Any] | None:
    """(updated_at, id) of a cursor; None if it is not one."""
    import uuid
    from datetime import datetime

    stamp, _, pk = cursor.partition("_")
    try:
        return datetime.fromisoformat(stamp), uuid.UUID(pk)
    except ValueError:
        return None


def list_page(qs: QuerySet[Conversation], *, after: str = "", before: str = "",
              last: bool = False, size: int = 25, query: str = "") -> ListPage:
    """A page of ``qs`` (ordered by ``-updated_at, -id``) by keyset on the index of that order:
    the first page, the one ``after`` a cursor, the one ``before`` a cursor, or the ``last``.
    Costs the rows read, never a count or an offset. With the search ``query``, each row gets
    ``snippet``: the passage that matched, marked (None when only its title did, or when
    its first line, ``first_marked``, shows the match marked)."""
    qs = qs.order_by("-updated_at", "-id")
    forward, paged = True, False  # paged: the page after a (valid) cursor
    if after and (key := decode_cursor(after)):
        stamp, pk = key
        paged = True
        qs = qs.filter(updated_at__lte=stamp).exclude(updated_at=stamp, id__gte=pk)
    elif before and (key := decode_cursor(before)):
        stamp, pk = key
        qs = qs.filter(updated_at__gte=stamp).exclude(updated_at=stamp, id__lte=pk) \
            .order_by("updated_at", "id")
        forward = False
    elif last:
        qs = qs.order_by("updated_at", "id")
        forward = False
    keys = list(qs.values_list("pk", flat=True)[:size + 1])
    more = len(keys) > size
    keys = keys[:size]
    if not forward:
        keys.reverse()
    by_id = annotated(keys)
    rows = [by_id[pk] for pk in keys if pk in by_id]
    # A row whose shown first line holds the match marks it there; the others get the
    # passage of their first matching message or source (one query for them).
    for row in rows:
        row.first_user_text = plain_text(row.first_user_text or "")
        row.first_marked = (search.marked_head(row.first_user_text or "", query, FIRST_LINE)
                            if query else None)
    unmarked = [row.pk for row in rows if row.first_marked is None]
    snippets = search.snippets(unmarked, query) if query and unmarked else {}
    for row in rows:
        row.snippet = snippets.get(row.pk)
    if not rows:
        return ListPage([], None, None)
    if forward:
        older = encode_cursor(rows[-1]) if more else None
        newer = encode_cursor(rows[0]) if paged else None
    else:
        newer = encode_cursor(rows[0]) if more else None
        older = encode_cursor(rows[-1]) if not last else None
    return ListPage(rows, newer, older, at_end=last or (forward and not more))


def _counted(n: int | None, one: str, many: str) -> str:
    n = n or 0
    return f"{n} {one if n == 1 else many}"


_LINK_ID = uuid.UUID(int=0)


def label_rows(rows: list[Conversation], viewer: Any) -> None:
    """Give each row of a list page the texts it shows, worked out here once: the template
    only places them (a filter chain per value per row was most of the page's time)."""
    from conversations.templatetags.turnscope import ago

    viewer_id = getattr(viewer, "pk", None)
    # One reverse for the page: the rows' links differ by the id only.
    link = reverse("conversation-detail", args=[_LINK_ID])
    for row in rows:
        row.url = link.replace(str(_LINK_ID), str(row.pk))
        row.shown_title = plain_line(row.title) or "Untitled"
        first = getattr(row, "first_user_text", "") or ""
        row.shown_first = getattr(row, "first_marked", None) or "".join(
            search.cut(first, FIRST_LINE))
        row.shown_counts = (
            _counted(getattr(row, "turn_count", 0), "turn", "turns"),
            _counted(getattr(row, "citation_count", 0), "citation", "citations"),
            _counted(getattr(row, "search_count", 0), "search", "searches"),
        )
        stamp = timezone.localtime(row.updated_at)
        row.shown_updated = (stamp.isoformat(), stamp.strftime(f"{stamp.day} %b %Y, %H:%M %Z"),
                             ago(row.updated_at))
        row.selectable = row.owner_id is not None and row.owner_id == viewer_id


def provenance_chips(conversation_ids: list[Any]) -> dict[Any, list[tuple[str, str]]]:
    """Each row's (provider, model) chips, in the order its turns used them (kept by the
    store as the conversation's served facets)."""
    return search.provenance_chips(conversation_ids)


def filter_choices(user: Any) -> dict[str, list[str]]:
    """Providers, models and the most cited domains among what ``user`` sees (maintained
    counts: nothing is aggregated per view)."""
    return search.choices(user)


# -- a reader's tools on the conversation page: copy an answer, find in every turn ---------------


def answer_markdown(conversation: Conversation, turn: Turn) -> str:
    """One turn as the Markdown export writes it (citations as footnotes), without the
    export's rule and turn heading: what the page's "Copy answer" puts on the clipboard."""
    [(read, events)] = turns_with_events(conversation, turns=[turn])
    text = export_turn(turn_dict(read, events, ledger=False), turn.index, "markdown")
    lines = text.split("\n")
    heading = next((n for n, line in enumerate(lines[:4]) if line.startswith("## ")), None)
    if heading is not None:
        lines = lines[heading + 1:]
    return "\n".join(lines).strip() + "\n"


@dataclass
class Found:
    """A message of the conversation holding the searched text: its turn, and the passage
    (before, match, after) as plain text."""

    index: int
    turn_id: Any
    role: str
    before: str
    match: str
    after: str


FIND_LIMIT = 100
FIND_CONTEXT = 60


def find_in_conversation(conversation: Conversation, query: str) -> tuple[list[Found], bool]:
    """The messages of ``conversation`` holding ``query`` (case-insensitive), in turn order,
    at most ``FIND_LIMIT`` (and whether there were more): every turn, not only those a page
    shows. The passage is read without its markdown syntax where the match survives it."""
    query = check_filter_text("q", query.strip())
    if not query:
        return [], False
    rows = Event.objects.filter(conversation=conversation, kind="message",
                                text__icontains=query).order_by("seq").values_list(
        "turn__index", "turn_id", "turn__role", "text")[:FIND_LIMIT + 1]
    found = []
    lowered = query.lower()
    for index, turn_id, role, text in rows[:FIND_LIMIT]:
        for body in (plain_text(text), text):
            at = body.lower().find(lowered)
            if at != -1:
                break
        if at == -1:
            continue  # (a case the database folds and Python does not)
        end = at + len(query)
        left, right = max(0, at - FIND_CONTEXT), min(len(body), end + FIND_CONTEXT)
        before = ("…" if left else "") + " ".join(body[left:at].split())
        after = " ".join(body[end:right].split()) + ("…" if right < len(body) else "")
        found.append(Found(index, turn_id, role,
                           before + (" " if body[at - 1:at].isspace() else ""),
                           body[at:end],
                           (" " if body[end:end + 1].isspace() else "") + after))
    return found, len(rows) > FIND_LIMIT
