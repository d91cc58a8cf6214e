"""A long conversation's page shows a window of its turns: the newest by default, the one that
holds a linked turn, earlier ones on demand; its work does not grow with the conversation."""

from __future__ import annotations

import re
import tracemalloc

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from bench.long import build_long_conversation
from conversations import store
from conversations.models import Turn
from conversations.reading import window_bounds

pytestmark = pytest.mark.django_db

SECTION = re.compile(r'<section class="turn [a-z]+" id="turn-([0-9a-f-]+)"[^>]* data-index="(\d+)"')


@pytest.fixture
def alice():
    return User.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture(scope="module")
def long_db(django_db_setup, django_db_blocker):
    """One 5,000-turn conversation for the module, built through the store's writer."""
    with django_db_blocker.unblock():
        owner = User.objects.create_user("longreader", password="pw-long-123")
        conversation = build_long_conversation(5000, owner=owner)
        yield owner, conversation
        store.delete_conversation(conversation)
        owner.delete()


def indexes(html: str) -> list[int]:
    return [int(index) for _, index in SECTION.findall(html)]


def test_window_bounds():
    assert window_bounds(5000, 50) == (4950, 5000)
    assert window_bounds(30, 50) == (0, 30)
    assert window_bounds(0, 50) == (0, 0)
    assert window_bounds(5000, 50, start=100) == (100, 150)
    assert window_bounds(5000, 50, start=4990) == (4950, 5000)  # never a short last window
    assert window_bounds(5000, 50, around=10) == (0, 50)
    assert window_bounds(5000, 50, around=1000) == (975, 1025)
    assert window_bounds(5000, 50, around=4960) == (4950, 5000)  # already among the newest


def test_page_shows_the_newest_turns_and_links_earlier_ones(client, long_db):
    owner, conversation = long_db
    client.force_login(owner)
    html = client.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert indexes(html) == list(range(4950, 5000))
    assert 'data-window-from="4950"' in html and 'data-window-end=""' in html
    # A real link (works without script) and the fragment the script fetches instead.
    assert f'href="/c/{conversation.pk}/?from=4900"' in html
    assert f'data-fragment="/c/{conversation.pk}/turns/?from=4900&amp;to=4950"' in html
    assert "4950 earlier turns not shown" in html
    assert "data-window-later" not in html


def test_earlier_fragment_holds_the_turns_before_the_window(client, long_db):
    owner, conversation = long_db
    client.force_login(owner)
    url = reverse("turn-window", args=[conversation.pk])
    html = client.get(url, {"from": 4900, "to": 4950}).content.decode()
    assert indexes(html) == list(range(4900, 4950))
    assert f'data-fragment="/c/{conversation.pk}/turns/?from=4850&amp;to=4900"' in html
    assert "<html" not in html  # a fragment, not a page
    first = client.get(url, {"from": 0, "to": 50}).content.decode()
    assert indexes(first) == list(range(50)) and "data-window-earlier" not in first
    # "to" caps the window: nothing the page already shows comes twice.
    assert indexes(client.get(url, {"from": 10, "to": 30}).content.decode()) == list(range(10, 30))


def test_deep_link_renders_the_window_holding_the_turn(client, long_db):
    owner, conversation = long_db
    client.force_login(owner)
    turn = conversation.turns.get(index=1201)
    page = reverse("conversation-detail", args=[conversation.pk])
    html = client.get(page, {"turn": str(turn.pk)}).content.decode()
    shown = indexes(html)
    assert 1201 in shown and len(shown) == 50
    assert f'id="turn-{turn.pk}"' in html and f'id="src-{turn.pk}-1"' in html
    # The window stops before the newest turns: the page says so and links on.
    assert f'data-window-end="{shown[-1] + 1}"' in html
    assert f'href="/c/{conversation.pk}/?from={shown[-1] + 1}"' in html
    # A turn of another conversation, or no turn at all: the newest window.
    for bad in ("00000000-0000-0000-0000-000000000000", "not-a-uuid"):
        assert indexes(client.get(page, {"turn": bad}).content.decode())[0] == 4950
    assert indexes(client.get(page, {"from": "x"}).content.decode())[0] == 4950


def test_page_work_does_not_grow_with_the_conversation(client, long_db, alice):
    """Same queries for the 5,000-turn page as for a 60-turn one, and bounded memory."""
    owner, long = long_db
    short = build_long_conversation(60, owner=alice)
    counts = []
    for user, conversation in ((owner, long), (alice, short)):
        client.force_login(user)
        url = reverse("conversation-detail", args=[conversation.pk])
        client.get(url)  # cold: renders and caches the window
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]
    client.force_login(owner)
    url = reverse("conversation-detail", args=[long.pk])
    tracemalloc.start()
    client.get(url)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 20 * 1024 * 1024, f"{peak / 2**20:.1f} MB for one page"


def test_a_cold_page_caches_what_it_rendered_in_one_transaction(client, alice, settings):
    """The first view of a window renders its turns and caches their fragments and message
    HTML with the same few statements however many turns it shows (a commit per turn was
    most of a cold page's time on PostgreSQL); the next view reads them back."""
    from conversations.models import RenderedHTML, TurnFragment

    client.force_login(alice)
    counts = []
    for size in (6, 24):
        settings.TURNSCOPE_PAGE_TURNS = size
        conversation = build_long_conversation(size, owner=alice)
        url = reverse("conversation-detail", args=[conversation.pk])
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts.append(len(queries))
        turns = conversation.turns.all()
        assert TurnFragment.objects.filter(turn__in=turns).count() == size
        assert RenderedHTML.objects.filter(event__conversation=conversation).count() == size
        with CaptureQueriesContext(connection) as warm:
            client.get(url)
        assert not [q for q in warm.captured_queries if q["sql"].startswith("INSERT")]
    assert counts[0] == counts[1]


def test_a_streaming_turn_at_the_end_is_in_the_window(client, long_db):
    owner, conversation = long_db  # the test's transaction takes the new turn away again
    [(turn, _)] = store.open_turns(conversation, [store.NewTurn(
        "agent", [], status=Turn.Status.STREAMING)])
    client.force_login(owner)
    html = client.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert indexes(html)[-1] == 5000
    assert f'id="turn-{turn.pk}"' in html and 'data-status="streaming"' in html
    assert '<div class="streaming-tail" data-delta-seq="0"' in html


def test_window_size_is_configurable(client, alice, settings):
    settings.TURNSCOPE_PAGE_TURNS = 7
    conversation = build_long_conversation(20, owner=alice)
    client.force_login(alice)
    html = client.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert indexes(html) == list(range(13, 20))
    assert "?from=6" in html


# -- exports: streamed a batch of turns at a time, finished turns' chunks cached ------------


def _whole(conversation, fmt, projection="portable") -> bytes:
    """The export made whole, the way it was before it streamed: one document, one dump."""
    import orjson

    from conversations.projections import conversation_dict
    from conversations.rendering import render_export

    if fmt == "json":
        return orjson.dumps(conversation_dict(conversation, projection),
                            option=orjson.OPT_INDENT_2)
    return render_export(conversation_dict(conversation, "portable"), fmt).encode()


@pytest.mark.parametrize(("fmt", "projection"), [("json", "portable"), ("json", "native"),
                                                 ("markdown", "portable"),
                                                 ("html", "portable")])
def test_streamed_export_is_the_whole_document_byte_for_byte(alice, fmt, projection,
                                                             monkeypatch):
    from conversations import projections

    monkeypatch.setattr(projections, "EXPORT_BATCH", 7)  # several batches
    monkeypatch.setattr(projections, "CHUNK_BYTES", 4096)
    conversation = build_long_conversation(40, owner=alice, title="Forty *turns* <b>")
    expected = _whole(conversation, fmt, projection)
    for attempt in ("rendered", "cached"):
        chunks = list(projections.export_stream(conversation, fmt, projection))
        assert len(chunks) > 3, attempt
        assert b"".join(chunks) == expected, attempt
    empty = store.create_conversation(title="empty", owner=alice)
    assert projections.export_document(empty, fmt, projection) == _whole(empty, fmt, projection)


def test_each_export_batch_reads_the_window_of_its_own_turns(alice, monkeypatch):
    """A batch's query of turns is bounded both ways (start, start + batch): bounded below
    only, PostgreSQL joined and grouped the events of every later turn for each batch."""
    from django.db import connection

    from conversations import projections

    monkeypatch.setattr(projections, "EXPORT_BATCH", 7)
    conversation = build_long_conversation(40, owner=alice)
    windows = []

    def spy(execute, sql, params, many, context):
        if "MAX(" in sql.upper() and sql.lstrip().upper().startswith("SELECT"):
            windows.append([p for p in params if isinstance(p, int)][-2:])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        text = projections.export_document(conversation, "markdown")
    assert windows == [[start, min(start + 7, 40)] for start in range(0, 40, 7)]
    assert text == _whole(conversation, "markdown")


def test_finished_turns_are_exported_from_the_cache(alice, monkeypatch):
    from conversations import projections
    from conversations.models import TurnExport

    conversation = build_long_conversation(12, owner=alice)
    first = projections.export_document(conversation, "markdown")
    assert TurnExport.objects.filter(turn__conversation=conversation,
                                     format="markdown").count() == 12
    with monkeypatch.context() as m:
        m.setattr(projections, "export_turn", lambda *a: pytest.fail("rendered again"))
        assert projections.export_document(conversation, "markdown") == first
        # A rename changes the head only; the turns still come from the cache.
        store.rename_conversation(conversation, "Renamed")
        assert projections.export_document(conversation, "markdown").startswith(b"# Renamed")
    # A streaming turn is exported (as far as it has got) but not cached; once it has
    # finished, its chunk is made again and cached.
    [(turn, _)] = store.open_turns(conversation, [store.NewTurn(
        "agent", [], status=Turn.Status.STREAMING)])
    assert b"Turn 13 \xc2\xb7 Assistant" in projections.export_document(conversation, "markdown")
    assert not TurnExport.objects.filter(turn=turn).exists()
    store.finish_turn(turn, status=Turn.Status.INTERRUPTED, end_reason="interrupted")
    text = projections.export_document(conversation, "markdown")
    assert b"_Status: interrupted (interrupted)_" in text
    assert TurnExport.objects.filter(turn=turn, format="markdown").count() == 1
    assert text == _whole(conversation, "markdown")


def _clear_render_caches() -> None:
    """Empty the renderer's bounded LRU caches (marker HTML, URL checks, shared tokens, ...):
    they fill as distinct turns are rendered, up to their ``maxsize``, which would read as
    memory growing with the conversation."""
    import sys

    for name, module in list(sys.modules.items()):
        if not name.startswith("conversations.rendering"):
            continue
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def _peak(conversation, fmt) -> tuple[int, int]:
    import gc

    from conversations import projections

    _clear_render_caches()
    gc.collect()
    tracemalloc.start()
    size = sum(len(chunk) for chunk in projections.export_stream(conversation, fmt))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return size, peak


@pytest.mark.slow
def test_export_memory_is_flat(long_db, alice):
    """Streaming the 5,000-turn conversation holds no more than streaming a 500-turn one;
    rendering 720 turns no more than twice what rendering 120 does (the batch bounds it, not
    the size)."""
    _, long = long_db
    short = build_long_conversation(500, owner=alice)
    for attempt in ("made", "cached"):
        (small, low), (big, high) = _peak(short, "json"), _peak(long, "json")
        assert big > 8 * small
        assert high < 2 * low + 1024 * 1024, (attempt, low, high)
    few, many = (build_long_conversation(n, owner=alice) for n in (120, 720))
    for fmt in ("markdown", "html"):
        (small, low), (big, high) = _peak(few, fmt), _peak(many, fmt)
        assert big > 4 * small
        # Rendering fills the bounded caches (cleared before each run) with up to a few
        # thousand small entries: that, not the conversation, is the slack.
        assert high < 2 * low + 3 * 1024 * 1024, (fmt, low, high)


def test_export_response_streams(client, alice):
    conversation = build_long_conversation(30, owner=alice)
    client.force_login(alice)
    for fmt in ("json", "markdown", "html"):
        response = client.get(f"/api/v1/conversations/{conversation.pk}/export", {"format": fmt})
        assert response.status_code == 200 and response.streaming
        assert b"".join(response.streaming_content) == _whole(conversation, fmt)


def test_export_response_streams_under_asgi(alice):
    """Served by daphne, the stream is read a step at a time in the database thread (Django
    would read a synchronous iterator whole into memory first)."""
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    conversation = build_long_conversation(30, owner=alice)

    async def fetch() -> tuple[bool, bytes]:
        client = AsyncClient()
        await client.aforce_login(alice)
        response = await client.get(f"/api/v1/conversations/{conversation.pk}/export",
                                    {"format": "markdown"})
        assert response.status_code == 200
        return response.is_async, b"".join([chunk async for chunk in response.streaming_content])

    is_async, body = async_to_sync(fetch)()
    assert is_async
    assert body == _whole(conversation, "markdown")
