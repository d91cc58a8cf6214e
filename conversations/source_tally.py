"""The Sources roll-up (``SourceTally`` cells, ``SourceSpread`` rows), kept from the
``SourceUse`` rows as they change.

A conversation's part of the roll-up is a function of its rows alone (``_part``): per cell
(owner, domain / host / URL, UTC day, provider · model) the sums of its rows there, the turns
among them, and whether all its uses of that name lie in that one cell (``conversations``)
or in several (a ``SourceSpread`` row per cell). So every change to rows goes through
``Change``: it reads the part of the conversations it touches before (only the domains it
touches: a host's and a URL's uses all lie under their domain), the caller changes the
rows, and ``apply`` reads the part again and writes the difference, in a few statements.
Sums only grow while a turn streams; a cell's first and last seen and its title are read
again from the rows only when rows left it (an owner changed, a conversation deleted, a
turn's provenance set after its rows).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from django.db import connections, router
from django.utils.dateparse import parse_datetime

from conversations.models import Conversation, SourceUse, Turn
from conversations.source_models import SourceSpread, SourceTally

# The cell's key, in SourceTally's column order: (group, owner, name, day, provider, model).
CellKey = tuple[str, int, str, dt.date, str, str]
SUMS = ("cited", "consulted", "consulted_not_cited", "cited_sources", "cited_not_consulted",
        "exact", "repaired", "dropped", "no_source", "turns", "conversations")
_KEY = ("group", "owner", "name", "day", "provider", "model")
_ROWS_PER_STATEMENT = 400  # 21 parameters a row: well within SQLite's limit


class _Cell:
    __slots__ = ("first", "host", "label", "last", "site", "sums", "title", "turns")

    def __init__(self, site: str, host: str, label: str, when: dt.datetime) -> None:
        self.site, self.host, self.label, self.title = site, host, label, ""
        self.first = self.last = when
        self.sums = [0] * len(SUMS)
        self.turns: set[Any] = set()


Part = tuple[dict[CellKey, _Cell], set[tuple[Any, ...]]]  # cells, spread rows


def _when(value: Any) -> dt.datetime:
    """A stored time as an aware UTC datetime (SQLite hands some back as text or naive)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def _part(rows: Iterable[tuple[Any, ...]]) -> Part:
    """The roll-up's part of these SourceUse rows (``_select``'s columns)."""
    cells: dict[CellKey, _Cell] = {}
    members: dict[tuple[Any, str, str], set[CellKey]] = {}
    for (conversation, owner, turn, provider, model, created, key, hashed, title, host, site,
         cited, consulted, *placed) in rows:
        when = _when(created)
        adds = (cited, consulted > 0, consulted > 0 and not cited, cited > 0,
                cited > 0 and not consulted, *placed)
        for group, name in (("d", site), ("h", host), ("u", hashed)):
            cell_key = (group, owner, name, when.date(), provider, model)
            cell = cells.get(cell_key)
            if cell is None:
                url = group == "u"
                cell = cells[cell_key] = _Cell(site, host if url else "", key if url else "",
                                               when)
            elif when < cell.first:
                cell.first = when
            elif when > cell.last:
                cell.last = when
            if group == "u" and title > cell.title:
                cell.title = title
            sums = cell.sums
            for n, value in enumerate(adds):
                sums[n] += value
            cell.turns.add(turn)
            members.setdefault((conversation, group, name), set()).add(cell_key)
    spread = set()
    for (conversation, _group, _name), keys in members.items():
        if len(keys) == 1:
            cells[next(iter(keys))].sums[-1] += 1
        else:
            spread.update((conversation, *key) for key in keys)
    for cell in cells.values():
        cell.sums[-2] = len(cell.turns)
    return cells, spread


@lru_cache(maxsize=4)
def _tables(alias: str) -> dict[str, str]:
    q = connections[alias].ops.quote_name
    return {name: q(model._meta.db_table) for name, model in (
        ("use", SourceUse), ("tally", SourceTally), ("spread", SourceSpread),
        ("conversation", Conversation), ("turn", Turn))}


def _select(alias: str, conversations: str, sites: str) -> str:
    """SourceUse rows with their conversation's owner, ``_part``'s columns; ``conversations``
    and ``sites``: the conditions on them."""
    t = _tables(alias)
    return (f"SELECT u.conversation_id, COALESCE(c.owner_id, 0), u.turn_id, u.provider, "
            f"u.model, u.created_at, u.key, u.key_hash, u.title, u.host, u.site, u.cited, "
            f"u.consulted, u.exact, u.repaired, u.dropped, u.no_source "
            f"FROM {t['use']} u JOIN {t['conversation']} c ON c.id = u.conversation_id "
            f"WHERE u.conversation_id {conversations}{sites}")


def _marks(values: Collection[Any]) -> str:
    return "(" + ", ".join(["%s"] * len(values)) + ")"


class Change:
    """The roll-up's part of some conversations' rows (of some domains, or all), read before
    the rows change; ``apply`` writes the difference the change made."""

    def __init__(self, cursor: Any, connection: Any, *, conversations: Collection[Any] = (),
                 turns: Collection[Any] = (), sites: Collection[str] | None = None) -> None:
        self.connection = connection
        if turns:  # the conversations of these turns
            t = _tables(connection.alias)
            where = f"IN (SELECT conversation_id FROM {t['turn']} WHERE id IN {_marks(turns)})"
            params = list(turns)
        else:
            where, params = f"IN {_marks(conversations)}", list(conversations)
        if sites is not None:
            sites = sorted(set(sites))
            where += f" AND u.site IN {_marks(sites)}"
            params += sites
        self.sql, self.params = _select(connection.alias, where, ""), params
        self.before = self._read(cursor) if (turns or conversations) and sites != [] else None

    def _read(self, cursor: Any) -> Part:
        cursor.execute(self.sql, self.params)
        return _part(cursor.fetchall())

    def apply(self, cursor: Any) -> None:
        if self.before is None:
            return
        write(cursor, self.connection, self.before, self._read(cursor))


def write(cursor: Any, connection: Any, before: Part, after: Part) -> None:
    """The difference from ``before`` to ``after`` into the roll-up."""
    old, new = before[0], after[0]
    upserts: list[list[Any]] = []
    left: list[CellKey] = []  # cells rows left: emptied, or their times and title read again
    ops = connection.ops
    for key in old.keys() | new.keys():
        was, now = old.get(key), new.get(key)
        if now is None:
            assert was is not None
            diff, now_cell, left_it = [-n for n in was.sums], was, True
        else:
            diff = list(now.sums) if was is None else [
                a - b for a, b in zip(now.sums, was.sums, strict=True)]
            now_cell = now
            left_it = was is not None and (was.first < now.first or was.last > now.last
                                           or was.title > now.title)
            if was is not None and not any(diff) and not left_it:
                continue
        if left_it:
            left.append(key)
        group, owner, name, day, provider, model = key
        upserts.append([group, owner, name, ops.adapt_datefield_value(day), provider, model,
                        now_cell.site, now_cell.host, now_cell.label, now_cell.title, *diff,
                        ops.adapt_datetimefield_value(now_cell.first),
                        ops.adapt_datetimefield_value(now_cell.last)])
    alias = connection.alias
    for start in range(0, len(upserts), _ROWS_PER_STATEMENT):
        chunk = upserts[start:start + _ROWS_PER_STATEMENT]
        cursor.execute(_upsert_sql(alias, len(chunk)), [v for row in chunk for v in row])
    if left:
        _mend(cursor, connection, left)
    gone, came = before[1] - after[1], after[1] - before[1]
    if gone:
        cursor.executemany(_spread_sql(alias)[0], [_spread_row(ops, r) for r in gone])
    if came:
        cursor.executemany(_spread_sql(alias)[1], [_spread_row(ops, r) for r in came])


def _spread_row(ops: Any, row: tuple[Any, ...]) -> list[Any]:
    conversation, group, owner, name, day, provider, model = row
    return [conversation, group, owner, name, ops.adapt_datefield_value(day), provider, model]


@lru_cache(maxsize=16)
def _upsert_sql(alias: str, count: int) -> str:
    connection = connections[alias]
    q, t = connection.ops.quote_name, _tables(alias)
    least, greatest = (("MIN", "MAX") if connection.vendor == "sqlite"
                       else ("LEAST", "GREATEST"))
    columns = [*_KEY, "site", "host", "label", "title", *SUMS, "first_seen", "last_seen"]
    values = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * count)
    tally = t["tally"]
    added = ", ".join(f"{q(c)} = {tally}.{q(c)} + excluded.{q(c)}" for c in SUMS)
    return (f"INSERT INTO {tally} ({', '.join(q(c) for c in columns)}) VALUES {values} "
            f"ON CONFLICT ({', '.join(q(c) for c in _KEY)}) DO UPDATE SET {added}, "
            f"{q('first_seen')} = {least}({tally}.{q('first_seen')}, excluded.{q('first_seen')}), "
            f"{q('last_seen')} = {greatest}({tally}.{q('last_seen')}, excluded.{q('last_seen')}), "
            f"{q('title')} = {greatest}({tally}.{q('title')}, excluded.{q('title')})")


@lru_cache(maxsize=4)
def _spread_sql(alias: str) -> tuple[str, str]:
    q, t = connections[alias].ops.quote_name, _tables(alias)
    columns = ["conversation_id", *_KEY]
    keyed = " AND ".join(f"{q(c)} = %s" for c in columns)
    return (f"DELETE FROM {t['spread']} WHERE {keyed}",
            f"INSERT INTO {t['spread']} ({', '.join(q(c) for c in columns)}) "
            f"VALUES ({', '.join(['%s'] * len(columns))}) ON CONFLICT DO NOTHING")


def _mend(cursor: Any, connection: Any, keys: list[CellKey]) -> None:
    """Cells rows left: gone when empty, else their first and last seen and title read again
    from the rows still in them (a minimum cannot be taken back by a difference)."""
    q, t, ops = connection.ops.quote_name, _tables(connection.alias), connection.ops
    keyed = " AND ".join(f"{q(c)} = %s" for c in _KEY)
    params = [[g, o, n, ops.adapt_datefield_value(d), p, m] for g, o, n, d, p, m in keys]
    cursor.executemany(f"DELETE FROM {t['tally']} WHERE {keyed} AND {q('turns')} <= 0", params)
    rows = (f"FROM {t['use']} u JOIN {t['conversation']} c ON c.id = u.conversation_id "
            f"WHERE COALESCE(c.owner_id, 0) = %s AND u.provider = %s AND u.model = %s "
            f"AND u.created_at >= %s AND u.created_at < %s AND ")
    named = {"d": "u.site = %s", "h": "u.site = %s AND u.host = %s", "u": "u.key_hash = %s"}
    for group, owner, name, day, provider, model in keys:
        found = SourceTally.objects.using(connection.alias).filter(
            group=group, owner=owner, name=name, day=day, provider=provider, model=model
        ).values_list("site", flat=True).first()
        if found is None:
            continue
        start = dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)
        span = [ops.adapt_datetimefield_value(start),
                ops.adapt_datetimefield_value(start + dt.timedelta(days=1))]
        which = [found, name] if group == "h" else [name]
        cursor.execute(f"SELECT MIN(u.created_at), MAX(u.created_at), MAX(u.title) "
                       f"{rows}{named[group]}", [owner, provider, model, *span, *which])
        first, last, title = cursor.fetchone()
        cursor.execute(
            f"UPDATE {t['tally']} SET {q('first_seen')} = %s, {q('last_seen')} = %s, "
            f"{q('title')} = %s WHERE {keyed}",
            [ops.adapt_datetimefield_value(_when(first)), ops.adapt_datetimefield_value(
                _when(last)), title if group == "u" else "",
             group, owner, name, ops.adapt_datefield_value(day), provider, model])


@contextmanager
def changing(conversation_id: Any) -> Iterator[None]:
    """Around a change to a whole conversation's rows (its owner, its delete)."""
    connection = connections[router.db_for_write(SourceTally)]
    with connection.cursor() as cursor:
        change = Change(cursor, connection, conversations=[_db_id(connection, conversation_id)])
    yield
    with connection.cursor() as cursor:
        change.apply(cursor)


def rebuild(using: str | None = None, batch: int = 1000) -> int:
    """The whole roll-up again from the SourceUse rows; returns how many cells."""
    using = using or router.db_for_write(SourceTally)
    connection = connections[using]
    SourceTally.objects.using(using).all().delete()
    SourceSpread.objects.using(using).all().delete()
    ids = list(Conversation.objects.using(using).order_by("pk").values_list("pk", flat=True))
    empty: Part = ({}, set())
    with connection.cursor() as cursor:
        for start in range(0, len(ids), batch):
            chunk = [_db_id(connection, pk) for pk in ids[start:start + batch]]
            cursor.execute(_select(using, f"IN {_marks(chunk)}", ""), chunk)
            write(cursor, connection, empty, _part(cursor.fetchall()))
    return SourceTally.objects.using(using).count()


def _db_id(connection: Any, value: Any) -> Any:
    return value if connection.features.has_native_uuid_field else value.hex
