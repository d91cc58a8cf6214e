"""The capture log (``live.capture``) and recording from it (``proxy.catchup``): appends are
durable and ordered, recording an exchange twice makes one turn, transient database errors are
retried, and a turn is failed-to-record only when the bytes cannot be read."""

from __future__ import annotations

import asyncio
import sqlite3

import orjson
import pytest
from django.db.utils import OperationalError

from conversations.models import Turn
from live import bundled, capture, capture_ops, tasks
from live.models import RecordedExchange
from proxy import catchup, endpoints, threads
from proxy.capture import Capture, Hub
from proxy.messages import history_key
from proxy.models import Thread

pytestmark = pytest.mark.django_db(transaction=True)

TIDES = bundled.sample("anthropic-tides").responses[0].raw.encode()
BODY = (b'{"model": "claude-sonnet-4-6", "max_tokens": 100, "stream": true, '
        b'"messages": [{"role": "user", "content": "Tides?"}]}')


@pytest.fixture
def log_(tmp_path):
    return capture.CaptureLog(tmp_path / "capture.sqlite3")


def _captured(log_: capture.CaptureLog, user, chunks: list[bytes],
              state: str | None = "complete", status: int = 200, body: bytes = BODY
              ) -> capture.Exchange:
    """An exchange of ``chunks``, ended ``state`` (None: still open, being forwarded)."""

    async def go() -> str:
        xid = await log_.open("proxy", {
            "user": user.pk, "provider": "anthropic", "endpoint": "messages",
            "path": "/v1/messages", "url": "https://api.anthropic.com/v1/messages",
            "api_version": "2023-06-01", "conversation": None}, body, instance="test")
        await log_.respond(xid, status, "")
        await asyncio.gather(*[log_.append(xid, n, c) for n, c in enumerate(chunks)])
        if state is not None:
            await log_.end(xid, state)
        return xid

    found = log_.get(asyncio.run(go()))
    assert found is not None
    return found


def _split(raw: bytes, size: int = 97) -> list[bytes]:
    return [raw[i:i + size] for i in range(0, len(raw), size)]


def test_appends_are_committed_in_order_and_read_back_whole(log_, owner):
    chunks = _split(TIDES)
    exchange = _captured(log_, owner, chunks)
    assert (exchange.state, exchange.chunks, exchange.bytes) == ("complete", len(chunks),
                                                                 len(TIDES))
    assert b"".join(log_.all_chunks(exchange.id)) == TIDES
    assert log_.chunks(exchange.id, 3, limit_bytes=1) == [chunks[3]]
    # another connection (another process) sees the same committed bytes
    other = sqlite3.connect(log_.path)
    assert other.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == len(chunks)
    lag = log_.lag()
    assert (lag.count, lag.bytes) == (1, len(TIDES))


def test_a_missing_chunk_is_an_error_not_a_shorter_response(log_, owner):
    exchange = _captured(log_, owner, _split(TIDES))
    sqlite3.connect(log_.path, isolation_level=None).execute(
        "DELETE FROM chunks WHERE exchange = ? AND n = 2", (exchange.id,))
    with pytest.raises(capture.CaptureError, match="chunk 2"):
        list(log_.all_chunks(exchange.id))


def test_an_exchange_ends_with_the_chunks_its_app_got(log_, owner):
    """A chunk committed but never forwarded (the server stopped between the commit and the
    send) is not the app's: the end says how many went on, and the log keeps those."""
    chunks = _split(TIDES)

    async def go() -> str:
        xid = await log_.open("proxy", {"user": owner.pk, "provider": "anthropic"}, BODY,
                              instance="test")
        await asyncio.gather(*[log_.append(xid, n, c) for n, c in enumerate(chunks[:6])])
        await log_.end(xid, "gone", forwarded=5)
        await log_.end(xid, "complete", forwarded=6)  # an exchange ends once
        await log_.settled()
        return xid

    exchange = log_.get(asyncio.run(go()))
    assert exchange is not None
    assert (exchange.state, exchange.chunks, exchange.bytes) == (
        "gone", 5, sum(map(len, chunks[:5])))
    assert list(log_.all_chunks(exchange.id)) == chunks[:5]


def test_many_exchanges_chunks_in_one_batch_each_land_whole_and_counted(log_, owner):
    """The writer commits a run of chunks in a statement or a few (``CHUNK_ROWS`` each), the
    exchanges' counters in one: interleaved exchanges, a run longer than one statement takes,
    and an end in the middle of the run each come out as if written one by one."""
    pieces = {name: _split(TIDES, size) for name, size in (("a", 7), ("b", 31), ("c", 500))}

    async def go() -> dict[str, str]:
        xids = {name: (await log_.open("proxy", {"user": owner.pk}, BODY, instance="test"))
                for name in pieces}
        appends = []
        longest = max(map(len, pieces.values()))
        for n in range(longest):  # all queued before the writer takes them: few batches
            for name, chunks in pieces.items():
                if n < len(chunks) and (name != "c" or n <= 3):
                    appends.append(log_.append(xids[name], n, chunks[n]))
            if n == 3:  # c's app went away with two of the four chunks sent
                appends.append(log_.end(xids["c"], "gone", forwarded=2))
        await asyncio.gather(*appends)
        return xids

    assert max(map(len, pieces.values())) > capture_ops.CHUNK_ROWS
    xids = asyncio.run(go())
    for name in ("a", "b"):
        exchange = log_.get(xids[name])
        assert exchange is not None
        assert (exchange.chunks, exchange.bytes) == (len(pieces[name]), len(TIDES)), name
        assert list(log_.all_chunks(exchange.id)) == pieces[name]
    c = log_.get(xids["c"])
    assert c is not None
    # it ended after two chunks went to its app: what came after is not its app's
    assert (c.state, c.chunks) == ("gone", 2)
    assert list(log_.all_chunks(c.id)) == pieces["c"][:2]


@pytest.mark.parametrize("old_sqlite", [False, True])
def test_a_run_longer_than_one_statement_holds_is_written_whole(tmp_path, monkeypatch,
                                                                old_sqlite):
    """``_apply_batch`` itself, whatever the writer thread's batches happen to be: a run of
    more chunks than one insert takes, over two exchanges, on an SQLite with ``UPDATE ...
    FROM`` and on one without (before 3.33)."""
    if old_sqlite:
        monkeypatch.setattr(capture_ops.sqlite3, "sqlite_version_info", (3, 31, 1))
    capture.CaptureLog(tmp_path / "log.sqlite3")  # the schema
    db = sqlite3.connect(tmp_path / "log.sqlite3", isolation_level=None)
    for xid in ("a", "b"):
        db.execute("INSERT INTO exchanges (id, kind, instance, opened, meta) "
                   "VALUES (?, 'proxy', 'test', 0, '{}')", (xid,))
    count = capture_ops.CHUNK_ROWS * 2 + 7
    ops = [("chunk", "ab"[n % 2], n // 2, bytes([n % 256]) * (n % 5 + 1)) for n in range(count)]
    db.execute("BEGIN")
    capture_ops.apply_batch(db, ops)
    db.execute("COMMIT")
    for xid in ("a", "b"):
        mine = [op for op in ops if op[1] == xid]
        assert db.execute("SELECT chunks, bytes FROM exchanges WHERE id = ?", (xid,)
                          ).fetchone() == (len(mine), sum(len(op[3]) for op in mine))
        assert [bytes(d) for (d,) in db.execute(
            "SELECT data FROM chunks WHERE exchange = ? ORDER BY n", (xid,))] == [
            op[3] for op in mine]


def _record(log_: capture.CaptureLog, exchange: capture.Exchange) -> Turn | None:
    return asyncio.run(catchup.record(log_, exchange))


def test_recording_an_exchange_twice_makes_one_turn(log_, owner, monkeypatch):
    monkeypatch.setattr(capture, "get_log", lambda: log_)
    exchange = _captured(log_, owner, _split(TIDES))
    first = _record(log_, exchange)
    assert first is not None and first.status == "complete"
    text = "".join(e.text for e in first.events.order_by("seq") if e.kind == "message")
    assert "Two bulges" in text
    assert first.recording.response_list[0]["raw"] == TIDES.decode()
    again = _record(log_, exchange)  # recovery run again: nothing changes
    assert again is not None and again.pk == first.pk
    assert Turn.objects.filter(role="agent").count() == 1
    assert Turn.objects.filter(role="user").count() == 1
    assert first.events.count() == Turn.objects.get(pk=first.pk).events.count()
    assert RecordedExchange.objects.get(pk=exchange.id).done
    assert log_.get(exchange.id).recorded is not None
    assert list(log_.all_chunks(exchange.id)) == []  # its bytes are gone once recorded
    assert log_.lag().count == 0


def test_a_new_conversations_history_is_kept_as_stored_and_the_next_request_finds_it(
        log_, owner, monkeypatch):
    """Recording into a new conversation keeps its history key from the events it wrote (none
    read back): the key of what is stored, which the app's next request sends back."""
    monkeypatch.setattr(capture, "get_log", lambda: log_)
    first = _record(log_, _captured(log_, owner, _split(TIDES)))
    assert first is not None
    conversation = first.conversation
    assert Thread.objects.get(conversation=conversation).key == history_key(
        threads.stored_history(conversation))
    answer = "".join(e.text for e in first.events.order_by("seq") if e.kind == "message")
    follow_up = orjson.dumps({"model": "claude-sonnet-4-6", "max_tokens": 100, "stream": True,
                              "messages": [{"role": "user", "content": "Tides?"},
                                           {"role": "assistant", "content": answer},
                                           {"role": "user", "content": "And neap tides?"}]})
    second = _record(log_, _captured(log_, owner, _split(TIDES), body=follow_up))
    assert second is not None and second.conversation_id == conversation.pk
    assert list(conversation.turns.order_by("index").values_list("role", flat=True)) == [
        "user", "agent", "user", "agent"]


def test_a_cut_exchange_is_an_interrupted_turn_with_the_text_the_app_got(log_, owner,
                                                                        monkeypatch):
    monkeypatch.setattr(capture, "get_log", lambda: log_)
    cut = TIDES[: TIDES.index(b"Two bulges") + 40]
    turn = _record(log_, _captured(log_, owner, _split(cut), state="cut"))
    assert (turn.status, turn.end_reason) == ("interrupted", "interrupted")
    last = turn.events.order_by("seq").last()
    assert last.incomplete and last.text.startswith("## Two bulges")


def test_a_snapshot_read_before_the_exchange_ended_records_what_its_app_got(log_, owner,
                                                                          monkeypatch):
    """The hub picks exchanges from a read of the log that may predate their end, and the end
    of a stopping server's exchange drops the chunk committed but never forwarded: recorded is
    what the log holds once it ended, not a turn failed for the chunk the end dropped."""
    monkeypatch.setattr(capture, "get_log", lambda: log_)
    chunks = _split(TIDES[: TIDES.index(b"Two bulges") + 40])
    snapshot = _captured(log_, owner, chunks, state=None)  # all committed, the last not sent
    asyncio.run(_ended(log_, snapshot.id, "gone", forwarded=len(chunks) - 1))
    turn = _record(log_, snapshot)
    assert turn is not None and (turn.status, turn.end_reason) == ("interrupted", "interrupted")
    assert turn.recording.response_list[0]["raw"] == b"".join(chunks[:-1]).decode()


async def _ended(log_: capture.CaptureLog, xid: str, state: str, forwarded: int) -> None:
    await log_.end(xid, state, forwarded=forwarded)


def test_an_exchange_is_recorded_from_the_log_once_its_end_is_committed_and_none_once_the_server_stops(  # noqa: E501
        log_, owner, monkeypatch):
    """The hub records an exchange no longer forwarded from the log, so "no longer forwarded"
    waits for the end's commit (until then the log may miss the end, or its last chunks). And
    a stopping server starts no recording: what is left is the next start's."""
    monkeypatch.setattr(capture, "get_log", lambda: log_)
    endpoint = endpoints.recorded("anthropic", "POST", "/v1/messages")
    assert endpoint is not None

    def request(hub: Hub) -> Capture:
        return hub.open(user=owner, endpoint=endpoint, body=BODY, conversation=None,
                        url="https://api.anthropic.com/v1/messages", api_version=None)

    async def go() -> None:
        hub = Hub()
        hub.backlog = True  # recorded from the log, not live
        handle = request(hub)
        capture.hold(handle.xid)  # the hub's dispatcher leaves it to this test
        handle.response(200, [])
        await handle.append(b"event: ping\ndata: {}\n\n")
        handle.end("gone")
        assert handle.xid in hub.forwarding  # its end is queued, not committed
        await log_.settled()
        await asyncio.sleep(0)
        assert handle.xid not in hub.forwarding
        ended = log_.get(handle.xid)
        assert ended is not None and (ended.state, ended.chunks) == ("gone", 1)

        tasks.stop()
        capture.release(handle.xid)
        second = request(hub)
        hub.backlog = False
        await hub.fill()
        assert not hub.busy and not hub.live  # neither it nor the first one started
        second.failed(502, "upstream_unreachable", "stopped")
        await log_.settled()
        assert {e.id for e in log_.pending(instance=hub.instance)} == {handle.xid, second.xid}

    asyncio.run(go())


def test_transient_database_errors_are_retried_until_the_database_is_back(
        log_, owner, monkeypatch):
    monkeypatch.setattr(capture, "get_log", lambda: log_)
    monkeypatch.setattr(catchup, "FIRST_WAIT", 0.01)
    real = catchup.complete
    fails = {"n": 0}

    def flaky(*args):
        if fails["n"] < 4:
            fails["n"] += 1
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args)

    monkeypatch.setattr(catchup, "complete", flaky)
    turn = _record(log_, _captured(log_, owner, _split(TIDES)))
    assert fails["n"] == 4
    assert turn is not None and turn.status == "complete"
    assert not turn.events.filter(kind="error").exists()


def test_unreadable_bytes_fail_the_turn_saying_why(log_, owner, monkeypatch):
    monkeypatch.setattr(capture, "get_log", lambda: log_)
    exchange = _captured(log_, owner, _split(TIDES))
    sqlite3.connect(log_.path, isolation_level=None).execute(
        "DELETE FROM chunks WHERE exchange = ? AND n = 1", (exchange.id,))
    turn = _record(log_, exchange)
    assert (turn.status, turn.end_reason) == ("failed", "error")
    [error] = [e.typed_body.to_body()["error"] for e in turn.events.all() if e.kind == "error"]
    assert error["code"] == "recording_failed" and "chunk 1" in error["message"]


def test_recording_an_exchange_is_one_transaction_of_a_few_dozen_statements(log_, owner,
                                                                           monkeypatch):
    """Recording is what catches up after load: each statement is a round trip and a share
    of one process's interpreter. One transaction, no savepoint inside it, no statement a row,
    nothing read back that the transaction wrote (on PostgreSQL 78 statements before this was
    measured, 32 then; the Sources roll-up adds 1: at the transaction's end, its difference
    to the cells in one statement, made from its own writes, nothing read back)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    monkeypatch.setattr(capture, "get_log", lambda: log_)
    first, second = (_captured(log_, owner, _split(TIDES, 400)) for _ in range(2))
    _record(log_, first)  # the owner's facet counts and sources exist: the usual case
    with CaptureQueriesContext(connection) as ran:
        turn, _ = catchup.complete(log_, second)
    assert turn is not None and turn.status == "complete"
    statements = [q["sql"] for q in ran.captured_queries]
    assert not [s for s in statements if "SAVEPOINT" in s.upper()]
    assert len(statements) <= 34, "\n".join(statements)
    # The served model, known before the events are written, is on their Sources rows.
    from conversations.models import SearchUse, SourceUse

    served = {("anthropic", "claude-sonnet-4-5-20250929")}
    assert (turn.provider, turn.model) in served
    for rows in (SourceUse.objects.filter(turn=turn), SearchUse.objects.filter(turn=turn)):
        assert set(rows.values_list("provider", "model")) == served


def test_an_owners_facet_counts_are_added_last_just_before_the_commit(log_, owner, monkeypatch):
    """Every recording of an owner adds to the same facet count rows, and an update holds its
    row's lock until the commit. Added first, they made concurrent recordings wait for each
    other's whole transaction (PostgreSQL under ``bench.capture``: the recording threads
    waited on that lock most of the time). Added last, the lock is held for one statement."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from conversations.models import FacetCount

    monkeypatch.setattr(capture, "get_log", lambda: log_)
    first, second = (_captured(log_, owner, _split(TIDES, 400)) for _ in range(2))
    _record(log_, first)
    before = dict(((c.kind, c.value), c.conversations) for c in FacetCount.objects.all())
    with CaptureQueriesContext(connection) as ran:
        turn, _ = catchup.complete(log_, second)
    assert turn is not None and turn.status == "complete"
    table = FacetCount._meta.db_table
    statements = [q["sql"] for q in ran.captured_queries
                  if q["sql"].strip().upper() not in ("BEGIN", "BEGIN IMMEDIATE", "COMMIT")]
    counting = [n for n, s in enumerate(statements) if table in s]
    assert counting == [len(statements) - 1], "\n".join(statements)  # one, and the last
    after = dict(((c.kind, c.value), c.conversations) for c in FacetCount.objects.all())
    assert before and after == {key: n + 1 for key, n in before.items()}  # one more each
