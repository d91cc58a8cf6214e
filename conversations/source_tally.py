"""The Sources roll-up (``SourceTally`` cells, ``SourceSpread`` rows), kept from the
``SourceUse`` rows as they change.

A conversation's part of the roll-up is a function of its rows alone (``part``): per cell
(owner, domain / host / URL, UTC day, provider · model) the sums of its rows there, the turns
among them, and whether all its uses of that name lie in that one cell (``conversations``)
or in several (a ``SourceSpread`` row per cell). So every change to rows goes through
``Change``: it reads the part of the conversations it touches before (only the domains it
touches: a host's and a URL's uses all lie under their domain), the caller changes the
rows, and ``apply`` reads the part again and writes the difference, in a few statements.
Sums only grow while a turn streams; a cell's first and last seen and its title are read
again from the rows only when rows left it (an owner changed, a conversation deleted, a
turn's provenance set after its rows).

Inside a transaction of many writes (``gathered``: a bulk ingest's batch, a recording) the
differences are summed and written at its end, and the writes to a conversation it started
read nothing back: its rows are made from the writes. On PostgreSQL that sum goes into
``SourceTallyDelta`` rows, which ``fold`` adds to the cells before they are read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from django.db import connections, router
from django.utils.dateparse import parse_datetime

from conversations.models import Conversation, SearchUse, SourceUse, Turn
from conversations.source_models import SourceSpread, SourceTally, SourceTallyDelta

# The cell's key, in SourceTally's column order: (group, owner, name, day, provider, model).
CellKey = tuple[str, int, str, dt.date, str, str]
SUMS = ("cited", "consulted", "consulted_not_cited", "cited_sources", "cited_not_consulted",
        "exact", "repaired", "dropped", "no_source", "turns", "conversations", "searches",
        "searched")
_TURNS, _CONVERSATIONS = SUMS.index("turns"), SUMS.index("conversations")
ANSWERS = "a"  # the group of a provider · model's answers: their cells' name is ""
_KEY = ("group", "owner", "name", "day", "provider", "model")
_ROWS_PER_STATEMENT = 400  # 25 parameters a row: well within SQLite's limit


class _Cell:
    __slots__ = ("first", "host", "label", "last", "site", "sums", "title", "turns")

    def __init__(self, site: str, host: str, label: str, when: dt.datetime) -> None:
        self.site, self.host, self.label, self.title = site, host, label, ""
        self.first = self.last = when
        self.sums = [0] * len(SUMS)
        self.turns: set[Any] = set()


Part = tuple[dict[CellKey, _Cell], set[tuple[Any, ...]]]  # cells, spread rows
EMPTY: Part = ({}, set())


def _when(value: Any) -> dt.datetime:
    """A stored time as an aware UTC datetime (SQLite hands some back as text or naive)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def part(rows: Iterable[tuple[Any, ...]], answers: Iterable[tuple[Any, ...]] = ()) -> Part:
    """The roll-up's part of these SourceUse rows (``_rows_sql``'s columns) and these agent
    turns (``_answers_sql``'s: the turn, its owner, provider, model, time, web searches)."""
    cells: dict[CellKey, _Cell] = {}
    for turn, owner, provider, model, created, searches in answers:
        day = _when(created).date()
        cell_key = (ANSWERS, owner, "", day, provider, model)
        cell = cells.get(cell_key)
        if cell is None:
            # An answer cell's times are its day's start: no page shows them, and a turn
            # leaving it (its provenance set) then needs no reading again.
            start = dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)
            cell = cells[cell_key] = _Cell("", "", "", start)
        cell.turns.add(turn)
        cell.sums[-2] += searches
        cell.sums[-1] += searches > 0
    members: dict[tuple[Any, str, str], set[CellKey]] = {}
    last_created: Any = None
    for (conversation, owner, turn, provider, model, created, key, hashed, title, host, site,
         cited, consulted, exact, repaired, dropped, no_source) in rows:
        if created is not last_created:  # a turn's rows come together: its time read once
            last_created, when = created, _when(created)
            day = when.date()
        for group, name in (("d", site), ("h", host), ("u", hashed)):
            cell_key = (group, owner, name, day, provider, model)
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
            sums = cell.sums  # in SUMS' order
            sums[0] += cited
            if consulted:
                sums[1] += 1
                if not cited:
                    sums[2] += 1
            if cited:
                sums[3] += 1
                if not consulted:
                    sums[4] += 1
            sums[5] += exact
            sums[6] += repaired
            sums[7] += dropped
            sums[8] += no_source
            cell.turns.add(turn)
            member = (conversation, group, name)
            keys = members.get(member)
            if keys is None:
                members[member] = {cell_key}
            else:
                keys.add(cell_key)
    spread = set()
    for (conversation, _group, _name), keys in members.items():
        if len(keys) == 1:
            cells[next(iter(keys))].sums[_CONVERSATIONS] += 1
        else:
            spread.update((conversation, *key) for key in keys)
    for cell in cells.values():
        cell.sums[_TURNS] = len(cell.turns)
    return cells, spread


@lru_cache(maxsize=4)
def _tables(alias: str) -> dict[str, str]:
    q = connections[alias].ops.quote_name
    return {name: q(model._meta.db_table) for name, model in (
        ("use", SourceUse), ("tally", SourceTally), ("spread", SourceSpread),
        ("conversation", Conversation), ("turn", Turn), ("search", SearchUse),
        ("delta", SourceTallyDelta))}


def _rows_sql(alias: str, where: str) -> str:
    """SourceUse rows with their conversation's owner, ``part``'s columns."""
    t = _tables(alias)
    return (f"SELECT u.conversation_id, COALESCE(c.owner_id, 0), u.turn_id, u.provider, "
            f"u.model, u.created_at, u.key, u.key_hash, u.title, u.host, u.site, u.cited, "
            f"u.consulted, u.exact, u.repaired, u.dropped, u.no_source "
            f"FROM {t['use']} u JOIN {t['conversation']} c ON c.id = u.conversation_id "
            f"WHERE {where}")


def _answers_sql(alias: str, where: str) -> str:
    """Agent turns with their owner and web searches, ``part``'s ``answers``."""
    t = _tables(alias)
    return (f"SELECT t.id, COALESCE(c.owner_id, 0), t.provider, t.model, t.created_at, "
            f"(SELECT COUNT(*) FROM {t['search']} s WHERE s.turn_id = t.id) "
            f"FROM {t['turn']} t JOIN {t['conversation']} c ON c.id = t.conversation_id "
            f"WHERE t.role = 'agent' AND {where}")


def _marks(values: Collection[Any]) -> str:
    return "(" + ", ".join(["%s"] * len(values)) + ")"


class _Difference:
    """What a change does to the roll-up: per cell, the sums to add (with the cell's names and
    its first and last seen since), the cells rows left (their times and title read again),
    and the spread rows that came and went. Those of a transaction's writes add up."""

    def __init__(self) -> None:
        self.cells: dict[CellKey, _Cell] = {}
        self.left: dict[CellKey, str] = {}  # the cell's site (a host's is needed to read it)
        self.came: set[tuple[Any, ...]] = set()
        self.gone: set[tuple[Any, ...]] = set()

    def add(self, before: Part, after: Part) -> None:
        old, new = before[0], after[0]
        for key in old.keys() | new.keys():
            was, now = old.get(key), new.get(key)
            if now is None:
                assert was is not None
                diff, cell, left = [-n for n in was.sums], was, True
            else:
                diff = now.sums if was is None else [
                    a - b for a, b in zip(now.sums, was.sums, strict=True)]
                cell = now
                left = was is not None and (was.first < now.first or was.last > now.last
                                            or was.title > now.title)
                if was is not None and not any(diff) and not left:
                    continue
            if left:
                self.left[key] = cell.site
            into = self.cells.get(key)
            if into is None:
                into = self.cells[key] = _Cell(cell.site, cell.host, cell.label, cell.first)
                into.last, into.title = cell.last, cell.title
            else:
                into.first, into.last = min(into.first, cell.first), max(into.last, cell.last)
                into.title = max(into.title, cell.title)
            into.sums = [a + b for a, b in zip(into.sums, diff, strict=True)]
        for row in before[1] - after[1]:
            if row in self.came:
                self.came.discard(row)
            else:
                self.gone.add(row)
        for row in after[1] - before[1]:
            if row in self.gone:
                self.gone.discard(row)
            else:
                self.came.add(row)

    def write(self, cursor: Any, connection: Any, *, journal: bool = False) -> None:
        """Into the cells; ``journal``: into ``SourceTallyDelta`` rows, folded into the
        cells later (``fold``)."""
        ops, alias = connection.ops, connection.alias
        if self.left and not journal:  # the cells it mends whole first: the journal folded
            fold(alias)
        upserts = []
        # In key order: two transactions adding to the same cells lock them in the same order.
        for key in sorted(self.cells):
            cell = self.cells[key]
            if not any(cell.sums) and (key not in self.left or key[0] == ANSWERS):
                # Nothing changed (an answer cell's times are its day's: a turn that came and
                # left within the transaction, a recording's turn before its provenance, leaves
                # it as it was; touching it made every recording wait on that one row).
                self.left.pop(key, None)
                continue
            group, owner, name, day, provider, model = key
            upserts.append([group, owner, name, ops.adapt_datefield_value(day), provider, model,
                            cell.site, cell.host, cell.label, cell.title, *cell.sums,
                            ops.adapt_datetimefield_value(cell.first),
                            ops.adapt_datetimefield_value(cell.last),
                            *([key in self.left] if journal else [])])
        for start in range(0, len(upserts), _ROWS_PER_STATEMENT):
            chunk = upserts[start:start + _ROWS_PER_STATEMENT]
            cursor.execute((_journal_sql if journal else _upsert_sql)(alias, len(chunk)),
                           [v for row in chunk for v in row])
        if self.left and not journal:
            _mend(cursor, connection, self.left)
        if self.gone:
            cursor.executemany(_spread_sql(alias)[0], [_spread_row(ops, r) for r in self.gone])
        if self.came:
            cursor.executemany(_spread_sql(alias)[1], [_spread_row(ops, r) for r in self.came])


class _Gathered:
    """A transaction's difference, and the rows of the conversations it started (made into
    parts all at once at its end: one part for a batch, not one a conversation). Every write
    to a conversation started within adds its rows here (``source_index.write``), so that a
    recording's writes read nothing of the roll-up back."""

    def __init__(self) -> None:
        self.difference = _Difference()
        self.uses: dict[tuple[Any, Any], list[Any]] = {}  # (turn, key hash) -> part's row
        self.answers: dict[Any, list[Any]] = {}  # turn -> part's answer
        self.conversations: set[Any] = set()  # started within
        self.turns: set[Any] = set()  # theirs

    def add(self, uses: Iterable[Sequence[Any]], answers: Iterable[Sequence[Any]]) -> None:
        for row in uses:
            had = self.uses.get((row[2], row[7]))
            if had is None:
                self.uses[(row[2], row[7])] = list(row)
                continue
            for n in range(11, 17):  # cited, consulted and how placed: added, as the rows'
                had[n] += row[n]
            had[8] = had[8] or row[8]  # the title: the first given, as the rows'
        for answer in answers:
            self.answers[answer[0]] = list(answer)

    def moved(self, turn_id: Any, provider: str, model: str) -> None:
        """A turn of a conversation started within took its provenance."""
        self.answers[turn_id][2:4] = [provider, model]
        for (turn, _), row in self.uses.items():
            if turn == turn_id:
                row[3:5] = [provider, model]


def gathering(connection: Any) -> _Gathered | None:
    """Inside ``gathered``: what it holds for ``connection``."""
    found = _GATHERED.get()
    return None if found is None else found.setdefault(connection.alias, _Gathered())


# Inside ``gathered``: what the writes did to the roll-up, by connection alias.
_GATHERED: ContextVar[dict[str, _Gathered] | None] = ContextVar("source_tally_gathered",
                                                                default=None)


@contextmanager
def gathered() -> Iterator[None]:
    """Inside (a transaction of many writes: ``store.all_or_nothing``), the writes' differences
    to the roll-up are summed and written when the block ends without an error: the writes of
    a bulk ingest or of a recording add to the same few cells (an owner's day, model and
    domains), and each cell is then one row updated once, its lock held only from there to
    the commit (``search.inserts_gathered`` does so for the facet counts)."""
    found: dict[str, _Gathered] = {}
    token = _GATHERED.set(found)
    try:
        yield
    finally:
        _GATHERED.reset(token)
    for alias, into in found.items():
        if into.uses or into.answers:
            into.difference.add(EMPTY, part(into.uses.values(), into.answers.values()))
        connection = connections[alias]
        with connection.cursor() as cursor:
            into.difference.write(cursor, connection, journal=journal(connection))


def _difference(cursor: Any, connection: Any, before: Part, after: Part) -> None:
    """The difference from ``before`` to ``after`` into the roll-up: now, or at the end of
    ``gathered``."""
    found = _GATHERED.get()
    if found is None:
        difference = _Difference()
        difference.add(before, after)
        difference.write(cursor, connection)
    else:
        found.setdefault(connection.alias, _Gathered()).difference.add(before, after)


def write(cursor: Any, connection: Any, before: Part, after: Part) -> None:
    """The difference from ``before`` to ``after`` into the roll-up, now."""
    difference = _Difference()
    difference.add(before, after)
    difference.write(cursor, connection)


def add_fresh(cursor: Any, connection: Any, uses: list[tuple[Any, ...]],
              answers: list[tuple[Any, ...]]) -> None:
    """Rows (``part``'s) that had no part in the roll-up before: a new conversation's, or a
    new turn's answer. Into the roll-up now, or at the end of ``gathered``."""
    found = _GATHERED.get()
    if found is None:
        write(cursor, connection, EMPTY, part(uses, answers))
        return
    found.setdefault(connection.alias, _Gathered()).add(uses, answers)


class Change:
    """The roll-up's part of some rows, read before they change; ``apply`` writes the
    difference the change made. Either whole ``conversations`` (their owner, their delete),
    or ``turns`` (a write's, a provenance's): their conversations' rows of ``sites`` (all a
    write's rows can add to) and the answers of ``answered`` (the turns the write had before;
    by default ``turns``). ``lock``: on PostgreSQL, hold the conversation's row from the first
    read (a write holds it already: its seqs), so that no other write lands between the reads
    and counts in both differences."""

    def __init__(self, cursor: Any, connection: Any, *, conversations: Collection[Any] = (),
                 turns: Collection[Any] = (), sites: Collection[str] = (),
                 answered: Collection[Any] | None = None, lock: bool = False) -> None:
        self.connection, alias = connection, connection.alias
        self.reads: list[tuple[str, list[Any]]] = []  # (rows, answers) statements
        if conversations:
            where = f"IN {_marks(conversations)}"
            self.reads = [(_rows_sql(alias, f"u.conversation_id {where}"), list(conversations)),
                          (_answers_sql(alias, f"t.conversation_id {where}"),
                           list(conversations))]
        else:
            sites = sorted(set(sites))
            answered = list(turns if answered is None else answered)
            owners = f"(SELECT conversation_id FROM {_tables(alias)['turn']} WHERE id IN "
            self.reads = [
                (_rows_sql(alias, f"u.conversation_id IN {owners}{_marks(turns)}) AND u.site IN "
                                  f"{_marks(sites)}"), [*turns, *sites]) if sites else ("", []),
                (_answers_sql(alias, f"t.id IN {_marks(answered)}") + (
                    " FOR UPDATE OF c" if lock and connection.vendor == "postgresql" else ""),
                 answered) if answered else ("", [])]
        self.rows, self.answers = self._read(cursor)

    def _read(self, cursor: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        found: list[list[tuple[Any, ...]]] = []
        for sql, params in reversed(self.reads):  # the answers first: they take the lock
            if sql:
                cursor.execute(sql, params)
                found.append(cursor.fetchall())
            else:
                found.append([])
        return found[1], found[0]

    def apply(self, cursor: Any, new_answers: Collection[tuple[Any, ...]] = (),
              searches: dict[Any, int] | None = None) -> None:
        """After the rows changed; ``new_answers``: the answers of turns new since (``part``'s
        ``answers``, not read back); ``searches``: the web searches the change added to each
        turn of ``answered`` (None: read the answers again)."""
        if searches is None:
            rows, answers = self._read(cursor)
        else:
            self.reads[1] = ("", [])
            rows = self._read(cursor)[0]
            answers = [(*a[:5], a[5] + searches.get(a[0], 0)) for a in self.answers]
        _difference(cursor, self.connection, part(self.rows, self.answers),
                    part(rows, [*answers, *new_answers]))

    def apply_provenance(self, cursor: Any, turn_id: Any, provider: str, model: str) -> None:
        """After a turn took its provenance: its rows and answer, as read before, moved to it
        (nothing else changed, so nothing is read again)."""
        def moved(rows: list[tuple[Any, ...]], turn: int, at: int) -> list[tuple[Any, ...]]:
            return [(*row[:at], provider, model, *row[at + 2:]) if row[turn] == turn_id else row
                    for row in rows]

        _difference(cursor, self.connection, part(self.rows, self.answers),
                    part(moved(self.rows, 2, 3), moved(self.answers, 0, 2)))


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


def journal(connection: Any) -> bool:
    """Whether a transaction of many writes leaves its difference in ``SourceTallyDelta``:
    on PostgreSQL, where recordings commit side by side (SQLite has one writer: the cells
    themselves cost no waiting there)."""
    return bool(connection.vendor == "postgresql" or JOURNAL)


JOURNAL = False  # tests: the journal on SQLite too


@lru_cache(maxsize=16)
def _journal_sql(alias: str, count: int) -> str:
    q, t = connections[alias].ops.quote_name, _tables(alias)
    columns = [*_KEY, "site", "host", "label", "title", *SUMS, "first_seen", "last_seen",
               "left"]
    values = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * count)
    return f"INSERT INTO {t['delta']} ({', '.join(q(c) for c in columns)}) VALUES {values}"


def fold(using: str | None = None) -> None:
    """The differences left in ``SourceTallyDelta`` added to the cells, in one transaction
    (each row taken once: two folds at once share them out). Readers of the cells call it
    first; it costs a query when there is nothing to fold."""
    from django.db import transaction

    using = using or router.db_for_write(SourceTally)
    if not SourceTallyDelta.objects.using(using).exists():
        return
    connection = connections[using]
    q, t = connection.ops.quote_name, _tables(using)
    columns = [*_KEY, "site", "host", "label", "title", *SUMS, "first_seen", "last_seen",
               "left"]
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {t['delta']} RETURNING "
                       f"{', '.join(q(c) for c in columns)}")
        taken = cursor.fetchall()
        if not taken:
            return
        difference = _Difference()
        for group, owner, name, day, provider, model, site, host, label, title, *rest in taken:
            sums, first, last, left = rest[:len(SUMS)], rest[-3], rest[-2], rest[-1]
            if isinstance(day, str):
                day = dt.date.fromisoformat(day)
            key = (group, owner, name, day, provider, model)
            into = difference.cells.get(key)
            if into is None:
                into = difference.cells[key] = _Cell(site, host, label, _when(first))
                into.last, into.title = _when(last), title
            else:
                into.first = min(into.first, _when(first))
                into.last, into.title = max(into.last, _when(last)), max(into.title, title)
            into.sums = [a + b for a, b in zip(into.sums, sums, strict=True)]
            if left:
                difference.left[key] = site
        difference.write(cursor, connection)


@lru_cache(maxsize=4)
def _spread_sql(alias: str) -> tuple[str, str]:
    q, t = connections[alias].ops.quote_name, _tables(alias)
    columns = ["conversation_id", *_KEY]
    keyed = " AND ".join(f"{q(c)} = %s" for c in columns)
    return (f"DELETE FROM {t['spread']} WHERE {keyed}",
            f"INSERT INTO {t['spread']} ({', '.join(q(c) for c in columns)}) "
            f"VALUES ({', '.join(['%s'] * len(columns))}) ON CONFLICT DO NOTHING")


def _mend(cursor: Any, connection: Any, left: dict[CellKey, str]) -> None:
    """Cells rows left: gone when empty, else their first and last seen and title read again
    from the rows still in them (a minimum cannot be taken back by a difference)."""
    q, t, ops = connection.ops.quote_name, _tables(connection.alias), connection.ops
    keyed = " AND ".join(f"{q(c)} = %s" for c in _KEY)
    params = {key: [g, o, n, ops.adapt_datefield_value(d), p, m]
              for key, (g, o, n, d, p, m) in ((key, key) for key in sorted(left))}
    cursor.executemany(f"DELETE FROM {t['tally']} WHERE {keyed} AND {q('turns')} <= 0",
                       list(params.values()))
    owned = (f"JOIN {t['conversation']} c ON c.id = u.conversation_id "
             f"WHERE COALESCE(c.owner_id, 0) = %s AND u.provider = %s AND u.model = %s "
             f"AND u.created_at >= %s AND u.created_at < %s AND ")
    rows = {
        "d": f"FROM {t['use']} u {owned}u.site = %s",
        "h": f"FROM {t['use']} u {owned}u.site = %s AND u.host = %s",
        "u": f"FROM {t['use']} u {owned}u.key_hash = %s",
    }
    for key, site in sorted(left.items()):
        group, owner, name, day, provider, model = key
        if group == ANSWERS:  # their times are their day's (``part``)
            continue
        start = dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)
        which = [owner, provider, model, ops.adapt_datetimefield_value(start),
                 ops.adapt_datetimefield_value(start + dt.timedelta(days=1)),
                 *([site, name] if group == "h" else [name])]
        title = f"(SELECT MAX(u.title) {rows[group]})" if group == "u" else "''"
        cursor.execute(
            f"UPDATE {t['tally']} SET {q('first_seen')} = (SELECT MIN(u.created_at) "
            f"{rows[group]}), {q('last_seen')} = (SELECT MAX(u.created_at) {rows[group]}), "
            f"{q('title')} = {title} WHERE {keyed}",
            [*which, *which, *(which if group == "u" else []), *params[key]])


@contextmanager
def changing(conversation_id: Any) -> Iterator[None]:
    """Around a change to a whole conversation's rows (its owner, its delete)."""
    connection = connections[router.db_for_write(SourceTally)]
    with connection.cursor() as cursor:
        change = Change(cursor, connection, conversations=[_db_id(connection, conversation_id)])
    yield
    with connection.cursor() as cursor:
        change.apply(cursor)


def rebuild(using: str | None = None, batch: int = 1000, *, journal: bool = True) -> int:
    """The whole roll-up again from the SourceUse rows; returns how many cells. ``journal``:
    its table is there to empty (migration 0029 runs before 0030 makes it)."""
    using = using or router.db_for_write(SourceTally)
    connection = connections[using]
    SourceTally.objects.using(using).all().delete()
    if journal:
        SourceTallyDelta.objects.using(using).all().delete()
    SourceSpread.objects.using(using).all().delete()
    ids = list(Conversation.objects.using(using).order_by("pk").values_list("pk", flat=True))
    with connection.cursor() as cursor:
        for start in range(0, len(ids), batch):
            chunk = [_db_id(connection, pk) for pk in ids[start:start + batch]]
            read = Change(cursor, connection, conversations=chunk)
            write(cursor, connection, EMPTY, part(read.rows, read.answers))
    return SourceTally.objects.using(using).count()


def _db_id(connection: Any, value: Any) -> Any:
    return value if connection.features.has_native_uuid_field else value.hex
