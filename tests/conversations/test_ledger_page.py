"""The research ledger and integrity marks on the conversation page and in the API."""

from __future__ import annotations

import html as htmllib
import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from tests.conversations.test_views import ingested

pytestmark = pytest.mark.django_db

OPENAI = "vercel-ai__openai-web-search-tool.1.chunks.txt"
VERTEX = ("pydantic-ai__test_google_vertex_tool_combination_omits_include_server_side_tool"
          "_invocations.yaml")
INTERACTIONS = "vercel-ai__interactions-google-search.chunks.txt"


@pytest.fixture
def alice(client):
    user = User.objects.create_user("alice", password="pw-alice-123")
    client.force_login(user)
    return user


def _ledger(page: str) -> str:
    match = re.search(r'<details class="ledger".*?</details>', page, re.S)
    assert match, "no ledger panel"
    return htmllib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", match.group(0))))


def test_the_ledger_lists_searches_pages_opened_and_cited_sources(client, alice):
    s = ingested(alice, "openai", OPENAI)
    page = client.get(reverse("conversation-detail", args=[s.conversation.pk])).content.decode()
    text = _ledger(page)
    assert "Research ledger · 2 searches · 4 pages opened · 7 sources cited" in text
    assert text.index("tech news today December 5 2025") < text.index("site:theverge.com")
    assert "10 results → cited [5] [6] [7]" in text
    assert "Searched the page for vercel in" in text
    # Returned by a search and cited from its results: said, not flagged (Anthropic's and
    # OpenAI's searches return the pages' text or snippets with their results).
    assert "returned by search 2 · not opened (cited from the search results)" in text
    assert "cited without being searched or opened" not in text
    assert "could not be placed" not in page  # every range matched


def test_repaired_citations_are_marked_and_counted(client, alice):
    s = ingested(alice, "google", VERTEX, 1)
    page = client.get(reverse("conversation-detail", args=[s.conversation.pk])).content.decode()
    assert page.count("cite-marker cite-repaired") >= 1
    assert "9 citations placed by their quoted text" in page


def test_a_search_with_no_grounding_data_is_flagged(client, alice):
    s = ingested(alice, "google", INTERACTIONS)
    page = client.get(reverse("conversation-detail", args=[s.conversation.pk])).content.decode()
    assert "1 search ran with no grounding data returned" in page
    assert "no grounding data returned" in _ledger(page)


def test_the_api_carries_the_ledger_and_integrity(client, alice):
    s = ingested(alice, "google", VERTEX, 1)
    doc = client.get(f"/api/v1/conversations/{s.conversation.pk}").json()
    agent = next(t for t in doc["turns"] if t["role"] == "agent")
    assert agent["ledger"]["integrity"]["repaired"] == 9
    marks = [a.get("integrity") for e in agent["events"] if e["kind"] == "message"
             for a in e["attributions"]]
    assert marks.count("repaired") == 9 and marks.count("exact") == 7


def test_a_source_no_search_returned_and_no_fetch_opened_is_flagged(client, alice):
    from conversations import store
    from conversations.models import Turn
    from streams.builder import AttributionRecord, EventRecord
    from tests.support import add_turn, add_user_turn

    conversation = store.create_conversation(title="from nowhere", owner=alice)
    add_user_turn(conversation, "Why?")
    add_turn(conversation, Turn.Role.AGENT, EventRecord("message", text="Tides rise.",
             attributions=[AttributionRecord("https://nowhere.example/", "Nowhere", "", 0, 5)]),
             provider="anthropic", model="claude-test-1")
    page = client.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    text = _ledger(page)
    assert "returned by no search" in text
    assert "cited without being searched or opened" in text
