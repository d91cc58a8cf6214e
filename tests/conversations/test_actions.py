"""Every business action writes and announces: what an open page held before, plus what the
action announced, is what a fresh fetch shows (as Zulip's ``verify_action``).

The page models below do what ``static/live.js`` (a conversation's page) and ``static/list.js``
(the conversation list) do with the messages; the fresh fetch reads what those pages would
load again: the state document (``live.state``) and the list's rows (``reading``). The
messages are received through the configured channel layer (the in-memory one, or Redis when
``REDIS_URL`` is set), subscribed to the groups those pages follow before the action; the
database is SQLite, or PostgreSQL when ``DATABASE_URL`` is set.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import io
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.core.management import call_command

from conversations import ingest, reading, store, uploads
from conversations.actions import announce
from conversations.actions.create import (
    announce_created,
    fork_conversation,
    import_files,
    new_conversation,
)
from conversations.actions.delete import delete_conversation
from conversations.actions.ingest import ingest_response
from conversations.actions.owner import set_owner
from conversations.actions.rename import rename_conversation
from conversations.actions.share import revoke_share, share_conversation, update_share
from conversations.models import Conversation, Share
from live import bundled, calls, live_replay, runner, state
from tests.live.helpers import unbatch
from tests.support import add_user_turn

pytestmark = pytest.mark.django_db(transaction=True)


# -- what the pages hold, and a fresh fetch of it ---------------------------------------------


def fetch(owner: Any, watched: list[Any]) -> dict[str, Any]:
    """What the owner's list and each watched conversation's page show when loaded now."""
    rows = reading.conversation_rows(owner).values_list("pk", "title")
    pages: dict[str, Any] = {}
    for pk in watched:
        conversation = Conversation.objects.filter(pk=pk).first()
        if conversation is None:
            pages[str(pk)] = {"deleted": True}
            continue
        doc = state.conversation_state(conversation)
        pages[str(pk)] = {"deleted": False, "title": doc["title"], "shown": doc["shown"],
                          "turns": {t["id"]: t["status"] for t in doc["turns"]}}
    shares = Share.objects.filter(owner=owner).values_list("pk", "conversation_id", "turn_count")
    return {"list": {str(pk): announce.shown_title(title) for pk, title in rows},
            "shares": {str(pk): {"conversation": str(c), "turn_count": n} for pk, c, n in shares},
            "pages": pages}


def apply(held: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    """``held`` after ``messages``, as the pages apply them (``group`` says whose they are)."""
    held = copy.deepcopy(held)
    for group, m in messages:
        if group == "list" and m["type"] == "conversation":
            if m["op"] in ("add", "update"):
                held["list"][m["conversation"]] = m["shown"]
            elif m["op"] == "remove":
                held["list"].pop(m["conversation"], None)
                # its links go with it (the shared links page takes their rows away)
                held["shares"] = {k: v for k, v in held["shares"].items()
                                  if v["conversation"] != m["conversation"]}
            continue
        if group == "list" and m["type"] == "share":
            if m["op"] in ("add", "update"):
                held["shares"][m["share"]] = {"conversation": m["conversation"],
                                              "turn_count": m["turn_count"]}
            elif m["op"] == "remove":
                held["shares"].pop(m["share"], None)
            continue
        page = held["pages"][group]
        if page.get("deleted"):
            continue  # a page that says it was deleted stops following
        if m["type"] == "conversation" and m["op"] == "update":
            page["title"], page["shown"] = m["title"], m["shown"]
        elif m["type"] == "conversation" and m["op"] == "remove":
            held["pages"][group] = {"deleted": True}
        elif m["type"] == "turn":
            page["turns"][m["turn"]] = m["status"]
    return held


def verify_action(action: Callable[[], Any], owner: Any, watched: list[Any],
                  owners: list[Any] | None = None) -> tuple[Any, list[dict[str, Any]]]:
    """Run ``action`` (sync, or a coroutine function) while listening where the owner's list
    and the ``watched`` conversations' pages listen; then check that the state before plus the
    messages equals a fresh fetch, and that the action changed what a page shows (so the
    check cannot pass on an action that did nothing). ``owners``: further lists to check
    (each checked the same way). The action's result and the messages."""
    layer = get_channel_layer()
    everyone = [owner, *(owners or [])]

    async def go() -> tuple[Any, list[Any], list[Any], list[Any]]:
        subscriptions = []
        for group, name in [
            *[(f"list:{o.pk}", announce.owner_group(o.pk)) for o in everyone],
            *[(str(pk), announce.conversation_group(pk)) for pk in watched],
        ]:
            channel = await layer.new_channel()
            await layer.group_add(name, channel)
            subscriptions.append((group, name, channel))
        # subscribed first, then the state: what changes after it comes as messages
        befores = [await sync_to_async(fetch)(o, watched) for o in everyone]
        if inspect.iscoroutinefunction(action):
            result = await action()
        else:
            result = await sync_to_async(action)()
        received: list[tuple[str, dict[str, Any]]] = []
        for group, name, channel in subscriptions:
            while True:
                try:
                    async with asyncio.timeout(0.3):
                        message = await layer.receive(channel)
                except TimeoutError:
                    break
                for m in unbatch(orjson.loads(message["text"])):
                    received.append((group, m))
            await layer.group_discard(name, channel)
        afters = [await sync_to_async(fetch)(o, watched) for o in everyone]
        return result, befores, afters, received

    result, befores, afters, received = async_to_sync(go)()
    for who, before, after in zip(everyone, befores, afters, strict=True):
        mine = [(("list" if g == f"list:{who.pk}" else g), m) for g, m in received
                if not g.startswith("list:") or g == f"list:{who.pk}"]
        assert apply(before, mine) == after
    assert befores != afters, "the action changed nothing a page shows"
    return result, [m for _g, m in received]


# -- the actions -----------------------------------------------------------------------------


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="pw-owner-123")


@pytest.fixture
def stranger(django_user_model):
    return django_user_model.objects.create_user("stranger", password="pw-stranger-123")


@pytest.fixture
def tides(owner):
    [(_sample, conversation, _)] = bundled.load(owner, only=["anthropic-tides"])
    return conversation


def test_rename_reaches_the_page_and_the_list(owner, tides):
    _, messages = verify_action(lambda: rename_conversation(tides, "## **Tide tables**"),
                                owner, [tides.pk])
    assert {(m["op"], m["title"], m["shown"]) for m in messages} == {
        ("update", "## **Tide tables**", "Tide tables")}
    assert len(messages) == 2  # the page's group and the owner's list


def test_rename_redacts_what_it_stores_and_announces(owner, tides):
    key = "sk-ant-api03-" + "Q" * 40
    _, messages = verify_action(lambda: rename_conversation(tides, f"mine {key}"), owner,
                                [tides.pk])
    assert all(key not in m["title"] for m in messages)
    assert key not in Conversation.objects.get(pk=tides.pk).title


def test_delete_tells_the_page_and_the_list(owner, tides):
    other = store.create_conversation(title="kept", owner=owner)
    deleted, messages = verify_action(lambda: delete_conversation(tides), owner,
                                      [tides.pk, other.pk])
    assert deleted.conversation == tides.pk
    assert [m["op"] for m in messages] == ["remove", "remove"]


def test_a_refused_delete_announces_nothing(owner, tides):
    """A turn still streaming: the delete is refused, nothing was committed, nothing said."""
    from conversations.models import Turn

    Turn.objects.filter(conversation=tides, role="agent").update(status="streaming")

    def refused():
        with pytest.raises(store.ConversationBusy):
            delete_conversation(tides)

    with pytest.raises(AssertionError, match="changed nothing"):
        verify_action(refused, owner, [tides.pk])


def test_a_rename_rolled_back_announces_nothing(owner, tides):
    from django.db import transaction

    def rolled_back():
        with pytest.raises(RuntimeError), transaction.atomic():
            rename_conversation(tides, "never")
            raise RuntimeError("the request failed after the rename")

    with pytest.raises(AssertionError, match="changed nothing"):
        verify_action(rolled_back, owner, [tides.pk])


def test_fork_adds_to_the_list_and_leaves_the_source_page(owner, tides):
    forked, messages = verify_action(
        lambda: fork_conversation(tides, 0, owner=owner, title="a branch"), owner, [tides.pk])
    assert [(m["op"], m["conversation"]) for m in messages] == [("add", str(forked.pk))]


def test_new_conversation_is_added(owner):
    created, messages = verify_action(lambda: new_conversation(owner, "blank"), owner, [])
    assert [(m["op"], m["shown"]) for m in messages] == [("add", "blank")]
    assert created.title == "blank"


def test_import_adds_each_conversation_stored(owner):
    raw = (bundled.SAMPLES_DIR / "openai-sourdough.sse").read_bytes()
    files = [uploads.Upload("one.sse", lambda: io.BytesIO(raw), len(raw))]
    results, messages = verify_action(
        lambda: list(import_files(files, owner=owner, format="auto")), owner, [])
    [done] = [r for r in results if isinstance(r, uploads.Imported)]
    assert [(m["op"], m["conversation"]) for m in messages] == [("add", str(done.conversation.pk))]
    # imported again: already there, nothing stored, nothing announced
    with pytest.raises(AssertionError, match="changed nothing"):
        verify_action(lambda: list(import_files(files, owner=owner)), owner, [])


def test_a_replay_target_is_announced(owner, tides):
    target, _ = verify_action(
        lambda: announce_created(live_replay.create_live_replay_target(tides, owner)), owner, [])
    assert target is None


def test_giving_a_conversation_away_moves_it_between_lists(owner, stranger, tides):
    _, messages = verify_action(lambda: set_owner(tides, stranger), owner, [],
                                owners=[stranger])
    assert sorted(m["op"] for m in messages) == ["add", "remove"]


def test_stop_reaches_the_page(owner, tides):
    """Stop ends the streaming turn interrupted: the runner announces the turn's change (the
    replay streams on the harness's loop, slowly, until Stop)."""
    sample = bundled.sample("anthropic-tides")

    async def replay_then_stop() -> Any:
        replaying = asyncio.ensure_future(runner.run_recording(
            tides, sample.provider, list(sample.responses), prompt="again", speed=0.05))
        for _ in range(500):  # until its turn is open
            if await sync_to_async(calls.streaming_turn)(tides) is not None:
                break
            await asyncio.sleep(0.02)
        turn = await calls.stop(tides)
        await asyncio.wait([replaying], timeout=10)
        return turn

    turn, messages = verify_action(replay_then_stop, owner, [tides.pk])
    assert turn is not None
    assert Conversation.objects.get(pk=tides.pk).turns.get(pk=turn.pk).status == "interrupted"
    assert any(m["type"] == "turn" and m["status"] == "interrupted" for m in messages)


def test_a_layer_that_fails_never_fails_the_action(owner, tides, monkeypatch, caplog):
    """The rename is committed and answered; the announcement is dropped, and so are those
    that follow for a while (no wait on a dead layer per conversation of an import)."""
    sent = []

    class Broken:
        async def group_send(self, group, message):
            sent.append(group)
            raise ConnectionError("redis is down")

    monkeypatch.setattr(announce, "get_channel_layer", Broken)
    monkeypatch.setattr(announce, "_failed_at", -announce.QUIET_AFTER_FAILURE)
    rename_conversation(tides, "first")
    rename_conversation(tides, "second")
    assert Conversation.objects.get(pk=tides.pk).title == "second"
    assert len(sent) == 1 and "announcing failed" in caplog.text


def test_share_update_and_revoke_reach_the_shared_links_page(owner, tides):
    (share, token), messages = verify_action(
        lambda: share_conversation(tides, owner, expires="7d"), owner, [tides.pk])
    assert [(m["type"], m["op"], m["share"]) for m in messages] == [("share", "add", str(share.pk))]
    assert all(token not in orjson.dumps(m).decode() for m in messages)  # never on the wire
    add_user_turn(tides, "and since?")
    _, messages = verify_action(lambda: update_share(share), owner, [tides.pk])
    assert [(m["op"], m["turn_count"]) for m in messages] == [("update", 3)]
    _, messages = verify_action(lambda: revoke_share(share), owner, [tides.pk])
    assert [(m["op"], m["share"]) for m in messages] == [("remove", str(share.pk))]


def test_deleting_a_shared_conversation_takes_its_links_away(owner, tides):
    share_conversation(tides, owner)
    share_conversation(tides, owner, include_reasoning=False)
    verify_action(lambda: delete_conversation(tides), owner, [tides.pk])
    assert not Share.objects.exists()


def test_a_response_ingested_into_a_conversation_reaches_its_page(owner, tides):
    """Through the API (``POST .../ingest`` of a conversation): its user and agent turns are
    announced as the runner announces turns; into no conversation, a new one to the list."""
    raw = (bundled.SAMPLES_DIR / "openai-sourdough.sse").read_bytes()
    summary, messages = verify_action(
        lambda: ingest_response("openai", [ingest.ResponseFile("body", raw)], owner=owner,
                                prompt="and bread?", conversation=tides), owner, [tides.pk])
    assert [(m["type"], m["role"], m["index"]) for m in messages] == [
        ("turn", "user", 2), ("turn", "agent", 3)]
    assert messages[-1]["turn"] == str(summary.turn.pk)
    assert messages[-1]["seq"] == Conversation.objects.get(pk=tides.pk).next_seq - 1
    summary, messages = verify_action(
        lambda: ingest_response("openai", [ingest.ResponseFile("body", raw)], owner=owner),
        owner, [tides.pk])
    assert [(m["op"], m["conversation"]) for m in messages] == [
        ("add", str(summary.conversation.pk))]


@pytest.mark.parametrize("command", ["import", "ingest"])
def test_the_command_line_announces_what_it_stores(owner, command):
    """With a shared layer (Redis), a list open in a browser sees what ``manage.py import`` or
    ``ingest`` (one file, or ``--each``) stores."""
    path = str(bundled.SAMPLES_DIR / "openai-sourdough.sse")
    args = ["--provider", "openai"] if command == "ingest" else []
    _, messages = verify_action(
        lambda: call_command(command, *args, "--owner", "owner", path, stdout=io.StringIO()),
        owner, [])
    [conversation] = Conversation.objects.filter(owner=owner)
    assert [(m["op"], m["conversation"]) for m in messages] == [("add", str(conversation.pk))]
    if command == "ingest":
        _, messages = verify_action(
            lambda: call_command("ingest", *args, "--copy", "--each", "--owner", "owner", path,
                                 stdout=io.StringIO()), owner, [])
        assert [m["op"] for m in messages] == ["add"]
