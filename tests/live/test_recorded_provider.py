"""The built-in recorded provider: with no key set, a live call is answered by the bundled
samples over HTTP, in each provider's wire format; the demo serves it in its own server."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from conversations import store
from conversations.models import Event
from live import calls, recorded_provider, serve
from tests.servers import served

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def recorded(settings, monkeypatch):
    for variable in calls.KEY_VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)
    app = recorded_provider.app(pace=0)
    with served(app) as server:
        settings.TURNSCOPE_RECORDED_UPSTREAM = server.url + recorded_provider.PREFIX
        settings.TURNSCOPE_UPSTREAM = {p: "http://127.0.0.1:9" for p in calls.PROVIDERS}
        yield app


def send(conversation, provider, model, prompt="Tell me something, with sources"):
    async def go():
        live = await calls.start_turn(conversation, calls.Ask(provider, model, prompt, True))
        await calls.wait(live.turn, timeout=30)
        return live

    live = async_to_sync(go)()
    live.turn.refresh_from_db()
    return live


@pytest.mark.parametrize("provider, model, path", [
    ("anthropic", "claude-sonnet-4-5", "/v1/messages"),
    ("openai", "gpt-5-mini", "/v1/responses"),
    ("google", "gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash:streamGenerateContent"),
])
def test_every_provider_is_answered_with_a_search_and_citations(recorded, owner, provider,
                                                                model, path):
    [option] = [o for o in calls.provider_options() if o.provider == provider]
    assert option.enabled and option.recorded
    live = send(store.create_conversation(owner=owner), provider, model)
    turn = live.turn
    assert live.recorded and turn.agent_id == calls.RECORDED_AGENT
    assert turn.status == "complete" and turn.provider == provider
    assert turn.events.filter(kind="hosted_activity").exists()
    assert Event.objects.filter(turn=turn, attributions__isnull=False).exists()
    assert recorded.requests[-1].path == path
    assert all(v is None for k, v in recorded.requests[-1].headers if "key" in k)


def test_the_second_anthropic_answer_pauses_and_is_continued(recorded, owner):
    conversation = store.create_conversation(owner=owner)
    send(conversation, "anthropic", "claude-sonnet-4-5")
    second = send(conversation, "anthropic", "claude-sonnet-4-5", "And the honeybees?").turn
    assert (second.status, second.end_reason) == ("complete", "end_turn")
    assert [r["trigger"] for r in second.responses_list] == ["initial", "pause_turn"]
    assert len(recorded.requests) == 3


def test_a_body_that_is_not_json_is_a_400_in_the_providers_shape(recorded):
    import httpx

    url = calls.recorded_base() + "/v1/messages"
    response = httpx.post(url, content=b"not json")
    assert response.status_code == 400 and response.json()["type"] == "error"


def test_the_demo_server_mounts_it_beside_the_app():
    import httpx

    app = serve.asgi_application(static=False,
                                 mounts={recorded_provider.PREFIX: recorded_provider.app(pace=0)})
    with served(app) as server:
        answer = httpx.post(server.url + "/recorded/v1/responses",
                            json={"model": "gpt-5-mini", "input": "hi", "stream": True})
        assert answer.status_code == 200 and b"response.completed" in answer.content
        page = httpx.get(server.url + "/accounts/login/")
        assert page.status_code == 200 and b"<form" in page.content


def test_the_recorded_provider_remembers_a_window_not_everything(monkeypatch):
    """It serves as long as the demo runs: what it remembers of requests, bodies and served
    contents (for the replay check) stops at its window, the newest kept."""
    import httpx

    monkeypatch.setattr(recorded_provider, "KEPT", 2)
    app = recorded_provider.app(pace=0)

    async def ask(n: int) -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://upstream") as client:
            for i in range(n):
                response = await client.post(
                    recorded_provider.PREFIX + "/openai/v1/responses",
                    json={"model": "gpt-5-mini", "input": f"question {i}", "stream": True})
                assert response.status_code == 200

    async_to_sync(ask)(4)
    assert len(app.requests) == len(app.sent) == 2
    assert len(app.served) <= 2
    assert b"question 3" in app.requests[-1].body and b"question 2" in app.requests[0].body
