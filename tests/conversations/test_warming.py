"""Render once (issue 34): a recorded turn is queued, rendered in the background once, and its
page, shared page and exports reuse that rendering, byte for byte what a fresh one gives."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError
from django.utils import timezone

from conversations import projections, reading, render_cache, store, warming
from conversations.ingest import ingest
from conversations.models import PendingRender, RenderedHTML, TurnExport, TurnFragment
from conversations.projections import Snapshot
from tests.api.conftest import build_conversation
from tests.conversations.test_more_fixtures import BOTH, files
from tests.support import add_turn

pytestmark = pytest.mark.django_db

# A rendering of a message run: patched to fail, it proves a path renders nothing.
RENDER = "conversations.rendering.turn.render_event_html"


def _drop_caches(conversation) -> None:
    RenderedHTML.objects.filter(event__conversation=conversation).delete()
    TurnFragment.objects.filter(turn__conversation=conversation).delete()
    TurnExport.objects.filter(turn__conversation=conversation).delete()


def _pages(conversation) -> list[str]:
    return [str(view.html) for view in reading.turn_views(conversation)]


def _exports(conversation, snapshot: Snapshot | None = None) -> dict[str, bytes]:
    return {fmt: b"".join(projections.export_stream(conversation, fmt, snapshot=snapshot))
            for fmt in ("markdown", "html")}


def _renders_nothing():
    return mock.patch(RENDER, side_effect=AssertionError("rendered a message run again"))


def test_a_recorded_turn_is_queued_and_a_streaming_one_once_it_finishes():
    conversation = build_conversation()
    queued = set(PendingRender.objects.values_list("turn_id", flat=True))
    assert queued == set(conversation.turns.values_list("pk", flat=True))
    warming.drain_all()
    live = add_turn(conversation, "agent", status="streaming")
    assert not PendingRender.objects.exists()
    store.finish_turn(live, status="complete", end_reason="end_turn")
    assert list(PendingRender.objects.values_list("turn_id", flat=True)) == [live.pk]


def test_the_drain_renders_each_turn_once_for_the_page_and_the_exports():
    conversation = build_conversation()
    fresh_pages, fresh = _pages(conversation), _exports(conversation)
    _drop_caches(conversation)
    taken = warming.drain_all()
    assert taken == conversation.turns.count() and warming.pending() == 0
    agent_turns = conversation.turns.filter(role="agent").count()
    assert TurnFragment.objects.filter(turn__conversation=conversation).count() == \
        conversation.turns.count()
    assert set(TurnExport.objects.filter(turn__conversation=conversation)
               .values_list("format", flat=True)) == {"markdown", "html"}
    assert RenderedHTML.objects.filter(event__conversation=conversation).count() >= agent_turns
    with _renders_nothing():
        assert _exports(conversation) == fresh
        assert _pages(conversation) == fresh_pages
    assert warming.drain_all() == 0  # nothing queued again by reading


def test_the_html_export_reuses_the_page_s_message_html():
    conversation = build_conversation()
    fresh = _exports(conversation)["html"]
    _drop_caches(conversation)
    _pages(conversation)  # the page renders (and caches) every message run
    assert not TurnExport.objects.filter(turn__conversation=conversation).exists()
    with _renders_nothing():
        assert _exports(conversation)["html"] == fresh
    # ... and the page reuses what an export rendered.
    _drop_caches(conversation)
    pages = _pages(conversation)
    _drop_caches(conversation)
    _exports(conversation)
    TurnFragment.objects.filter(turn__conversation=conversation).delete()
    with _renders_nothing():
        assert _pages(conversation) == pages


def test_a_share_without_reasoning_reads_the_cache_but_writes_none_of_its_own():
    conversation = build_conversation()
    snapshot = Snapshot(conversation.turns.count(), conversation.next_seq - 1, reasoning=False)
    fresh = _exports(conversation, snapshot)
    _drop_caches(conversation)
    warming.drain_all()
    rows = RenderedHTML.objects.filter(event__conversation=conversation).count()
    assert _exports(conversation, snapshot) == fresh
    assert RenderedHTML.objects.filter(event__conversation=conversation).count() == rows


@pytest.mark.parametrize(("fixture_set", "provider", "label", "names", "index"), BOTH)
def test_cached_and_fresh_renderings_of_every_shared_recording_are_byte_identical(
        fixture_set, provider, label, names, index):
    conversation = ingest(provider, files(provider, fixture_set, names, index),
                          prompt="What did you find?").conversation
    assert warming.pending() == conversation.turns.count()
    fresh_pages = _pages(conversation)
    _drop_caches(conversation)
    fresh = _exports(conversation)
    _drop_caches(conversation)
    warming.drain_all()
    with _renders_nothing():
        assert _pages(conversation) == fresh_pages
        assert _exports(conversation) == fresh
    TurnExport.objects.filter(turn__conversation=conversation).delete()
    with _renders_nothing():  # made again from the cached message HTML alone
        assert _exports(conversation) == fresh


def test_a_new_renderer_version_never_serves_an_older_rendering(monkeypatch):
    conversation = build_conversation()
    warming.drain_all()
    # Every cached rendering replaced by a marker: served while the version is the same...
    RenderedHTML.objects.filter(event__conversation=conversation).update(html="<p>STALE</p>")
    TurnFragment.objects.filter(turn__conversation=conversation).update(html="STALE")
    TurnExport.objects.filter(turn__conversation=conversation).update(text="STALE")
    assert "STALE" in "".join(_pages(conversation))
    assert all(b"STALE" in body for body in _exports(conversation).values())
    # ... and never once the renderer's version is another.
    monkeypatch.setattr(render_cache, "VERSION", "next")
    monkeypatch.setattr(reading, "_VERSION", "next")
    monkeypatch.setattr(projections, "RENDERER_VERSION", "next")
    reading._fragment_version.cache_clear()
    try:
        assert "STALE" not in "".join(_pages(conversation))
        assert not any(b"STALE" in body for body in _exports(conversation).values())
    finally:
        reading._fragment_version.cache_clear()


def test_a_drain_the_database_fails_leaves_its_turns_queued():
    conversation = build_conversation()
    count = conversation.turns.count()
    with mock.patch.object(projections, "warm_exports", side_effect=DatabaseError("locked")), \
            pytest.raises(DatabaseError):
        warming.drain()
    assert warming.pending() == count  # a restart (or the next round) finds them all
    assert warming.drain_all() == count and warming.pending() == 0
    assert TurnExport.objects.filter(turn__conversation=conversation, format="html").count() \
        == count


def test_a_turn_that_cannot_be_rendered_is_logged_not_retried_forever(caplog):
    conversation = build_conversation()
    with mock.patch.object(reading, "turn_views", side_effect=ValueError("a renderer bug")), \
            caplog.at_level(logging.ERROR, logger="turnscope.render"):
        assert warming.drain_all() == conversation.turns.count()
    assert "could not render turns" in caplog.text and "a renderer bug" in caplog.text
    assert warming.pending() == 0
    assert len(_pages(conversation)) == conversation.turns.count()  # rendered when read


def test_a_turn_queued_again_while_it_rendered_stays_queued():
    conversation = build_conversation()
    turn = conversation.turns.order_by("index").first()
    real = reading.turn_views

    def requeued(*args, **kwargs):
        # Continued and finished again while this drain rendered it: queued later.
        warming.queue([turn.pk])
        return real(*args, **kwargs)

    with mock.patch.object(reading, "turn_views", side_effect=requeued):
        warming.drain(limit=1)
    assert list(PendingRender.objects.filter(turn=turn)) != []


@pytest.mark.django_db(transaction=True)  # the round's thread has a connection of its own
def test_the_server_drains_the_queue_in_its_rounds():
    from live import apps, instances

    assert apps._render_pending in instances.on_tick
    conversation = build_conversation()
    assert warming.pending() == conversation.turns.count()
    asyncio.run(apps._render_pending())
    assert warming.pending() == 0
    assert TurnFragment.objects.filter(turn__conversation=conversation).count() == \
        conversation.turns.count()


def test_a_deleted_conversation_leaves_nothing_queued():
    owner = User.objects.create_user("olga", password="pw-olga-123")
    conversation = build_conversation(owner=owner)
    store.delete_conversation(conversation)
    assert warming.pending() == 0


@pytest.mark.django_db(transaction=True)
def test_the_server_defers_rendering_while_it_streams_live_turns_but_not_for_long():
    from live import apps, tasks

    conversation = build_conversation()
    count = conversation.turns.count()

    async def round_while_streaming() -> None:
        streaming = asyncio.ensure_future(asyncio.sleep(60))
        tasks.drive("a-live-turn", streaming)
        try:
            await apps._render_pending()
        finally:
            tasks.release("a-live-turn", streaming)
            streaming.cancel()

    asyncio.run(round_while_streaming())
    assert warming.pending() == count  # the live turn's CPU first
    PendingRender.objects.update(queued_at=timezone.now() - timedelta(
        seconds=apps.RENDER_DEFER + 1))
    asyncio.run(round_while_streaming())
    assert warming.pending() == 0  # waited long enough: rendered all the same


@pytest.fixture(autouse=True)
def _own_capture_log(settings, tmp_path):
    """The server's rounds read the capture log: this test's own, not one other tests left
    exchanges in."""
    settings.TURNSCOPE_CAPTURE_PATH = str(tmp_path / "capture.sqlite3")


@pytest.mark.django_db(transaction=True)
def test_the_server_defers_rendering_while_its_exchanges_wait_to_be_recorded():
    from live import apps, capture, instances

    conversation = build_conversation()
    count = conversation.turns.count()
    log = capture.get_log()

    async def exchange(state: str, instance: str) -> str:
        xid = await log.open("proxy", {}, b"{}", instance=instance)
        if state != "open":
            await log.end(xid, state)
        return xid

    def rendered_after(*exchanges: tuple[str, str]) -> bool:
        for state, instance in exchanges:
            asyncio.run(exchange(state, instance))
        asyncio.run(apps._render_pending())
        left = warming.pending()
        warming.queue(list(conversation.turns.values_list("pk", flat=True)))
        return left == 0

    here = instances.owner()
    # one still streaming to its app, one another process has to record: not this one's backlog
    assert rendered_after(("open", here), ("complete", "another-server"))
    ended = asyncio.run(exchange("complete", here))
    assert not rendered_after()  # the recording first
    assert warming.pending() == count
    PendingRender.objects.update(queued_at=timezone.now() - timedelta(
        seconds=apps.RENDER_BEHIND + 1))
    assert rendered_after()  # a recording stuck that long holds nothing back
    capture.mark_recorded(ended)
    assert rendered_after()


def test_the_command_renders_what_is_queued_and_all_of_it_again():
    from io import StringIO

    from django.core.management import call_command

    conversation = build_conversation()
    count = conversation.turns.count()
    out = StringIO()
    call_command("render_pending", stdout=out)
    assert f"rendered {count} turns; 0 queued" in out.getvalue()
    _drop_caches(conversation)
    call_command("render_pending", "--all", stdout=out)
    assert f"queued {count} finished turns" in out.getvalue()
    assert TurnFragment.objects.filter(turn__conversation=conversation).count() == count


def test_the_patched_renderer_trips_on_a_fresh_rendering():
    """The tests above that render nothing would pass vacuously if message runs were rendered
    elsewhere than the patched function: a cold page and a cold export both trip it."""
    conversation = build_conversation()
    with _renders_nothing(), pytest.raises(AssertionError, match="rendered a message run"):
        _pages(conversation)
    with _renders_nothing(), pytest.raises(AssertionError, match="rendered a message run"):
        _exports(conversation)
