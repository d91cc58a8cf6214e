"""Provider labels on the page, from real recordings: Gemini's sources by the site it names,
its redirect links marked, its search suggestions named in words; OpenAI's browsing actions
said as what they did, its redacted reasoning rows grouped, its tracking parameter out of
the links (and still in the payload)."""

from __future__ import annotations

import re

import pytest

from conversations.ingest import ResponseFile, ingest
from conversations.models import Event, ProviderPayload
from tests.support import recorded

pytestmark = pytest.mark.django_db


def _page(client, django_user_model, provider: str, name: str) -> tuple[str, object]:
    user = django_user_model.objects.create_user("reader", password="pw-reader-123")
    files = [ResponseFile(f"{name}#{i}", rec.raw, rec.context)
             for i, rec in enumerate(recorded(provider, name))][:1]
    conversation = ingest(provider, files, owner=user, title=name).conversation
    client.force_login(user)
    return client.get(f"/c/{conversation.pk}/").content.decode(), conversation


def test_gemini_sources_and_suggestions(client, django_user_model):
    page, _ = _page(client, django_user_model, "google",
                    "pydantic-ai__test_google_model_web_search_tool.yaml")
    sources = page[page.index('class="sources"'):]
    assert "vertexaisearch.cloud.google.com</span>" not in page  # never shown as the domain
    domains = re.findall(r'<span class="domain">([^<]+)</span>', sources)
    assert domains and all("vertexaisearch" not in d for d in domains)
    assert "via Google redirect link" in sources
    assert "Google Search suggestions" in page
    assert "google.search_entry_point</span>" not in page


def test_openai_page_actions_redacted_reasoning_and_tracking(client, django_user_model):
    page, conversation = _page(client, django_user_model, "openai",
                               "vercel-ai__openai-web-search-tool.1.chunks.txt")
    assert "Page opened: " in page
    assert "Searched the page for: " in page
    reasoning = re.findall(r"redacted by the provider[^<]*", page)
    assert len(reasoning) < Event.objects.filter(turn__conversation=conversation,
                                                 kind="reasoning").count()
    assert any("steps)" in r for r in reasoning)
    hrefs = re.findall(r'href="(https?://[^"]+)"', page)
    assert hrefs and not [h for h in hrefs if "utm_source=openai" in h]
    # the payload keeps what the provider sent
    stored = "".join(ProviderPayload.objects.filter(
        events__turn__conversation=conversation).values_list("value", flat=True))
    assert "utm_source=openai" in stored
