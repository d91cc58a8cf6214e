"""The capture log: every byte of proxied traffic, durable before the app gets it, until it is
recorded.

Forwarding never waits for recording, so recording must be able to fall behind, crash or lose
its database and still catch up: what it has not recorded yet lives here, not in memory.

**Why SQLite in WAL mode, in its own file** (``var/capture.sqlite3``, ``TURNSCOPE_CAPTURE_PATH``):
it is in the standard library and needs no service beside the app (the embedded default runs one
process and no Redis); it is the most tested storage engine there is; its write-ahead log makes a
commit one append to one file, so many small appends cost little and readers never block the
writer; and a commit survives the process being killed (``synchronous=NORMAL``: what is
committed is in the OS's file cache, written out even if the process dies; a power cut may lose
the last commits, which ``TURNSCOPE_CAPTURE_FSYNC`` trades for an fsync per commit). Several
server processes on one host share the file (SQLite locks it); each host has its own log, and
the next start of a server on that host records what its log still holds. Its own file, not the
main database: the log must stay writable while the main database is down or locked, and a busy
log must not lock the main SQLite database. Segment files would need a format, an index and a
recovery procedure of their own; Redis Streams would need a service the default has not.

**Writing.** One writer thread per process takes every append from a queue and commits them in
batches (group commit): many streams' chunks cost one transaction, and the event loop only puts
an item on a queue. A chunk is forwarded to the app once its commit is done (``append`` returns
then, a fraction of a millisecond later): what an app received is in the log, whenever the
process dies.

**What is kept.** Per exchange: the request body, the response status and content encoding
(never a header that may hold a credential: request headers are not kept at all, the URL is the
redacted one), each response chunk as it was forwarded, and how it ended (``complete``: the app
got all of it; ``cut``: the provider broke off; ``gone``: the app went away; ``failed``: no
response, with the code and message; ``open``: the process died first). Once recorded, the bytes
are deleted and the row says where they went (``turn``) for an hour.

**Who records what.** An exchange's ``taker`` is the process recording it: the server for what it
records live (from its first byte), a recorder process for what it took from the log
(``take``). **Announcements**: what a recorder process would tell open pages goes here too, and
its server sends it to its own channel layer (a recorder's in-memory layer reaches no page).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings

from live import capture_ops

log = logging.getLogger("turnscope.capture")

BATCH_ITEMS = 2000  # appends committed in one transaction at most
BATCH_BYTES = 8 * 1024 * 1024
KEEP_RECORDED = 3600  # seconds a recorded exchange's row (not its bytes) is kept
PRUNE_ROWS = 2000  # rows one pruning transaction deletes at most (the writer waits for it)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS exchanges (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    instance TEXT NOT NULL,
    opened REAL NOT NULL,
    meta TEXT NOT NULL,
    request BLOB,
    status INTEGER NOT NULL DEFAULT 0,
    encoding TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL DEFAULT 'open',
    failure TEXT,
    ended REAL,
    chunks INTEGER NOT NULL DEFAULT 0,
    bytes INTEGER NOT NULL DEFAULT 0,
    recorded REAL,
    turn TEXT,
    note TEXT,
    taker TEXT
);
CREATE INDEX IF NOT EXISTS exchanges_pending ON exchanges (recorded, opened);
CREATE TABLE IF NOT EXISTS announcements (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    server TEXT NOT NULL,
    groups TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    exchange TEXT NOT NULL,
    n INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (exchange, n)
) WITHOUT ROWID;
"""

ENDED = ("complete", "cut", "gone", "failed", "abandoned")

# Exchanges a live runner records into a turn it opened first (``live.call_capture``): a live
# call's provider responses and a live replay's recorded ones. The turn is bound before their
# first byte, and keeps no wire recording made from the log (a live call keeps none; a live
# replay's turn keeps the recording it plays, stored as it opened).
RUNNER_KINDS = frozenset({"live", "replay"})


class CaptureError(RuntimeError):
    """The log could not be written or read."""


@dataclass
class Exchange:
    """One exchange as the log holds it (its chunks are read separately)."""

    id: str
    kind: str
    instance: str
    opened: float
    meta: dict[str, Any]
    request: bytes
    status: int = 0
    encoding: str = ""
    state: str = "open"
    failure: tuple[str, str] | None = None
    chunks: int = 0
    bytes: int = 0
    recorded: float | None = None
    turn: str | None = None
    taker: str | None = None  # who records it (an instance id), None: nobody yet

    @property
    def ended(self) -> bool:
        return self.state in ENDED


@dataclass
class Lag:
    """How far behind recording is: the exchanges not recorded yet."""

    count: int = 0
    bytes: int = 0
    oldest: float | None = None  # when the oldest of them was opened (epoch seconds)
    by_state: dict[str, int] = field(default_factory=dict)
    by_taker: dict[str | None, int] = field(default_factory=dict)  # None: nobody records it yet

    @property
    def seconds(self) -> float:
        return max(0.0, time.time() - self.oldest) if self.oldest is not None else 0.0


def default_path() -> Path:
    configured = getattr(settings, "TURNSCOPE_CAPTURE_PATH", None)
    return Path(configured) if configured else Path(settings.VAR_DIR) / "capture.sqlite3"


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    fsync = bool(getattr(settings, "TURNSCOPE_CAPTURE_FSYNC", False))
    db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
    db.execute("PRAGMA busy_timeout=30000")
    return db


def _row(r: sqlite3.Row | tuple[Any, ...]) -> Exchange:
    (id_, kind, instance, opened, meta, request, status, encoding, state, failure, chunks,
     size, recorded, turn, taker) = r
    fail = orjson.loads(failure) if failure else None
    return Exchange(id=id_, kind=kind, instance=instance, opened=opened,
                    meta=orjson.loads(meta), request=bytes(request or b""), status=status,
                    encoding=encoding, state=state,
                    failure=(fail[0], fail[1]) if fail else None, chunks=chunks, bytes=size,
                    recorded=recorded, turn=turn, taker=taker)


_COLUMNS = ("id, kind, instance, opened, meta, request, status, encoding, state, failure, "
            "chunks, bytes, recorded, turn, taker")


class CaptureLog:
    """One log file. Appends go through the writer thread (``append`` and friends, awaited on
    the event loop, or ``write`` from a thread); reads use a connection per thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._local = threading.local()
        self._broken: BaseException | None = None
        with _connect(path) as db:
            db.executescript(_SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(exchanges)")}
            if "taker" not in columns:  # a log an earlier version wrote
                db.execute("ALTER TABLE exchanges ADD COLUMN taker TEXT")

    # -- writing -----------------------------------------------------------------------------

    def _ensure_writer(self) -> None:
        if self._writer is not None and self._writer.is_alive():
            return
        with self._start_lock:
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._write_forever, daemon=True,
                                                name="capture-writer")
                self._writer.start()

    def _submit(self, op: tuple[Any, ...]) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._ensure_writer()
        self._queue.put((op, loop, future))
        return future

    def write(self, *op: Any) -> None:
        """One append from a thread, waiting for its commit."""
        done = threading.Event()
        box: list[BaseException] = []
        self._ensure_writer()
        self._queue.put((op, None, (done, box)))
        done.wait()
        if box:
            raise CaptureError(str(box[0])) from box[0]

    async def open(self, kind: str, meta: dict[str, Any], request: bytes, *,
                   instance: str, exchange_id: str | None = None, taker: str | None = None
                   ) -> str:
        """A new exchange; returns its id. Committed before this returns. ``taker``: who
        records it (from its first byte); None leaves it to whoever takes it from the log."""
        xid = exchange_id or str(uuid.uuid4())
        await self._submit(("open", xid, kind, instance, time.time(),
                            orjson.dumps(meta).decode(), request, taker))
        return xid

    def open_nowait(self, kind: str, meta: dict[str, Any], request: bytes, *,
                    instance: str, taker: str | None = None
                    ) -> tuple[str, asyncio.Future[None]]:
        """``open`` without waiting: the id now, the commit's future (the writer keeps the
        order, so an append awaited after this is committed after it)."""
        xid = str(uuid.uuid4())
        return xid, self._submit(("open", xid, kind, instance, time.time(),
                                  orjson.dumps(meta).decode(), request, taker))

    def respond(self, xid: str, status: int, encoding: str) -> asyncio.Future[None]:
        return self._submit(("respond", xid, status, encoding))

    def append(self, xid: str, n: int, data: bytes) -> asyncio.Future[None]:
        """Chunk ``n`` (from 0) of the response; done once committed."""
        return self._submit(("chunk", xid, n, data))

    def end(self, xid: str, state: str, failure: tuple[str, str] | None = None,
            status: int | None = None, forwarded: int | None = None) -> asyncio.Future[None]:
        """How the response ended; ``forwarded``: how many of its chunks went on to the app.
        A chunk committed but never forwarded (its forwarder was cancelled between the commit
        and the send: a server stopping) is dropped, so the log holds what the app got."""
        return self._submit(("end", xid, state, orjson.dumps(failure).decode()
                             if failure else None, status, forwarded))

    async def settled(self) -> None:
        """Done once everything submitted before it is committed (or has failed)."""
        await self._submit(("settled",))

    def _write_forever(self) -> None:
        db = _connect(self.path)
        while True:
            first = self._queue.get()
            batch = [first]
            size = len(first[0][3]) if first[0][0] == "chunk" else 0
            while len(batch) < BATCH_ITEMS and size < BATCH_BYTES:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                batch.append(item)
                if item[0][0] == "chunk":
                    size += len(item[0][3])
            error: BaseException | None = None
            try:
                db.execute("BEGIN IMMEDIATE")
                capture_ops.apply_batch(db, [op for op, _, _ in batch])
                db.execute("COMMIT")
            except BaseException as exc:  # disk full, a bug: every waiter hears of it
                error = exc
                log.error("capture: could not write %d item(s) to the log (%s)", len(batch),
                          exc, exc_info=True)
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            _settle(batch, error)

    # -- reading (any thread) ------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = _connect(self.path)
        return db

    def get(self, xid: str) -> Exchange | None:
        found = self._reader().execute(
            f"SELECT {_COLUMNS} FROM exchanges WHERE id = ?", (xid,)).fetchone()
        return _row(found) if found else None

    def chunks(self, xid: str, start: int = 0, limit_bytes: int = 4 * 1024 * 1024
               ) -> list[bytes]:
        """Chunks ``start``, ``start + 1``… as committed, about ``limit_bytes`` at most (one
        at least). A gap (a chunk missing in the middle) raises: those bytes are lost."""
        out: list[bytes] = []
        size = 0
        for n, data in self._reader().execute(
                "SELECT n, data FROM chunks WHERE exchange = ? AND n >= ? ORDER BY n",
                (xid, start)):
            if n != start + len(out):
                raise CaptureError(f"chunk {start + len(out)} of exchange {xid} is missing")
            out.append(bytes(data))
            size += len(data)
            if size >= limit_bytes:
                break
        return out

    def all_chunks(self, xid: str) -> Iterator[bytes]:
        n = 0
        while batch := self.chunks(xid, n):
            yield from batch
            n += len(batch)

    def pending(self, *, instance: str | None = None, exclude: set[str] | frozenset[str] = (
                frozenset()), limit: int = 100) -> list[Exchange]:
        """Exchanges not recorded yet, oldest first (of ``instance`` when given, and not
        taken by another)."""
        sql = f"SELECT {_COLUMNS} FROM exchanges WHERE recorded IS NULL"
        args: list[Any] = []
        if instance is not None:
            sql += " AND instance = ? AND (taker IS NULL OR taker = ?)"
            args.extend((instance, instance))
        sql += " ORDER BY opened LIMIT ?"
        args.append(limit + len(exclude))
        rows = [_row(r) for r in self._reader().execute(sql, args)]
        return [x for x in rows if x.id not in exclude][:limit]

    def instances_pending(self) -> list[str]:
        return [r[0] for r in self._reader().execute(
            "SELECT DISTINCT instance FROM exchanges WHERE recorded IS NULL")]

    def takers_pending(self) -> list[str]:
        """Who has taken exchanges not recorded yet."""
        return [r[0] for r in self._reader().execute(
            "SELECT DISTINCT taker FROM exchanges WHERE recorded IS NULL AND taker IS NOT NULL")]

    def take(self, taker: str, instance: str, limit: int) -> list[Exchange]:
        """The oldest ended exchanges of ``instance`` (a server) nobody records yet, ``limit``
        at most, now ``taker``'s: one statement, so two processes taking at once never take
        the same one."""
        rows = self._reader().execute(
            f"UPDATE exchanges SET taker = ? WHERE taker IS NULL AND id IN (SELECT id FROM "
            f"exchanges WHERE recorded IS NULL AND taker IS NULL AND state != 'open' "
            f"AND instance = ? ORDER BY opened LIMIT ?) RETURNING {_COLUMNS}",
            (taker, instance, limit)).fetchall()
        return sorted((_row(r) for r in rows), key=lambda x: x.opened)

    def untake_nowait(self, taker: str, *xids: str) -> asyncio.Future[None]:
        """``taker`` leaves ``xids`` (those not recorded) to whoever takes them next."""
        return self._submit(("untake", taker, list(xids)))

    def prune(self, before: float) -> int:
        """Rows of exchanges recorded before ``before`` leave the log, and old announcements,
        a few thousand a transaction (the writer, and so forwarding, waits for each); how
        many rows went."""
        db = self._reader()
        gone = 0
        while True:
            db.execute("BEGIN IMMEDIATE")
            try:
                n = db.execute(
                    "DELETE FROM exchanges WHERE id IN (SELECT id FROM exchanges WHERE "
                    "recorded IS NOT NULL AND recorded < ? LIMIT ?)", (before, PRUNE_ROWS)
                ).rowcount
                n += db.execute(
                    "DELETE FROM announcements WHERE seq IN (SELECT seq FROM announcements "
                    "WHERE at < ? LIMIT ?)", (time.time() - capture_ops.KEEP_ANNOUNCED,
                                              PRUNE_ROWS)).rowcount
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            gone += n
            if n < PRUNE_ROWS:
                return gone
            time.sleep(0.01)  # the writer's turn

    def untaken(self, instance: str) -> bool:
        """Whether an exchange of ``instance`` waits that nobody records yet (ended or still
        forwarded)."""
        return self._reader().execute(
            "SELECT 1 FROM exchanges WHERE recorded IS NULL AND taker IS NULL AND instance = ? "
            "LIMIT 1", (instance,)).fetchone() is not None

    def lag(self) -> Lag:
        db = self._reader()
        count, size, oldest = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0), MIN(opened) FROM exchanges "
            "WHERE recorded IS NULL").fetchone()
        states = dict(db.execute("SELECT state, COUNT(*) FROM exchanges WHERE recorded IS NULL "
                                 "GROUP BY state").fetchall())
        takers = dict(db.execute("SELECT taker, COUNT(*) FROM exchanges WHERE recorded IS NULL "
                                 "GROUP BY taker").fetchall())
        return Lag(count=count, bytes=size, oldest=oldest, by_state=states, by_taker=takers)

    def waiting(self, instance: str) -> int:
        """How many of ``instance``'s exchanges have ended and wait to be recorded."""
        found: int = self._reader().execute(
            "SELECT COUNT(*) FROM exchanges WHERE recorded IS NULL AND state != 'open' "
            "AND instance = ?", (instance,)).fetchone()[0]
        return found

    def pending_for(self, *, turns: list[str] = (), conversation: str = "") -> list[Exchange]:
        """Unrecorded exchanges bound for ``conversation`` or already recording into ``turns``
        (what a conversation's page says is still to be recorded)."""
        out = []
        for x in self.pending(limit=10_000):
            if (x.turn and x.turn in turns) or (conversation and
                                                x.meta.get("conversation") == conversation):
                out.append(x)
        return out

    def announcements(self, server: str, after: int, limit: int = 500
                      ) -> list[tuple[int, list[str], str]]:
        """What the recorders of ``server`` announced after ``after`` (its seq), oldest first:
        each ``(seq, groups, text)`` for the server to send to its channel layer."""
        return [(seq, orjson.loads(groups), text) for seq, groups, text in self._reader().execute(
            "SELECT seq, groups, text FROM announcements WHERE server = ? AND seq > ? "
            "ORDER BY seq LIMIT ?", (server, after, limit))]

    def last_announcement(self) -> int:
        found: int = self._reader().execute(
            "SELECT COALESCE(MAX(seq), 0) FROM announcements").fetchone()[0]
        return found

    def recent(self, limit: int = 20) -> list[Exchange]:
        return [_row(r) for r in self._reader().execute(
            f"SELECT {_COLUMNS} FROM exchanges ORDER BY opened DESC LIMIT ?", (limit,))]


def _settle(batch: list[tuple[Any, Any, Any]], error: BaseException | None) -> None:
    by_loop: dict[Any, list[asyncio.Future[None]]] = {}
    for _, loop, waiter in batch:
        if loop is None:
            done, box = waiter
            if error is not None:
                box.append(error)
            done.set()
        else:
            by_loop.setdefault(loop, []).append(waiter)
    for loop, futures in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(_resolve, futures, error)


def _resolve(futures: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for future in futures:
        if future.done():
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(CaptureError(str(error)))


# -- the process's log -----------------------------------------------------------------------------

_logs: dict[Path, CaptureLog] = {}
_logs_lock = threading.Lock()


def get_log() -> CaptureLog:
    """The log at the configured path (one per path per process)."""
    path = default_path()
    with _logs_lock:
        found = _logs.get(path)
        if found is None:
            found = _logs[path] = CaptureLog(path)
        return found


# Exchanges a runner of this process records as they arrive (a live call's): the log's recording
# leaves them alone until they are released.
_held: set[str] = set()


def hold(*xids: str) -> None:
    _held.update(xids)


def release(*xids: str) -> None:
    _held.difference_update(xids)


def held() -> frozenset[str]:
    return frozenset(_held)


def mark_recorded(xid: str, turn: Any = None, note: str = "") -> None:
    """From a thread: ``xid`` is recorded (into ``turn``); its bytes go."""
    get_log().write("recorded", xid, str(turn) if turn else None, note or None)


def mark_turn(xid: str, turn: Any) -> None:
    get_log().write("turn", xid, str(turn))


def prune() -> int:
    """From a thread: recorded exchanges' rows older than ``KEEP_RECORDED`` go, and old
    announcements."""
    return get_log().prune(time.time() - KEEP_RECORDED)


def relay_announcement(server: str, groups: Sequence[str], text: str) -> None:
    """From a thread (a recorder process's): ``text`` for ``groups``, which ``server`` (its
    process id) sends on (``announcements``)."""
    get_log().write("announce", server, list(groups), text)


def claim(dead: str, instance: str) -> None:
    get_log().write("claim", dead, instance)


def untake(taker: str, *xids: str) -> None:
    """From a thread: ``taker`` leaves ``xids`` to whoever takes them from the log next."""
    if xids:
        get_log().write("untake", taker, list(xids))


def drop_taker(dead: str) -> None:
    """From a thread: what ``dead`` (a process that is gone) had taken is free again."""
    get_log().write("drop_taker", dead)


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
