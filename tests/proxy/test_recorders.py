"""Recorder processes (``proxy.recorders``): taking exchanges from the capture log is exclusive
between processes and keeps to the recorder's server, what a recorder leaves or a gone one held
is free again, the hub with recorders beside it records live only what it took as it opened,
the server starts recorders only where they can share the database, stops starting them when
they keep exiting, and sends on what they announce; an older log file opens as it is."""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
import threading
import time

import orjson
import pytest
from django.core.exceptions import ImproperlyConfigured

from live import capture
from proxy import endpoints, recorders
from proxy.capture import Hub

META = {"user": 1, "provider": "anthropic", "endpoint": "messages", "path": "/v1/messages",
        "url": "https://api.anthropic.com/v1/messages", "api_version": None,
        "conversation": None}


def _exchanges(log_: capture.CaptureLog, count: int, *, ended: bool = True,
               taker: str | None = None, instance: str = "server") -> list[str]:
    async def go() -> list[str]:
        out = []
        for _ in range(count):
            xid = await log_.open("proxy", META, b"{}", instance=instance, taker=taker)
            if ended:
                await log_.end(xid, "complete")
            out.append(xid)
        return out

    return asyncio.run(go())


def test_two_processes_taking_at_once_never_take_the_same_exchange(tmp_path):
    path = tmp_path / "capture.sqlite3"
    writer = capture.CaptureLog(path)
    free = _exchanges(writer, 120)
    forwarding = _exchanges(writer, 5, ended=False)  # not ended: nobody takes them yet
    live = _exchanges(writer, 5, taker="server")  # the server records them live
    # Two log objects on one file, each with its own connections: two processes' view.
    logs = {"a": capture.CaptureLog(path), "b": capture.CaptureLog(path)}
    taken: dict[str, list[str]] = {"a": [], "b": []}
    start = threading.Barrier(2)

    def take(name: str) -> None:
        start.wait()
        while batch := logs[name].take(name, "server", 7):
            assert [x.taker for x in batch] == [name] * len(batch)
            assert [x.opened for x in batch] == sorted(x.opened for x in batch)
            taken[name].extend(x.id for x in batch)

    threads = [threading.Thread(target=take, args=(n,)) for n in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not set(taken["a"]) & set(taken["b"])
    assert sorted(taken["a"] + taken["b"]) == sorted(free)
    assert not writer.take("c", "server", 100)  # the rest are forwarded or recorded live
    _exchanges(writer, 3, instance="another")
    assert not writer.take("c", "server", 100)  # another server's: its recorders' to take
    assert len(writer.take("c", "another", 100)) == 3
    assert {x.id for x in writer.pending(limit=1000) if x.taker is None} == set(forwarding)
    assert {writer.get(x).taker for x in live} == {"server"}


def test_what_a_recorder_leaves_or_a_gone_one_took_is_taken_again(tmp_path):
    log_ = capture.CaptureLog(tmp_path / "capture.sqlite3")
    _exchanges(log_, 6)
    mine = log_.take("r1", "server", 3)
    theirs = log_.take("r2", "server", 3)
    assert set(log_.takers_pending()) == {"r1", "r2"}
    assert not log_.untaken("server")
    log_.write("untake", "r1", [mine[0].id])  # a stopping recorder leaves what it did not do
    log_.write("untake", "r2", [mine[1].id])  # never another's
    log_.write("recorded", mine[2].id, None, "")
    log_.write("untake", "r1", [mine[2].id])
    assert log_.get(mine[2].id).taker == "r1" and log_.get(mine[2].id).recorded
    assert [x.id for x in log_.take("r3", "server", 10)] == [mine[0].id]
    log_.write("drop_taker", "r2")  # r2 is gone
    assert {x.id for x in log_.take("r3", "server", 10)} == {x.id for x in theirs}
    assert log_.get(mine[1].id).taker == "r1"


def test_a_gone_servers_exchanges_and_what_it_took_become_the_next_ones(tmp_path):
    log_ = capture.CaptureLog(tmp_path / "capture.sqlite3")
    [forwarded] = _exchanges(log_, 1, ended=False, taker="server")  # recorded live, then killed
    [waiting] = _exchanges(log_, 1)
    log_.write("claim", "server", "next")
    found = log_.get(forwarded)
    assert (found.instance, found.state, found.taker) == ("next", "abandoned", None)
    assert {x.id for x in log_.take("recorder", "next", 10)} == {forwarded, waiting}


def test_the_hub_with_recorders_beside_it_takes_only_what_it_records_live(
        tmp_path, monkeypatch, django_user_model, transactional_db):
    log_ = capture.CaptureLog(tmp_path / "capture.sqlite3")
    monkeypatch.setattr(capture, "get_log", lambda: log_)
    monkeypatch.setattr(recorders, "running", lambda: True)
    owner = django_user_model.objects.create_user("ana")
    endpoint = endpoints.recorded("anthropic", "POST", "/v1/messages")
    assert endpoint is not None
    started: list[str] = []
    monkeypatch.setattr(Hub, "_start_live", lambda self, xid, known, opened: (
        started.append(xid), self.busy.add(xid), self.live.add(xid)))

    async def go() -> None:
        hub = Hub()
        assert hub.beside

        def request() -> str:
            handle = hub.open(user=owner, endpoint=endpoint, body=b"{}", conversation=None,
                              url="https://api.anthropic.com/v1/messages", api_version=None)
            handle.end("complete")
            return handle.xid

        first = request()  # nothing waits: recorded live, taken as it opened
        hub.backlog = True
        second = request()  # something waits: left to the recorders
        await log_.settled()
        assert started == [first]
        assert log_.get(first).taker == hub.instance and log_.get(second).taker is None
        hub.live.clear()
        hub.busy.clear()
        await hub.fill()  # starts nothing from the log: it only notes that something waits
        assert started == [first] and not hub.busy and hub.backlog
        assert [x.id for x in log_.take("recorder", hub.instance, 10)] == [second]
        await hub.fill()
        assert not hub.backlog

    asyncio.run(go())


def test_recorders_run_only_on_a_database_the_processes_share(settings, monkeypatch):
    settings.TURNSCOPE_RECORDERS = "auto"
    monkeypatch.setattr(recorders, "connection", type("C", (), {"vendor": "sqlite"})())
    assert recorders.wanted() == 0
    settings.TURNSCOPE_RECORDERS = "2"
    with pytest.raises(ImproperlyConfigured, match="TURNSCOPE_RECORDERS=2 cannot run: the "
                       "database is SQLite"):
        recorders.wanted()
    monkeypatch.setattr(recorders, "connection", type("C", (), {"vendor": "postgresql"})())
    assert recorders.wanted() == 2
    settings.TURNSCOPE_RECORDERS = "auto"
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert recorders.wanted() == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 1)  # nothing to gain on one core
    assert recorders.wanted() == 0
    settings.TURNSCOPE_RECORDERS = "0"
    assert recorders.wanted() == 0
    settings.TURNSCOPE_RECORDERS = "many"
    with pytest.raises(ImproperlyConfigured, match="'auto' or a number"):
        recorders.wanted()


class _Exited:
    pid = 4242
    returncode = 1

    def poll(self) -> int:
        return 1


def test_recorders_that_keep_exiting_are_given_up_and_the_server_records_the_log(
        tmp_path, monkeypatch):
    spawned: list[_Exited] = []
    monkeypatch.setattr(recorders, "_spawn", lambda: spawned.append(_Exited()) or spawned[-1])
    for name, value in (("_children", []), ("_exits", []), ("_relaying", None),
                        ("_relayed", 0), ("_given_up", False)):
        monkeypatch.setattr(recorders, name, value)
    log_ = capture.CaptureLog(tmp_path / "capture.sqlite3")
    monkeypatch.setattr(capture, "get_log", lambda: log_)

    async def go() -> None:
        recorders.start(1)
        assert recorders.running()
        await recorders.supervise()  # it exited: another
        await recorders.supervise()  # it exited: another
        assert recorders.running() and len(spawned) == 3
        await recorders.supervise()  # the third exit within a minute: given up
        assert not recorders.running() and len(spawned) == 3
        await recorders.supervise()
        assert len(spawned) == 3
        assert recorders._relaying is not None
        recorders._relaying.cancel()

    asyncio.run(go())


OLD_SCHEMA = """
CREATE TABLE exchanges (id TEXT PRIMARY KEY, kind TEXT NOT NULL, instance TEXT NOT NULL,
    opened REAL NOT NULL, meta TEXT NOT NULL, request BLOB, status INTEGER NOT NULL DEFAULT 0,
    encoding TEXT NOT NULL DEFAULT '', state TEXT NOT NULL DEFAULT 'open', failure TEXT,
    ended REAL, chunks INTEGER NOT NULL DEFAULT 0, bytes INTEGER NOT NULL DEFAULT 0,
    recorded REAL, turn TEXT, note TEXT);
CREATE INDEX exchanges_pending ON exchanges (recorded, opened);
CREATE TABLE chunks (exchange TEXT NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (exchange, n)) WITHOUT ROWID;
INSERT INTO exchanges (id, kind, instance, opened, meta, state)
    VALUES ('x', 'proxy', 'server', 1.0, '{}', 'complete');
"""


def test_a_log_an_earlier_version_wrote_opens_and_takes(tmp_path):
    """A log written before takers and announcements (no ``taker`` column, no table for
    them): its exchanges wait, and are taken, as any others."""
    path = tmp_path / "capture.sqlite3"
    with sqlite3.connect(path) as old:
        old.executescript(OLD_SCHEMA)
    log_ = capture.CaptureLog(path)
    assert [x.id for x in log_.take("r", "server", 5)] == ["x"]
    assert log_.last_announcement() == 0


def test_pruning_takes_a_few_thousand_rows_a_transaction(tmp_path, monkeypatch):
    log_ = capture.CaptureLog(tmp_path / "capture.sqlite3")
    monkeypatch.setattr(capture, "PRUNE_ROWS", 3)
    xids = _exchanges(log_, 7)
    for xid in xids:
        log_.write("recorded", xid, None, "")
    [kept] = _exchanges(log_, 1)
    statements: list[str] = []
    log_._reader().set_trace_callback(statements.append)
    assert log_.prune(time.time() + 1) == 7
    assert [x.id for x in log_.pending()] == [kept]
    assert sum(s.startswith("COMMIT") for s in statements) == 3  # 3 + 3 + 1


def test_what_a_recorder_announces_reaches_the_servers_pages_through_the_log(
        tmp_path, monkeypatch):
    """A recorder's in-memory layer reaches no page: its publishes and its on-commit
    announcements go to the log, and its server sends them on to its own layer, in order,
    once each (none from before it started)."""
    from channels.layers import get_channel_layer

    from conversations.actions import announce
    from live import protocol, publish

    log_ = capture.CaptureLog(tmp_path / "capture.sqlite3")
    monkeypatch.setattr(capture, "get_log", lambda: log_)
    conversation = "7c4d3a0e-5b1f-4c8e-9a55-1f0e2d3c4b5a"
    group = protocol.group_name(conversation)
    server = str(os.getpid())
    capture.relay_announcement(server, [group], '{"type": "stale"}')  # an earlier run's
    capture.relay_announcement("1", [group], '{"type": "theirs"}')  # another server's
    monkeypatch.setattr(recorders, "_spawn", lambda: None)
    monkeypatch.setattr(recorders, "_children", [])
    monkeypatch.setattr(recorders, "_relayed", 0)
    recorders.start(1)  # the server: it sends what comes after this
    monkeypatch.setattr(announce, "_relay", None)
    announce.relay_to(functools.partial(capture.relay_announcement, server))  # the recorder
    capture.relay_announcement("1", [group], '{"type": "theirs"}')

    async def go() -> list[dict]:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        await publish.publish_all(conversation, [{"type": "turn", "seq": 3},
                                                 {"type": "events", "seq_to": 4}])
        announce.send([group], {"type": "conversation", "op": "update", "title": "T"})
        announce.relay_to(None)  # the server's side
        await recorders.relay_announcements(log_)
        await recorders.relay_announcements(log_)  # sent once
        got = []
        while True:
            try:
                async with asyncio.timeout(0.2):
                    got.append(await layer.receive(channel))
            except TimeoutError:
                return got

    got = asyncio.run(go())
    assert [m["type"] for m in got] == ["live.message", "live.message"]
    first, second = (orjson.loads(m["text"]) for m in got)
    assert first["type"] == "batch" and [m["type"] for m in first["messages"]] == [
        "turn", "events"]
    assert (second["type"], second["op"], second["title"]) == ("conversation", "update", "T")


@pytest.mark.django_db
def test_a_recorder_on_this_host_is_gone_with_its_process_not_its_lease():
    """A lease runs out while the database is away; a taker (a recorder, always on the log's
    host) still records while its process lives, so its exchanges are not freed for that."""
    from datetime import timedelta

    from django.utils import timezone

    from live import instances
    from live.models import Instance

    stale = timezone.now() - timedelta(seconds=instances.LEASE + 5)
    Instance.objects.create(id="alive", host=instances.host(), pid=os.getpid(), beat_at=stale)
    Instance.objects.create(id="dead", host=instances.host(), pid=2**22 + 1,
                            beat_at=timezone.now())
    Instance.objects.create(id="elsewhere", host="another-host", pid=os.getpid(),
                            beat_at=stale)
    ids = {"alive", "dead", "elsewhere", "never-registered"}
    assert instances.gone(ids) == {"alive", "dead", "elsewhere", "never-registered"}
    assert instances.gone(ids, local_pids=True) == {"dead", "elsewhere", "never-registered"}
