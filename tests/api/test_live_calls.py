"""The live-call endpoints: create an empty conversation, send a turn (202; owner only; 409 while
one streams), fork at a turn, re-run a turn as a branch, stop; and the schema lists them."""

from __future__ import annotations

import time

import httpx
import orjson
import pytest
from rest_framework.authtoken.models import Token

from conversations import store
from conversations.models import Conversation, Turn
from live import bundled
from tests.api.test_schema import api_schema
from tests.servers import served
from upstream.recorded import RecordedUpstream, reply

pytestmark = pytest.mark.django_db(transaction=True)

ANTHROPIC_KEY = "sk-ant-api03-PLANTEDapiCALLkey0123456789abcdefghijkl"
TIDES = bundled.sample("anthropic-tides").responses[0].raw.encode()
SOURDOUGH = bundled.sample("openai-sourdough").responses[0].raw.encode()
ASK = {"prompt": "Why are there two high tides a day?", "provider": "anthropic",
       "model": "claude-sonnet-4-5", "web_search": True}


@pytest.fixture
def upstream(settings, monkeypatch):
    app = RecordedUpstream()
    with served(app) as server:
        settings.TURNSCOPE_UPSTREAM = {p: server.url for p in ("anthropic", "openai", "google")}
        settings.TURNSCOPE_RECORDED_UPSTREAM = ""
        monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-PLANTEDapiCALLopenai0123456789abcdefgh")
        monkeypatch.delenv("GEMINI_API_KEY", raising=False)
        yield app


def test_create_an_empty_conversation(alice_api, alice):
    response = alice_api.post("/api/v1/conversations", {"title": "Tides"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["title"] == "Tides" and body["turns"] == 0 and body["owner"] == "alice"
    assert Conversation.objects.get(pk=body["id"]).owner == alice
    assert alice_api.post("/api/v1/conversations", {}, format="json").status_code == 201
    assert alice_api.post("/api/v1/conversations", {"title": "x" * 301},
                          format="json").status_code == 400


def test_send_a_turn_is_202_with_the_new_turns_id(alice_api, alice, upstream):
    upstream.add(reply("anthropic", TIDES))
    conversation = store.create_conversation(owner=alice)
    response = alice_api.post(f"/api/v1/conversations/{conversation.pk}/turns", ASK,
                              format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    turn = Turn.objects.get(pk=body["turn"]["id"])
    assert turn.conversation_id == conversation.pk and turn.role == "agent"
    assert body["turn"]["index"] == turn.index == 1
    assert response["Location"] == f"/c/{conversation.pk}/" == body["url"]
    assert turn.status == "complete" and turn.provider == "anthropic"
    assert upstream.requests[0].header("x-api-key") == ANTHROPIC_KEY
    # GET on the same path still lists the turns
    turns = alice_api.get(f"/api/v1/conversations/{conversation.pk}/turns").json()
    assert [t["role"] for t in turns] == ["user", "agent"]


def test_a_turn_while_one_streams_is_409(alice_api, alice, upstream):
    conversation = store.create_conversation(owner=alice)
    store.open_turns(conversation, [store.user_turn("hi"),
                                    store.NewTurn("agent", (), status="streaming")])
    response = alice_api.post(f"/api/v1/conversations/{conversation.pk}/turns", ASK,
                              format="json")
    assert response.status_code == 409 and "streaming" in response.json()["detail"]
    assert conversation.turns.count() == 2 and not upstream.requests


def test_only_the_owner_sends_turns(alice, bob_api, staff_api, upstream):
    conversation = store.create_conversation(owner=alice)
    url = f"/api/v1/conversations/{conversation.pk}/turns"
    assert bob_api.post(url, ASK, format="json").status_code == 404  # not even visible
    refused = staff_api.post(url, ASK, format="json")
    assert refused.status_code == 403  # visible, not theirs
    assert "Only the owner of a conversation" in refused.json()["detail"]
    assert staff_api.post(f"{url}/0/rerun", ASK, format="json").status_code == 403
    assert staff_api.post(f"{url}/0/stop", format="json").status_code == 403
    assert staff_api.get(url).status_code == 200  # staff may read
    assert not conversation.turns.exists() and not upstream.requests


def test_bad_bodies_and_a_disabled_provider_are_400_with_the_reason(alice_api, alice, upstream,
                                                                     monkeypatch):
    conversation = store.create_conversation(owner=alice)
    url = f"/api/v1/conversations/{conversation.pk}/turns"
    assert alice_api.post(url, {**ASK, "provider": "nope"}, format="json").status_code == 400
    assert alice_api.post(url, {**ASK, "prompt": ""}, format="json").status_code == 400
    # a key in the body is never used: keys come from the server's environment only
    upstream.add(reply("anthropic", TIDES))
    sent = alice_api.post(url, {**ASK, "api_key": "sk-ant-api03-FROMtheBROWSER0123456789abc"},
                          format="json")
    assert sent.status_code == 202
    assert upstream.requests[-1].header("x-api-key") == ANTHROPIC_KEY
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    response = alice_api.post(url, {**ASK, "provider": "google", "model": "gemini-2.5-flash"},
                              format="json")
    assert response.status_code == 400 and "GEMINI_API_KEY" in response.json()["detail"]


def test_fork_at_a_turn_and_rerun_a_turn(alice_api, alice, upstream):
    upstream.add(reply("anthropic", TIDES), reply("openai", SOURDOUGH))
    conversation = store.create_conversation(owner=alice, title="Tides")
    alice_api.post(f"/api/v1/conversations/{conversation.pk}/turns", ASK, format="json")
    fork = alice_api.post(f"/api/v1/conversations/{conversation.pk}/turns/1/fork", {},
                          format="json")
    assert fork.status_code == 201 and fork.json()["turns"] == 2
    assert fork.json()["forked_at_turn"] == 1
    assert alice_api.post(f"/api/v1/conversations/{conversation.pk}/turns/9/fork", {},
                          format="json").status_code == 400
    rerun = alice_api.post(f"/api/v1/conversations/{conversation.pk}/turns/1/rerun",
                           {"provider": "openai", "model": "gpt-5-mini"}, format="json")
    assert rerun.status_code == 202, rerun.content
    branch = Conversation.objects.get(pk=rerun.json()["conversation"])
    assert (branch.forked_from_id, branch.forked_at_turn) == (conversation.pk, 0)
    assert branch.turns.get(index=1).provider == "openai"
    assert alice_api.post(f"/api/v1/conversations/{conversation.pk}/turns/0/rerun",
                          {"provider": "openai", "model": "gpt-5-mini"},
                          format="json").status_code == 404  # a user turn


def test_stop_a_turn_that_is_not_streaming_is_404(alice_api, alice):
    conversation = store.create_conversation(owner=alice)
    assert alice_api.post(f"/api/v1/conversations/{conversation.pk}/turns/1/stop"
                          ).status_code == 404


def test_the_schema_lists_the_live_call_operations():
    paths = api_schema()["paths"]
    assert "post" in paths["/api/v1/conversations"]
    turns = paths["/api/v1/conversations/{id}/turns"]
    assert {"get", "post"} <= set(turns)
    assert "202" in turns["post"]["responses"] and "409" in turns["post"]["responses"]
    for action in ("fork", "rerun", "stop"):
        assert "post" in paths[f"/api/v1/conversations/{{id}}/turns/{{index}}/{action}"]
    body = turns["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert body.endswith("TurnAsk")


def test_under_the_asgi_server_the_202_comes_while_the_turn_streams(alice, upstream):
    from turnscope.asgi import application

    upstream.add(reply("anthropic", TIDES, pace=0.03))
    conversation = store.create_conversation(owner=alice)
    token = Token.objects.create(user=alice).key
    with served(application) as server:
        response = httpx.post(f"{server.url}/api/v1/conversations/{conversation.pk}/turns",
                              json=ASK, headers={"Authorization": f"Token {token}"}, timeout=20)
        assert response.status_code == 202, response.text
        body = orjson.loads(response.content)
        assert body["status"] == "streaming"
        busy = httpx.post(f"{server.url}/api/v1/conversations/{conversation.pk}/turns",
                          json=ASK, headers={"Authorization": f"Token {token}"}, timeout=20)
        assert busy.status_code == 409
        deadline = time.monotonic() + 30
        turn = Turn.objects.get(pk=body["turn"]["id"])
        while turn.status == "streaming" and time.monotonic() < deadline:
            time.sleep(0.1)
            turn.refresh_from_db()
    assert turn.status == "complete" and turn.events.filter(kind="message").exists()
