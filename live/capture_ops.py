"""The capture log's operations (``live.capture``): what its writer thread applies, in SQL, one
batch per transaction. Each operation is a tuple, its kind first: ``open``, ``respond``,
``chunk``, ``end``, ``recorded``, ``turn``, ``claim``, ``untake``, ``drop_taker``, ``announce``,
``settled``."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import orjson

KEEP_ANNOUNCED = 3600  # seconds a recorder's announcement is kept for its server to send

CHUNK_ROWS = 300  # chunks inserted by one statement at most (3 parameters each)


def apply_batch(db: sqlite3.Connection, ops: list[tuple[Any, ...]]) -> None:
    """``ops`` in order, each run of chunks in two statements: one insert for its chunks, one
    update for the counters of the exchanges they belong to. A statement gives up the GIL
    while SQLite runs it and must win it back after, which the recorders' threads make wait:
    with two statements per chunk a batch of 16-20 chunks took up to 27 ms under load, now up
    to 10, and the first byte of a request waits for its chunk's batch (``bench.proxy
    --spread 0.5``)."""
    run: list[tuple[Any, ...]] = []
    for op in ops:
        if op[0] == "chunk":
            run.append(op)
            continue
        if run:
            _append_chunks(db, run)
            run = []
        _apply(db, op)
    if run:
        _append_chunks(db, run)


def _append_chunks(db: sqlite3.Connection, run: list[tuple[Any, ...]]) -> None:
    _each_values(db, "INSERT OR IGNORE INTO chunks (exchange, n, data) VALUES {values}",
                 [(xid, n, data) for _, xid, n, data in run])
    counts: dict[str, list[int]] = {}  # exchange -> [chunks so far, bytes added]
    for _, xid, n, data in run:
        found = counts.setdefault(xid, [0, 0])
        found[0] = max(found[0], n + 1)
        found[1] += len(data)
    rows = [(xid, chunks, size) for xid, (chunks, size) in counts.items()]
    if sqlite3.sqlite_version_info < (3, 33):  # no UPDATE ... FROM: a statement per exchange
        db.executemany("UPDATE exchanges SET chunks = MAX(chunks, ?), bytes = bytes + ? "
                       "WHERE id = ?", [(chunks, size, xid) for xid, chunks, size in rows])
        return
    _each_values(db, "WITH run (id, chunks, bytes) AS (VALUES {values}) UPDATE exchanges SET "
                 "chunks = MAX(exchanges.chunks, run.chunks), bytes = exchanges.bytes + "
                 "run.bytes FROM run WHERE exchanges.id = run.id", rows)


def _each_values(db: sqlite3.Connection, sql: str, rows: list[tuple[Any, Any, Any]]) -> None:
    """``sql`` with its ``{values}`` list holding ``rows`` (three values each), as few
    statements as SQLite's limit on parameters allows (``CHUNK_ROWS`` rows each)."""
    for start in range(0, len(rows), CHUNK_ROWS):
        part = rows[start:start + CHUNK_ROWS]
        db.execute(sql.format(values=", ".join(["(?, ?, ?)"] * len(part))),
                   [value for row in part for value in row])


def _apply(db: sqlite3.Connection, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "open":
        _, xid, what, instance, opened, meta, request, taker = op
        db.execute("INSERT OR IGNORE INTO exchanges (id, kind, instance, opened, meta, request, "
                   "taker) VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (xid, what, instance, opened, meta, request, taker))
    elif kind == "respond":
        _, xid, status, encoding = op
        db.execute("UPDATE exchanges SET status = ?, encoding = ? WHERE id = ?",
                   (status, encoding, xid))
    elif kind == "end":
        _, xid, state, failure, status, *rest = op
        forwarded = rest[0] if rest else None
        ending = db.execute(
            "UPDATE exchanges SET state = ?, failure = COALESCE(?, failure), "
            "status = COALESCE(?, status), ended = ? WHERE id = ? AND state = 'open'",
            (state, failure, status, time.time(), xid)).rowcount
        if ending and forwarded is not None:
            db.execute("DELETE FROM chunks WHERE exchange = ? AND n >= ?", (xid, forwarded))
            db.execute("UPDATE exchanges SET chunks = MIN(chunks, ?), bytes = (SELECT "
                       "COALESCE(SUM(LENGTH(data)), 0) FROM chunks WHERE exchange = ?) "
                       "WHERE id = ?", (forwarded, xid, xid))
    elif kind == "settled":
        pass
    elif kind == "recorded":
        _, xid, turn, note = op
        db.execute("UPDATE exchanges SET recorded = ?, turn = COALESCE(?, turn), note = ?, "
                   "request = NULL WHERE id = ?", (time.time(), turn, note, xid))
        db.execute("DELETE FROM chunks WHERE exchange = ?", (xid,))
    elif kind == "turn":
        _, xid, turn = op
        db.execute("UPDATE exchanges SET turn = ? WHERE id = ?", (turn, xid))
    elif kind == "claim":
        # Exchanges of a process that is gone become ``instance``'s; those it was still
        # forwarding are over (``abandoned``: the app did not get the rest).
        _, dead, instance = op
        db.execute("UPDATE exchanges SET state = 'abandoned', ended = ? "
                   "WHERE instance = ? AND recorded IS NULL AND state = 'open'",
                   (time.time(), dead))
        db.execute("UPDATE exchanges SET instance = ? WHERE instance = ? AND recorded IS NULL",
                   (instance, dead))
        _drop_taker(db, dead)
    elif kind == "untake":
        # Whoever took these records them no more (a recorder stopping, a runner giving up):
        # the next to take them from the log does.
        _, taker, xids = op
        db.executemany("UPDATE exchanges SET taker = NULL WHERE id = ? AND taker = ? "
                       "AND recorded IS NULL", [(xid, taker) for xid in xids])
    elif kind == "drop_taker":
        _drop_taker(db, op[1])
    elif kind == "announce":
        _, server, groups, text = op
        db.execute("INSERT INTO announcements (at, server, groups, text) VALUES (?, ?, ?, ?)",
                   (time.time(), server, orjson.dumps(groups).decode(), text))
    else:  # pragma: no cover - a bug
        raise ValueError(f"unknown capture operation {kind!r}")


def _drop_taker(db: sqlite3.Connection, dead: str) -> None:
    """What ``dead`` (a process that is gone) had taken is free for the next to take."""
    db.execute("UPDATE exchanges SET taker = NULL WHERE taker = ? AND recorded IS NULL",
               (dead,))
