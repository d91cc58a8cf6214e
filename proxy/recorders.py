"""Recorder processes: the capture log recorded beside the server, on the machine's other cores.

A server is one process, so one GIL: under sustained load its forwarding takes most of it and
recording from the log falls behind, while the other cores idle (``bench.capture``, 50 clients x
180 s on PostgreSQL, two cores: the server at 85-89 % of one, everything else at a third of the
other; 4,226 exchanges behind when the load stopped, 68 s to record them). A recorder process
takes the oldest ended exchanges from the log (``CaptureLog.take``: one statement, so two
processes never take the same one) and records them as the server's hub would
(``proxy.catchup.record``); the hub then records live only, and only while nothing waits.

Only on PostgreSQL: SQLite has one writer, and a second process would wait for its lock.
``TURNSCOPE_RECORDERS`` says how many the server starts: ``auto`` (the default) is one there on
a machine of two cores or more, else none; a number asks for that many, and the server refuses
to start on SQLite. What a recorder would tell open pages (the turns it recorded, a
conversation it started) it writes to the log instead (``conversations.actions.announce``'s
relay), and its server sends it to the channel layer a few times a second: a recorder's own
in-memory layer reaches no page, and on Redis this keeps one way for both.

A recorder takes only its server's exchanges (a server that records its log itself, on the
same host, keeps its own). Each recorder is an instance with a lease of its own
(``live.instances``). The server restarts a recorder that exits (and, when they keep exiting,
records the log itself again) and stops them when it stops; a recorder whose server is gone
stops by itself, leaving what it had not recorded to whoever takes it next; what a recorder
that is gone (killed) had taken is free again at the server's next round
(``catchup.take_over_gone``), and what a dead server left becomes the next server's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections, connection

from conversations.actions import announce
from live import capture, instances
from live.loop_io import off_loop

log = logging.getLogger("turnscope.proxy")

SLOTS = 8  # exchanges one recorder records at once (over catchup's recording threads)
POLL = 0.1  # seconds between looks at the log while there is nothing to take
STOP_WAIT = 5.0  # seconds a stopping recorder gives its recordings to finish
RETRY_FAILED = 5.0  # seconds before an exchange whose recording failed is taken again


def why_not_shared() -> str:
    """Why recorder processes cannot run here ("" when they can)."""
    if connection.vendor == "sqlite":
        return "the database is SQLite (one writer: a second process would wait for its lock)"
    return ""


def wanted() -> int:
    """How many recorder processes the server starts (``TURNSCOPE_RECORDERS``)."""
    asked = str(getattr(settings, "TURNSCOPE_RECORDERS", "auto")).strip().lower()
    reason = why_not_shared()
    if asked == "auto":
        return 1 if not reason and (os.cpu_count() or 1) >= 2 else 0
    try:
        count = int(asked)
    except ValueError:
        raise ImproperlyConfigured(
            f"TURNSCOPE_RECORDERS is {asked!r}: give 'auto' or a number of processes") from None
    if count > 0 and reason:
        raise ImproperlyConfigured(f"TURNSCOPE_RECORDERS={count} cannot run: {reason}; set it "
                                   "to 0 to record in the server's process")
    return max(0, count)


# -- the server's side ---------------------------------------------------------------------------

_children: list[subprocess.Popen[bytes]] = []
_exits: list[float] = []  # when recorders exited unasked (monotonic seconds)
_given_up = False
_stopping = False
_relayed = 0  # the last announcement of the recorders this server sent on
_relaying: asyncio.Task[None] | None = None
RELAY_EVERY = 0.2  # seconds between the server's looks for what its recorders announced
# Recorders exiting unasked this often (a bad install, a wrong path): the server stops starting
# them and records the log itself, rather than restart them forever while nothing is recorded.
GIVE_UP_EXITS = 3
GIVE_UP_WITHIN = 60.0  # seconds


def running() -> bool:
    """Whether recorders started by this process record the log (its hub records live)."""
    return bool(_children) and not _given_up


def _spawn() -> subprocess.Popen[bytes]:
    # The server's working directory (relative paths in the settings mean the same), and the
    # project importable from it.
    path = os.pathsep.join(p for p in (str(settings.BASE_DIR), os.environ.get("PYTHONPATH"))
                           if p)
    env = {**os.environ, "PYTHONPATH": path,
           "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE",
                                                    "turnscope.settings")}
    child = subprocess.Popen(
        [sys.executable, "-m", "django", "capture_recorder", "--parent", str(os.getpid()),
         "--server", instances.owner()], env=env, stdin=subprocess.DEVNULL)
    log.info("proxy: recorder process %d started", child.pid)
    return child


def start(count: int) -> None:
    """The server starts ``count`` recorders (before it serves: its hub knows they run)."""
    global _stopping, _relayed, _given_up
    _stopping = _given_up = False
    if count:
        _relayed = capture.get_log().last_announcement()  # older ones were another's to send
    _children.extend(_spawn() for _ in range(count))


def start_wanted() -> None:
    start(wanted())


async def relay_announcements(log_: capture.CaptureLog) -> None:
    """What the recorders announced since the last time, sent to this server's layer (where
    its pages listen), in order."""
    global _relayed
    while batch := await off_loop(functools.partial(log_.announcements, str(os.getpid()),
                                                     _relayed)):
        for seq, groups, text in batch:
            await announce.deliver(groups, text)
            _relayed = seq


async def _relay_forever() -> None:
    log_ = capture.get_log()
    while True:
        try:
            await relay_announcements(log_)
        except Exception:
            log.warning("proxy: could not read the recorders' announcements", exc_info=True)
        await asyncio.sleep(RELAY_EVERY)


async def supervise() -> None:
    """A recovery round: the recorders' announcements are relayed, and a recorder that exited
    is started again (unless they keep exiting)."""
    global _given_up, _relaying
    if not _children or _stopping:
        return
    if _relaying is None or _relaying.done():
        _relaying = asyncio.ensure_future(_relay_forever())
    now = time.monotonic()
    for i, child in enumerate(_children):
        if _given_up or child.poll() is None:
            continue
        _exits[:] = [t for t in _exits if now - t < GIVE_UP_WITHIN] + [now]
        if len(_exits) >= GIVE_UP_EXITS:
            _given_up = True
            log.error("proxy: recorder processes exited %d times in %.0f s (the last: %s); "
                      "this server records the capture log itself from now on",
                      len(_exits), GIVE_UP_WITHIN, child.returncode)
            return
        log.error("proxy: recorder process %d exited (%s); starting another", child.pid,
                  child.returncode)
        _children[i] = _spawn()


async def stop(timeout: float = STOP_WAIT + 2) -> None:
    """The server stops: each recorder finishes what it records (or leaves it to the log)."""
    global _stopping
    _stopping = True
    for child in _children:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGTERM)
    deadline = asyncio.get_running_loop().time() + timeout
    while any(c.poll() is None for c in _children):
        if asyncio.get_running_loop().time() > deadline:
            for child in _children:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()  # what it had taken is free once it is gone
            break
        await asyncio.sleep(0.05)
    if _relaying is not None:
        _relaying.cancel()
    with contextlib.suppress(Exception):  # their last words, to pages still open
        await relay_announcements(capture.get_log())


# -- the recorder's side -------------------------------------------------------------------------


def run(parent: int, server: str) -> None:
    """A recorder process: records the exchanges of ``server`` (its instance id; ``parent``
    its process) from the log until it is stopped or its server is gone."""
    me = instances.register()
    close_old_connections()
    # Its layer reaches no page: what it announces goes through the log to its server.
    announce.relay_to(functools.partial(capture.relay_announcement, str(parent)))
    log.info("proxy: recorder %s (process %d) records the capture log for process %d", me,
             os.getpid(), parent)
    try:
        asyncio.run(_record(me, parent, server))
    finally:
        with contextlib.suppress(Exception):
            instances.deregister()


async def _record(me: str, parent: int, server: str) -> None:
    from proxy import catchup

    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    log_ = capture.get_log()
    busy: dict[str, asyncio.Task[Any]] = {}
    next_beat = 0.0
    waker = asyncio.ensure_future(stopped.wait())
    try:
        while not stopped.is_set() and os.getppid() == parent:  # orphaned: its server is gone
            if loop.time() >= next_beat:  # (the database down: recordings retry meanwhile)
                next_beat = loop.time() + instances.BEAT_EVERY
                await instances.renew()
            taken: list[capture.Exchange] = []
            if len(busy) < SLOTS:
                try:
                    taken = await off_loop(functools.partial(log_.take, me, server,
                                                              SLOTS - len(busy)))
                except Exception:
                    log.warning("recorder: could not read the capture log", exc_info=True)
            for exchange in taken:
                if exchange.id in busy:  # freed while its recording waited for the database
                    continue
                task = asyncio.ensure_future(catchup.record(log_, exchange))
                busy[exchange.id] = task
                task.add_done_callback(functools.partial(_done, busy, exchange.id, me))
            if not taken or len(busy) >= SLOTS:
                await asyncio.wait([waker, *busy.values()], timeout=POLL,
                                   return_when=asyncio.FIRST_COMPLETED)
    finally:
        waker.cancel()
        left = list(busy)
        if busy:
            await asyncio.wait(list(busy.values()), timeout=STOP_WAIT)
            for task in busy.values():
                task.cancel()
            await asyncio.gather(*busy.values(), return_exceptions=True)
        try:  # what it did not record, the next to take records (recorded ones stay so)
            await off_loop(capture.untake, me, *left)
        except capture.CaptureError:
            log.warning("recorder: %d exchange(s) stay taken until this process is gone",
                        len(left))


def _done(busy: dict[str, asyncio.Task[Any]], xid: str, me: str, task: asyncio.Task[Any]
          ) -> None:
    busy.pop(xid, None)
    if not task.cancelled() and task.exception() is not None:
        # (``catchup.record`` retries what it can: this is the log failing under it.) Taken
        # again in a while, not kept taken for as long as this process lives.
        log.error("recorder: recording exchange %s failed", xid, exc_info=task.exception())
        log_ = capture.get_log()
        asyncio.get_running_loop().call_later(RETRY_FAILED, log_.untake_nowait, me, xid)
