"""Live calls to Azure OpenAI and to named OpenAI-compatible upstreams (``live.services``): the
key from the environment by the service's own variable, the request in OpenAI's wire format at
the service's path, the answer recorded as the service's, and the next turn sends it back
natively to that service only."""

from __future__ import annotations

import orjson
import pytest
from asgiref.sync import async_to_sync

from conversations import store
from live import calls
from tests.servers import served
from tests.support import FRESH_FIXTURES
from upstream.recorded import RecordedUpstream, reply

pytestmark = pytest.mark.django_db(transaction=True)

XAI_KEY = "xai-PLANTEDliveCALLxai0123456789abcdefghijklmnopqrstu"
AZURE_KEY = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def upstream(settings, monkeypatch):
    app = RecordedUpstream()
    with served(app) as server:
        settings.TURNSCOPE_UPSTREAM = {p: server.url for p in ("anthropic", "openai", "google",
                                                               "azure")}
        settings.TURNSCOPE_UPSTREAMS = {"xai": server.url, "groq": server.url}
        settings.TURNSCOPE_RECORDED_UPSTREAM = ""
        monkeypatch.setenv("XAI_API_KEY", XAI_KEY)
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
        monkeypatch.delenv("GROQ_API_KEY", raising=False)
        yield app


def run(conversation, ask):
    async def go():
        live = await calls.start_turn(conversation, ask)
        await calls.wait(live.turn, timeout=30)
        return live

    live = async_to_sync(go)()
    live.turn.refresh_from_db()
    return live


def test_the_composer_offers_the_configured_services(upstream):
    options = {o.provider: o for o in calls.provider_options()}
    assert options["xai"].enabled and options["azure"].enabled
    assert options["xai"].models[0].startswith("grok")
    assert not options["groq"].enabled and "GROQ_API_KEY" in options["groq"].reason


def test_a_named_upstream_answers_as_itself(upstream, owner):
    raw = (FRESH_FIXTURES / "openai" / "vercel-ai__deepseek-reasoning.chunks.txt")
    if not raw.exists():
        pytest.skip(f"{raw} is absent")
    upstream.add(reply("openai", raw.read_bytes()))
    conversation = store.create_conversation(owner=owner)
    live = run(conversation, calls.Ask("xai", "grok-4", "Why two tides?", False))
    [request] = upstream.requests
    assert request.path == "/v1/chat/completions"
    assert request.header("authorization") == f"Bearer {XAI_KEY}"
    assert request.json["model"] == "grok-4"
    turn = live.turn
    assert turn.status == "complete"
    # the service it was sent to, whatever the model's name says
    assert turn.provider == "xai"
    assert [e.kind for e in turn.events.order_by("seq")] == ["reasoning", "message"]

    # The next turn to xAI sends the answer back as received; to OpenAI, as text.
    upstream.add(reply("openai", raw.read_bytes()))
    run(live.conversation, calls.Ask("xai", "grok-4", "And the moon?", False))
    messages = upstream.requests[1].json["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    answer = turn.events.get(kind="message").text
    assert messages[1]["content"] == answer


def test_azure_goes_through_its_v1_api_with_its_key(upstream, owner):
    body = orjson.dumps({
        "id": "resp_1", "object": "response", "model": "my-deployment", "status": "completed",
        "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "Twice.", "annotations": []}]}]})
    upstream.add(reply("openai", body))
    conversation = store.create_conversation(owner=owner)
    live = run(conversation, calls.Ask("azure", "my-deployment", "Why two tides?", False))
    [request] = upstream.requests
    assert request.path == "/openai/v1/responses"
    assert request.header("api-key") == AZURE_KEY
    assert request.header("authorization") is None
    assert (live.turn.provider, live.turn.model) == ("azure", "my-deployment")
    assert live.turn.status == "complete"
