"""Which server process owns what: an instance id per process, with a lease in the database.

A server (``serve``, ``demo``) registers itself when it starts, renews its lease every
``BEAT_EVERY`` seconds and deletes it when it stops cleanly. Every turn it runs names it in its
heartbeat, and every exchange it captures names it in the capture log. So when a process is
gone — killed, crashed, stopped — the others (or its own next start) know at once which turns and
exchanges are left to them, instead of waiting for a minute of quiet: an instance is gone when
its row is (a clean stop), when its lease ran out (``LEASE`` seconds without a beat, any host),
or when it was on this host and its process no longer exists.

``keep_up`` is the loop a server runs beside its requests: the lease, then every hook that
finishes what gone instances left (``on_tick``: the recording proxy records the exchanges left in
the capture log; ``live.recovery`` finishes their turns).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.utils import timezone

from live.capture import pid_alive

log = logging.getLogger("turnscope.live")

BEAT_EVERY = 2.0  # seconds between a server's beats (and its recovery rounds)
LEASE = 20.0  # seconds without a beat before an instance counts as gone, wherever it ran

_current: str = ""  # this process's instance id, once it serves
_pid = 0


def current() -> str:
    """This process's instance id, "" when it serves nothing (a management command)."""
    if _pid != os.getpid():  # a forked worker is not its parent
        return ""
    return _current


_tag: tuple[int, str] = (0, "")


def owner() -> str:
    """Who owns what this process captures: its instance id when it serves, else an id of
    this process (a test's server, say) that no lease keeps alive."""
    global _tag
    if current():
        return _current
    if _tag[0] != os.getpid():
        _tag = (os.getpid(), "p-" + uuid.uuid4().hex)
    return _tag[1]


def host() -> str:
    return socket.gethostname()


def register() -> str:
    """This process is a server from now on: its instance id, with a fresh lease."""
    from live.models import Instance

    global _current, _pid
    if current():
        return _current
    _current, _pid = uuid.uuid4().hex, os.getpid()
    Instance.objects.create(id=_current, host=host()[:255], pid=os.getpid())
    return _current


def beat() -> None:
    from live.models import Instance

    if not current():
        return
    now = timezone.now()
    if not Instance.objects.filter(pk=_current).update(beat_at=now):
        Instance.objects.create(id=_current, host=host()[:255], pid=os.getpid(), beat_at=now)


def deregister() -> None:
    """A clean stop: the others may take what this process leaves at once."""
    from live.models import Instance

    global _current
    if current():
        Instance.objects.filter(pk=_current).delete()
        _current = ""


def gone(instance_ids: set[str], *, local_pids: bool = False) -> set[str]:
    """Which of ``instance_ids`` are gone (never this process's own). ``local_pids``: one of
    this host whose process is alive is not gone, even when its lease ran out (the database
    was away longer than a lease: it could not renew it)."""
    from live.models import Instance

    ids = {i for i in instance_ids if i and i != current()}
    if not ids:
        return set()
    stale = timezone.now() - timedelta(seconds=LEASE)
    me = host()
    alive = set()
    for row in Instance.objects.filter(pk__in=ids):
        local = row.host == me
        if local and not pid_alive(row.pid):
            continue
        if row.beat_at < stale and not (local and local_pids):
            continue
        alive.add(row.id)
    return ids - alive


def forget_gone() -> None:
    """Rows of instances whose lease ran out long ago (their process is not coming back)."""
    from live.models import Instance

    Instance.objects.filter(beat_at__lt=timezone.now() - timedelta(days=1)).delete()


Hook = Callable[[], Awaitable[Any]]
on_tick: list[Hook] = []  # run in order every round (registered by the apps)


def add_hook(hook: Hook) -> None:
    if hook not in on_tick:
        on_tick.append(hook)


async def renew() -> bool:
    """This process's lease renewed; False when the database is down (it tries again next
    round, and its connection goes)."""
    try:
        await sync_to_async(beat)()
    except Exception as exc:
        log.warning("instance: could not renew the lease (%s)", type(exc).__name__)
        await sync_to_async(close_old_connections)()
        return False
    return True


async def tick() -> None:
    """One round: the lease, then each hook (one failing does not stop the others)."""
    if not await renew():  # the database is down: the hooks retry next round
        return
    for hook in list(on_tick):
        try:
            await hook()
        except Exception as exc:
            log.warning("instance: a recovery round failed (%s)", type(exc).__name__,
                        exc_info=True)
            await sync_to_async(close_old_connections)()


async def keep_up() -> None:
    """The server's loop beside its requests: a round now (what a stopped process left is
    finished at start), then every ``BEAT_EVERY`` seconds."""
    while True:
        await tick()
        await asyncio.sleep(BEAT_EVERY)
