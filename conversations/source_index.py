"""The Sources pages' rows (``SourceUse``: one per turn and source), kept as the store writes.

The store hands each write's events and attributions to a ``Pending`` (``conversations.store``:
one call per event, one per attribution, one at the end of the write), which gathers, per turn
and source, how many attributions cite it (and how each range was placed) and how many hosted
activities listed it among the sources they consulted; ``write`` adds them to the turn's rows
in one statement per write (an upsert: a live turn's citations and searches come in several
writes). A turn's provider and model are copied onto its rows from the turn as they are
written, and again when the turn's provenance is set later (``provenance``). ``rebuild``
makes every row again from the stored events.

What a source is: its URL; a source without one (a document a model cited by title) is its
title. Its host is where the URL points, except a Gemini grounding redirect
(``vertexaisearch.cloud.google.com``), which stands for the site its title names (what the
page shows the reader); its site is that host's registrable domain by the Public Suffix List
(``publicsuffixlist``'s bundled copy: nothing is fetched), or the host itself when it has none
(an address, ``localhost``).
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from django.db import connections, router
from publicsuffixlist import PublicSuffixList

from conversations import source_models, source_tally
from conversations.domains import host_of, reader_domain
from conversations.models import Attribution, Conversation, Event, SearchUse, SourceUse, Turn
from streams.bodies import ActivityBody, Body, load

GROUNDING_REDIRECT = "vertexaisearch.cloud.google.com"
INTEGRITIES = source_models.INTEGRITIES
_HOST_LENGTH = SourceUse._meta.get_field("host").max_length
_ACTIVITY_LENGTH = SearchUse._meta.get_field("activity_id").max_length


@lru_cache(maxsize=1)
def _suffixes() -> PublicSuffixList:
    return PublicSuffixList()  # the copy the package ships (no download)


def source_key(url: str, title: str) -> str:
    """What identifies a source across turns: its URL, or its title when it has none."""
    return url or title


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@lru_cache(maxsize=65536)
def host_and_site(url: str, title: str) -> tuple[str, str]:
    """The host a source counts under, and that host's registrable domain."""
    host = host_of(url)
    if host == GROUNDING_REDIRECT:
        host = reader_domain(title) or host
    host = host[:_HOST_LENGTH]
    if not host:
        return "", ""
    site = None if "." not in host or _is_address(host) else _suffixes().privatesuffix(host)
    return host, (site or host)[:_HOST_LENGTH]


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


class _Use:
    __slots__ = ("consulted", "counts", "title", "url")

    def __init__(self, url: str, title: str) -> None:
        self.url, self.title = url, title
        self.consulted = 0
        self.counts = [0, 0, 0, 0, 0]  # cited, then INTEGRITIES


class Pending:
    """What one write adds to the rows: per (turn, source key), its counts."""

    def __init__(self) -> None:
        self.turn_of: dict[Any, Any] = {}  # event id -> turn id, as the write has them
        self.uses: dict[tuple[Any, str], _Use] = {}
        self.searches: dict[tuple[Any, str], None] = {}  # (turn id, web search activity id)
        # The turns the write inserts: id -> (conversation id, role, provider, model, time);
        # whether it starts the conversation (its part of the roll-up is then all in this
        # write: made here, not read back); and the conversation's owner (``...``: not known).
        self.turns: dict[Any, tuple[Any, str, str, str, Any]] = {}
        self.fresh = False
        self.owner: Any = ...
        self.conversation: Any = None  # the write's, as the database takes it

    def turn(self, turn_id: Any, conversation_id: Any, role: str, provider: str, model: str,
             created_at: Any) -> None:
        self.turns[turn_id] = (conversation_id, role, provider, model, created_at)

    def _use(self, turn_id: Any, url: str, title: str) -> _Use:
        key = (turn_id, source_key(url, title))
        use = self.uses.get(key)
        if use is None:
            use = self.uses[key] = _Use(url, title)
        elif not use.title and title:
            use.title = title
        return use

    def event(self, event_id: Any, turn_id: Any, body: Body) -> None:
        self.turn_of[event_id] = turn_id
        if type(body) is not ActivityBody:
            return
        if body.name == "web_search" and body.id:
            self.searches[(turn_id, body.id[:_ACTIVITY_LENGTH])] = None
        if body.sources:
            seen = set()
            for source in body.sources:
                url, title = _text(source.get("url")), _text(source.get("title"))
                if (url or title) and (url, title) not in seen:
                    seen.add((url, title))
                    self._use(turn_id, url, title).consulted += 1

    def attribution(self, event_id: Any, url: str, title: str, integrity: str) -> None:
        if not (url or title):
            return
        counts = self._use(self.turn_of[event_id], url, title).counts
        counts[0] += 1
        if integrity in INTEGRITIES:
            counts[1 + INTEGRITIES.index(integrity)] += 1

    def rows(self) -> list[list[Any]]:
        """The upsert's parameters, in ``_sql``'s order."""
        out = []
        for (turn_id, key), use in self.uses.items():
            host, site = host_and_site(use.url, use.title)
            out.append([key, key_hash(key), use.title, host, site, *use.counts, use.consulted,
                        turn_id])
        return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


@lru_cache(maxsize=4)
def _sql(alias: str) -> tuple[str, str, str, str]:
    connection = connections[alias]
    q = connection.ops.quote_name
    table, turns = q(SourceUse._meta.db_table), q(Turn._meta.db_table)
    searches = q(SearchUse._meta.db_table)
    counted = ["cited", *INTEGRITIES, "consulted"]
    columns = ["turn_id", "conversation_id", "provider", "model", "created_at", "key", "key_hash",
               "title", "host", "site", *counted]
    added = ", ".join(f"{q(c)} = {table}.{q(c)} + excluded.{q(c)}" for c in counted)
    # The turn's provenance and time from its row (written earlier in the same write, or
    # before): a live turn's events do not carry them.
    upsert = (
        f"INSERT INTO {table} ({', '.join(q(c) for c in columns)}) "
        f"SELECT t.{q('id')}, t.{q('conversation_id')}, t.{q('provider')}, t.{q('model')}, "
        f"t.{q('created_at')}, %s, %s, %s, %s, %s, {', '.join(['%s'] * len(counted))} "
        f"FROM {turns} t WHERE t.{q('id')} = %s "
        f"ON CONFLICT ({q('turn_id')}, {q('key_hash')}) DO UPDATE SET {added}, "
        f"{q('title')} = CASE WHEN {table}.{q('title')} = '' THEN excluded.{q('title')} "
        f"ELSE {table}.{q('title')} END"
    )
    search = (
        f"INSERT INTO {searches} ({q('turn_id')}, {q('conversation_id')}, {q('provider')}, "
        f"{q('model')}, {q('created_at')}, {q('activity_id')}) "
        f"SELECT t.{q('id')}, t.{q('conversation_id')}, t.{q('provider')}, t.{q('model')}, "
        f"t.{q('created_at')}, %s FROM {turns} t WHERE t.{q('id')} = %s "
        f"ON CONFLICT ({q('turn_id')}, {q('activity_id')}) DO NOTHING"
    )
    provenance = (f"UPDATE {table} SET {q('provider')} = %s, {q('model')} = %s "
                  f"WHERE {q('turn_id')} = %s")
    search_provenance = (f"UPDATE {searches} SET {q('provider')} = %s, {q('model')} = %s "
                         f"WHERE {q('turn_id')} = %s")
    return upsert, search, provenance, search_provenance


_ROWS_PER_STATEMENT = 500  # 12 parameters a row: well within SQLite's limit


@lru_cache(maxsize=8)
def _many_sql(alias: str, count: int) -> str:
    """The upsert of ``count`` rows in one statement (a statement a row was most of what
    keeping these rows cost a bulk ingest on SQLite, bench.sources --ingest, and a round trip
    a row on PostgreSQL)."""
    connection = connections[alias]
    q = connection.ops.quote_name
    turns = q(Turn._meta.db_table)
    upsert = _sql(alias)[0]
    columns = upsert[:upsert.index(" SELECT ")]
    conflict = upsert[upsert.index(" ON CONFLICT "):]
    values = ", ".join(["(" + ", ".join(["%s"] * 12) + ")"] * count)
    picked = ", ".join(f"v.column{n}" for n in range(1, 12))
    return (f"{columns} SELECT t.{q('id')}, t.{q('conversation_id')}, t.{q('provider')}, "
            f"t.{q('model')}, t.{q('created_at')}, {picked} FROM (VALUES {values}) v "
            f"JOIN {turns} t ON t.{q('id')} = v.column12 WHERE true{conflict}")


def write(cursor: Any, connection: Any, pending: Pending, *, tally: bool = True) -> None:
    """Add ``pending``'s counts to the rows (after the write's turns are inserted), and what
    that changed to the roll-up (``source_tally``)."""
    rows = pending.rows()
    into = source_tally.gathering(connection) if tally else None
    fresh = (_fresh_rows(pending, rows, connection.ops.adapt_datetimefield_value)
             if tally and pending.fresh else None)
    own = None if fresh else _own(pending, rows, into)
    change, new_answers = None, []
    if own is not None:
        new_answers = _answers(pending, own[0])
    elif tally and not pending.fresh:
        # The turns the write opens answered nothing before: their answers are made here when
        # the owner is known; what it adds to turns it did not open is read before and after.
        owner = pending.owner
        if owner is ... and pending.turns:  # not known to the write: asked
            q = connection.ops.quote_name
            cursor.execute(f"SELECT owner_id FROM {q(Conversation._meta.db_table)} WHERE id = "
                           f"(SELECT conversation_id FROM {q(Turn._meta.db_table)} WHERE id = "
                           f"%s)", [next(iter(pending.turns))])
            owner = cursor.fetchone()[0]
        new_answers = _answers(pending, owner or 0)
        touched = {r[-1] for r in rows} | {t for t, _ in pending.searches}
        answered = sorted(touched - set(pending.turns))
        if rows or answered:
            change = source_tally.Change(
                cursor, connection, turns=sorted(touched | set(pending.turns)),
                sites={r[4] for r in rows}, answered=answered)
    if fresh:  # a new conversation: its rows are all new, their turns' columns known here
        for start in range(0, len(fresh[0]), _ROWS_PER_STATEMENT):
            chunk = fresh[0][start:start + _ROWS_PER_STATEMENT]
            cursor.execute(_fresh_sql(connection.alias, len(chunk)),
                           [value for row in chunk for value in row])
    else:
        for start in range(0, len(rows), _ROWS_PER_STATEMENT):
            chunk = rows[start:start + _ROWS_PER_STATEMENT]
            cursor.execute(_many_sql(connection.alias, len(chunk)),
                           [value for row in chunk for value in row])
    added: dict[Any, int] | None = {}
    if pending.searches:
        cursor.executemany(_sql(connection.alias)[1],
                           [[activity, turn] for turn, activity in pending.searches])
        # How many were new (a search sent again is stored once): counted, not read back,
        # when they are of one turn the write did not open (a live turn's, a recording's).
        older = {turn for turn, _ in pending.searches if turn not in pending.turns}
        opened = sum(1 for turn, _ in pending.searches if turn in pending.turns)
        added = ({older.pop(): cursor.rowcount - opened} if len(older) == 1
                 and cursor.rowcount >= opened else None if older else {})
    if change is not None:
        change.apply(cursor, new_answers, added)
    elif own is not None and into is not None:
        # A conversation this transaction started: its rows join the ones gathered for it
        # (``_own``: the searches added are of one turn it did not open, counted above).
        into.add(own[1], new_answers)
        into.turns.update(pending.turns)
        for turn_id, count in (added or {}).items():
            into.answers[turn_id][5] += count
    elif fresh:
        source_tally.add_fresh(cursor, connection, fresh[1], fresh[2])
        if into is not None:
            into.conversations.add(pending.conversation)
            into.turns.update(pending.turns)
    elif new_answers:
        source_tally.add_fresh(cursor, connection, [], new_answers)


def _own(pending: Pending, rows: list[list[Any]], into: source_tally._Gathered | None
         ) -> tuple[int, list[tuple[Any, ...]]] | None:
    """A write to a conversation the transaction started (``into``: what it gathered): its
    owner and its rows as ``source_tally.part`` takes them, made from the write and what was
    gathered of the turns it did not open (None: not such a write, or not all known)."""
    if into is None or pending.conversation not in into.conversations:
        return None
    older = ({r[-1] for r in rows} | {t for t, _ in pending.searches}) - set(pending.turns)
    if not older <= into.turns or len({t for t, _ in pending.searches} & older) > 1:
        return None
    owner = pending.owner
    if owner is ...:
        return None
    owner = owner or 0
    uses = []
    for key, hashed, title, host, site, cited, *placed, consulted, turn_id in rows:
        if turn_id in pending.turns:
            _, _, provider, model, created = pending.turns[turn_id]
        else:
            known = into.answers.get(turn_id)
            if known is None:  # a turn that is no answer (a user's)
                return None
            provider, model, created = known[2], known[3], known[4]
        uses.append((pending.conversation, owner, turn_id, provider, model, created, key,
                     hashed, title, host, site, cited, consulted, *placed))
    return owner, uses


def _answers(pending: Pending, owner: int) -> list[tuple[Any, ...]]:
    """The answers of the turns the write opens, as ``source_tally.part`` takes them."""
    searches: dict[Any, int] = {}
    for turn_id, _ in pending.searches:
        searches[turn_id] = searches.get(turn_id, 0) + 1
    return [(turn_id, owner, provider, model, created, searches.get(turn_id, 0))
            for turn_id, (_, role, provider, model, created) in pending.turns.items()
            if role == "agent"]


def _fresh_rows(pending: Pending, rows: list[list[Any]], adapt: Any
                ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """A new conversation's rows from what this write holds of it (not read back): for
    ``_fresh_sql``, and its rows and answers as ``source_tally.part`` takes them."""
    owner = 0 if pending.owner in (None, ...) else pending.owner
    inserted, uses = [], []
    stamps = {turn_id: adapt(turn[4]) for turn_id, turn in pending.turns.items()}
    for key, hashed, title, host, site, cited, *placed, consulted, turn_id in rows:
        conversation_id, _, provider, model, created = pending.turns[turn_id]
        inserted.append((turn_id, conversation_id, provider, model, stamps[turn_id], key,
                         hashed, title, host, site, cited, *placed, consulted))
        uses.append((conversation_id, owner, turn_id, provider, model, created, key, hashed,
                     title, host, site, cited, consulted, *placed))
    return inserted, uses, _answers(pending, owner)


@lru_cache(maxsize=8)
def _fresh_sql(alias: str, count: int) -> str:
    """A plain INSERT of ``count`` rows of a new conversation (no turn to join, no conflict)."""
    upsert = _sql(alias)[0]
    columns = upsert[:upsert.index(" SELECT ")]
    values = ", ".join(["(" + ", ".join(["%s"] * 16) + ")"] * count)
    return f"{columns} VALUES {values}"


def provenance_change(cursor: Any, connection: Any, turn_id: Any,
                      indexed: bool = True) -> source_tally.Change | None:
    """What the roll-up holds of a turn before its provenance is set (``provenance``);
    ``indexed=False``: it has no rows yet, only its answer moves."""
    into = source_tally.gathering(connection)
    if into is not None and turn_id in into.turns and turn_id in into.answers:
        return None  # a turn of a conversation the transaction started: moved where gathered
    q = connection.ops.quote_name
    sites: list[str] = []
    if indexed:
        cursor.execute(f"SELECT DISTINCT site FROM {q(SourceUse._meta.db_table)} "
                       f"WHERE turn_id = %s", [turn_id])
        sites = [site for (site,) in cursor.fetchall()]
    return source_tally.Change(cursor, connection, turns=[turn_id], sites=sites, lock=True)


def provenance(cursor: Any, connection: Any, turn_id: Any, provider: str, model: str,
               change: source_tally.Change | None, *, indexed: bool = True) -> None:
    """The turn's provenance, set after its rows were written, onto them, and the roll-up's
    cells they (and the answer) move between (``change``: ``provenance_change``'s, read before
    the turn's row took the provenance)."""
    if indexed:
        sql = _sql(connection.alias)
        cursor.execute(sql[2], [provider, model, turn_id])
        cursor.execute(sql[3], [provider, model, turn_id])
    if change is not None:
        change.apply_provenance(cursor, turn_id, provider, model)
    else:
        into = source_tally.gathering(connection)
        assert into is not None
        into.moved(turn_id, provider, model)


def rebuild(using: str | None = None, batch: int = 2000, *, tally: bool = True) -> int:
    """Every row again, from the stored events and attributions, and (``tally``) the roll-up
    from them; returns how many rows."""
    using = using or router.db_for_write(SourceUse)
    connection = connections[using]
    SourceUse.objects.using(using).all().delete()
    SearchUse.objects.using(using).all().delete()
    last, made = None, 0
    while True:
        events = Event.objects.using(using).order_by("id").filter(
            kind__in=("hosted_activity", "message"))
        if last is not None:
            events = events.filter(id__gt=last)
        chunk = list(events.values_list("id", "turn_id", "kind", "body")[:batch])
        if not chunk:
            if tally:
                source_tally.rebuild(using)
            return made
        last = chunk[-1][0]
        pending = Pending()
        for event_id, turn_id, kind, body in chunk:
            pending.event(event_id, _db_id(connection, turn_id), load(kind, body))
        for event_id, url, title, integrity in _attributions(using, [e[0] for e in chunk]):
            pending.attribution(event_id, url, title, integrity)
        with connection.cursor() as cursor:
            write(cursor, connection, pending, tally=False)
        made += len(pending.uses) + len(pending.searches)


def _attributions(using: str, event_ids: list[Any]) -> Iterable[tuple[Any, str, str, str]]:
    return (Attribution.objects.using(using).filter(event_id__in=event_ids)
            .order_by("event_id", "ordinal")
            .values_list("event_id", "url", "title", "integrity"))


def _db_id(connection: Any, value: Any) -> Any:
    return value if connection.features.has_native_uuid_field else value.hex
