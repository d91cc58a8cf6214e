"""The state endpoint, the replay button's view, and the replay / demo commands."""

from __future__ import annotations

import io

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.core.management.base import CommandError

from conversations import store, streaming
from conversations.models import Conversation
from live import bundled, tasks
from tests.support import add_turn, add_user_turn

pytestmark = pytest.mark.django_db(transaction=True)


def test_state_needs_login_and_ownership(client, owner, stranger):
    conversation = store.create_conversation(owner=owner)
    url = f"/c/{conversation.pk}/state/"
    assert client.get(url).status_code == 302  # to the login page
    client.force_login(stranger)
    assert client.get(url).status_code == 404
    client.force_login(owner)
    assert client.get(url + "?after=x").status_code == 400


def test_state_reports_seq_turns_and_tails(client, owner):
    conversation = store.create_conversation(owner=owner)
    add_user_turn(conversation, "question")
    agent = add_turn(conversation, "agent", status="streaming")
    streaming.write_tail(agent.pk, {"key": "b0", "kind": "message", "text": "So far",
                                    "delta_seq": 2, "block_seq": 1, "citations": []})
    streaming.beat(agent.pk, {})
    client.force_login(owner)
    doc = client.get(f"/c/{conversation.pk}/state/?after=1").json()
    assert doc["last_seq"] == 1
    assert [(t["role"], t["status"], t["changed"]) for t in doc["turns"]] == [
        ("user", "complete", False), ("agent", "streaming", False)]
    assert doc["tails"][str(agent.pk)]["text"] == "So far"


def test_replay_view_starts_a_replay_and_redirects(client, owner, stranger, monkeypatch):
    [(_, source, _)] = bundled.load(owner, only=["anthropic-failed-search"])
    started = []
    monkeypatch.setattr(tasks, "spawn", lambda coro, name="": started.append(coro))
    url = f"/c/{source.pk}/replay/"
    assert client.get(url).status_code == 405
    client.force_login(stranger)
    assert client.post(url).status_code == 404
    assert not started
    client.force_login(owner)
    response = client.post(url, {"speed": "50"})
    assert response.status_code == 302
    target = Conversation.objects.exclude(pk=source.pk).get()
    assert response["Location"].rstrip("/").endswith(str(target.pk))
    assert target.owner == owner
    async def run_task():  # what the server's loop would run
        await started[0]

    async_to_sync(run_task)()
    assert [t.role for t in target.turns.order_by("index")] == ["user", "agent"]


def test_replay_command(owner):
    [(_, source, _)] = bundled.load(owner, only=["anthropic-cut-stream"])
    out = io.StringIO()
    call_command("replay", str(source.pk), "--speed", "0", stdout=out)
    target = Conversation.objects.exclude(pk=source.pk).get()
    agent = target.turns.get(role="agent")
    assert (agent.status, agent.end_reason) == ("interrupted", "interrupted")
    assert "interrupted" in out.getvalue()
    with pytest.raises(CommandError):
        call_command("replay", "not-a-uuid")
    with pytest.raises(CommandError):
        call_command("replay", str(source.pk), "--speed", "-1")


def test_every_bundled_sample_is_read_by_an_adapter_of_this_build():
    """The demo loads every sample: one naming a provider without an adapter is a mistake in
    the manifest, caught here rather than skipped at run time."""
    import providers

    assert {s.provider for s in bundled.samples()} <= set(providers.ADAPTERS)


def test_demo_prepares_idempotently_and_prints_a_login():
    out = io.StringIO()
    call_command("demo", "--no-serve", stdout=out)
    first = Conversation.objects.count()
    assert first == len(bundled.samples()) + 1  # the samples and one live conversation
    text = out.getvalue()
    assert "username  demo" in text and "password  " in text
    password = text.split("password  ")[1].split()[0]
    from django.contrib.auth import authenticate

    assert authenticate(username="demo", password=password) is not None
    call_command("demo", "--no-serve", stdout=io.StringIO())
    assert Conversation.objects.count() == first + 1  # samples not loaded twice
