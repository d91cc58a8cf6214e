"""The tasks this process drives: live turns by turn id (Stop cancels one), and every task
started on the server's loop (kept referenced so the loop does not drop them mid-turn)."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable
from typing import Any

log = logging.getLogger("turnscope.live")

# The task driving each live turn this process streams (a live call's, a live replay's, the
# demo's), by turn id: Stop cancels it, and the turn ends interrupted with what streamed.
_driving: dict[str, asyncio.Task[Any]] = {}


def drive(turn_id: Any, task: asyncio.Task[Any]) -> None:
    """``task`` streams the turn ``turn_id`` (until ``release``)."""
    _driving[str(turn_id)] = task


def release(turn_id: Any, task: asyncio.Task[Any] | None) -> None:
    """``task`` no longer streams ``turn_id`` (a later task driving it stays registered)."""
    if _driving.get(str(turn_id)) is task:
        del _driving[str(turn_id)]


def driving(turn_id: Any) -> asyncio.Task[Any] | None:
    """The task streaming the turn ``turn_id`` in this process, if any."""
    task = _driving.get(str(turn_id))
    return task if task is not None and not task.done() else None


def streaming_here() -> int:
    """How many live turns this process streams now."""
    return sum(1 for task in _driving.values() if not task.done())


def stop_key(turn_id: Any) -> str:
    """The cache flag that asks the process streaming ``turn_id`` to stop it."""
    return f"turnscope:live:stop:{turn_id}"


# The loops whose server stops: their live tasks are cancelled, and nothing new starts on them.
_stopping: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def stop() -> list[asyncio.Task[Any]]:
    """The running loop's server stops: nothing more starts on it (``stopping``); returns the
    tasks running now, each cancelled."""
    loop = asyncio.get_running_loop()
    _stopping.add(loop)
    running = [task for task in active_tasks if task.get_loop() is loop]
    for task in running:
        task.cancel()
    return running


def stopping() -> bool:
    """The running loop's server stops (``stop``)."""
    return asyncio.get_running_loop() in _stopping


# Tasks started in this process; kept referenced so the loop does not drop them mid-turn.
active_tasks: set[asyncio.Task[Any]] = set()


def spawn(coro: Awaitable[Any], name: str = "") -> asyncio.Task[Any]:
    """Run ``coro`` as a task of the running loop (the server's), logging how it ends."""
    task = asyncio.ensure_future(coro)
    if name:
        task.set_name(name)
    active_tasks.add(task)

    def done(t: asyncio.Task[Any]) -> None:
        active_tasks.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.error("live task %s failed", t.get_name(), exc_info=t.exception())

    task.add_done_callback(done)
    return task

