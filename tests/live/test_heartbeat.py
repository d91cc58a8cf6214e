"""A runner's heartbeat lives in the database, where every process sees it: a replay running in
another process (``manage.py replay``, whose cache the server cannot see) is not reaped
(issue 11, item 5)."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from conversations import streaming
from conversations.models import Turn
from live import bundled, live_replay, recovery
from live.models import Heartbeat

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_replay_running_in_another_process_is_not_reaped(owner, monkeypatch):
    # The runner's cache beats land in a cache this process cannot see (its own local memory).
    monkeypatch.setattr(streaming, "beat", lambda *args: None)
    monkeypatch.setattr(streaming, "HEARTBEAT_EVERY", 0.05)
    monkeypatch.setattr(streaming, "HEARTBEAT_TTL", 0.4)
    [(_sample, source, _created)] = bundled.load(owner, only=["anthropic-tides"])
    target = live_replay.create_live_replay_target(source, owner)

    async def go() -> tuple[list[Turn], float]:
        task = asyncio.ensure_future(live_replay.live_replay(source, target, speed=4))
        while not await sync_to_async(
                Turn.objects.filter(conversation=target, status="streaming").exists)():
            assert not task.done()
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.8)  # twice the TTL: only beats since the start keep it alive
        assert not task.done(), "the replay ended too soon to be tested"
        reaped = await sync_to_async(recovery.reap_orphans)(force=True)
        start = time.monotonic()
        await task
        return reaped, time.monotonic() - start

    reaped, rest = async_to_sync(go)()
    assert reaped == []
    assert rest > 0  # it was still running when the reaper looked
    agent = target.turns.get(role="agent")
    assert (agent.status, agent.end_reason) == ("complete", "end_turn")
    assert not Heartbeat.objects.filter(turn=agent).exists()  # a finished turn stops beating


def test_a_silent_runner_is_reaped(owner):
    """A heartbeat older than its TTL is no sign of life."""
    from datetime import timedelta

    from django.utils import timezone

    from conversations import store
    from tests.support import add_turn

    conversation = store.create_conversation(owner=owner)
    turn = add_turn(conversation, "agent", status="streaming")
    recovery.beat(turn.pk, {"host": "elsewhere", "pid": 7})
    assert recovery.reap_orphans(conversation.pk, force=True) == []
    Heartbeat.objects.filter(turn=turn).update(
        beat_at=timezone.now() - timedelta(seconds=streaming.HEARTBEAT_TTL + 1))
    assert [t.pk for t in recovery.reap_orphans(conversation.pk, force=True)] == [turn.pk]
    assert not Heartbeat.objects.filter(turn=turn).exists()


def test_a_beat_renews_the_one_heartbeat_of_its_turn(owner):
    from datetime import timedelta

    from django.utils import timezone

    from conversations import store
    from tests.support import add_turn

    turn = add_turn(store.create_conversation(owner=owner), "agent", status="streaming")
    recovery.beat(turn.pk, {"host": "a", "pid": 1})
    Heartbeat.objects.filter(turn=turn).update(beat_at=timezone.now() - timedelta(hours=1))
    recovery.beat(turn.pk, {"host": "b", "pid": 2})
    [heartbeat] = Heartbeat.objects.filter(turn=turn)
    assert (heartbeat.host, heartbeat.pid) == ("b", 2)
    assert timezone.now() - heartbeat.beat_at < timedelta(minutes=1)


def test_a_beat_being_written_when_the_turn_finishes_does_not_outlive_it(owner, monkeypatch):
    """The finish deletes the turn's heartbeat: a beat whose database write is still running
    then (its thread is not stopped by a cancel) must land before it, not after."""
    monkeypatch.setattr(streaming, "HEARTBEAT_EVERY", 0.005)
    slow_beat = recovery.beat

    def beat(turn_id, info):
        time.sleep(0.05)  # a database under load: the write is in flight for a while
        slow_beat(turn_id, info)

    monkeypatch.setattr(recovery, "beat", beat)
    [(_sample, source, _created)] = bundled.load(owner, only=["anthropic-tides"])
    for _ in range(3):
        target = live_replay.create_live_replay_target(source, owner)
        async_to_sync(live_replay.live_replay)(source, target, speed=50)
        time.sleep(0.1)  # any write still in flight has landed
        agent = target.turns.get(role="agent")
        assert agent.status == "complete"
        assert not Heartbeat.objects.filter(turn=agent).exists()
