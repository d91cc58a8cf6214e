from __future__ import annotations

import itertools

import pytest
from django.core.cache.backends.locmem import LocMemCache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from conversations import store
from conversations.models import Conversation
from streams.bodies import ActivityBody, ArtifactBody, ReasoningBody
from streams.builder import AttributionRecord, EventRecord
from streams.parts import Payload
from tests.support import add_turn, add_user_turn

_caches = itertools.count()
CITATION = {"type": "web_search_result_location", "url": "https://meteo.example.fr/paris",
            "title": "Météo", "cited_text": "sunny", "encrypted_index": "abc"}


@pytest.fixture(autouse=True)
def _private_throttle_cache(monkeypatch):
    """Throttle counters in a fresh cache per test: never shared with other tests or a Redis."""
    monkeypatch.setattr(SimpleRateThrottle, "cache", LocMemCache(f"throttle-{next(_caches)}", {}))


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob-123")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("staff", password="pw-staff-123", is_staff=True)


def token_client(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def alice_api(alice):
    return token_client(alice)


@pytest.fixture
def bob_api(bob):
    return token_client(bob)


@pytest.fixture
def staff_api(staff):
    return token_client(staff)


def build_conversation(owner=None, title="Weather in Paris") -> Conversation:
    """user → agent (search, reasoning, cited message, artifact) → user → agent (no provenance
    recorded) → system."""
    conversation = store.create_conversation(title=title, owner=owner)
    add_user_turn(conversation, "What is the weather in Paris?")
    agent = add_turn(conversation, "agent", provider="anthropic",
                             model="claude-sonnet-4-20250514", status="streaming")
    store.append_events(agent, [
        EventRecord("hosted_activity", body=ActivityBody(
            "srvtoolu_01", "web_search", "completed", {"query": "paris weather"}, "2 results",
            ({"url": "https://meteo.example.fr/paris", "title": "Météo"},), ""),
            payload=Payload("anthropic", "anthropic.content_block", "2023-06-01",
                            {"type": "server_tool_use", "id": "srvtoolu_01",
                             "name": "web_search", "input": {"query": "paris weather"}})),
        EventRecord("reasoning", text="Let me check.", body=ReasoningBody()),
        EventRecord(
            "message", text="It is sunny in Paris today.",
            attributions=[
                AttributionRecord("https://meteo.example.fr/paris", "Météo", "sunny", 6, 11,
                                  replay=Payload("anthropic", "anthropic.citation",
                                                 "2023-06-01", CITATION)),
                AttributionRecord("https://news.example.com/today", "News"),
            ],
            payload=Payload("anthropic", "anthropic.content_block", "2023-06-01",
                            {"type": "text", "text": "It is sunny in Paris today."}),
        ),
        EventRecord("provider_artifact", body=ArtifactBody("mystery", "kept whole")),
    ])
    store.finish_turn(agent, status="complete", end_reason="end_turn")
    add_user_turn(conversation, "And tomorrow?")
    unknown = add_turn(conversation, "agent", status="streaming")
    store.append_events(unknown, [EventRecord("message", text="Probably rain.")])
    store.finish_turn(unknown, status="complete", end_reason="end_turn")
    system = add_turn(conversation, "system")
    store.append_events(system, [EventRecord("message", text="conversation closed")])
    conversation.refresh_from_db()
    return conversation


@pytest.fixture
def conversation(alice):
    return build_conversation(owner=alice)


# -- the recorded provider fixtures --------------------------------------------------------------

# Files that make ONE turn together: a response and its continuation.
CONTINUATIONS = {
    "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction1.continuation.sse.txt":
        "pydantic-ai__test_pause_turn_web_search_streaming_vcr.interaction0.pause_turn.sse.txt",
    "vercel-ai__anthropic-issue-10819-web-fetch-error.2.chunks.txt":
        "vercel-ai__anthropic-issue-10819-web-fetch-error.1.chunks.txt",
}


def fixture_turns() -> list[tuple[str, str, list[str]]]:
    """(provider, label, [file names]) for every turn the fixtures hold, one turn per response
    except continuations, which join the response they continue."""
    from tests.support import PROVIDER_FIXTURES

    if not PROVIDER_FIXTURES.exists():
        return []
    out = []
    for provider in ("anthropic", "openai", "google"):
        for path in sorted((PROVIDER_FIXTURES / provider).glob("*")):
            if path.name in CONTINUATIONS:
                continue
            names = [path.name] + [k for k, v in CONTINUATIONS.items() if v == path.name]
            out.append((provider, path.name, names))
    return out


def response_files(provider: str, names: list[str]) -> list[list]:
    """The turns of these files, each a list of ResponseFiles (cassettes may hold several
    independent requests: one turn each; a continuation file extends the previous turn)."""
    from conversations.ingest import ResponseFile
    from tests.support import recorded

    turns: list[list] = []
    for n, name in enumerate(names):
        for i, rec in enumerate(recorded(provider, name)):
            response = ResponseFile(f"{name}#{i}", rec.raw, rec.context)
            if n > 0 and i == 0:
                turns[-1].append(response)
            else:
                turns.append([response])
    return turns
