"""A failed turn shows the provider's own error: its code and message, on the page and in
both exports (the OpenAI recording: ``insufficient_quota``)."""

from __future__ import annotations

import pytest

from conversations.ingest import ResponseFile, ingest
from conversations.projections import export_document
from conversations.rendering import render_export
from tests.support import shared_path

pytestmark = pytest.mark.django_db

NAME = "vercel-ai__openai-error.1.chunks.txt"
MESSAGE = "You exceeded your current quota, please check your plan and billing details."


@pytest.fixture
def failed(client, django_user_model):
    path = shared_path("fixtures", "providers", "openai", NAME)
    user = django_user_model.objects.create_user("reader", password="pw-reader-123")
    conversation = ingest("openai", [ResponseFile(NAME, path.read_bytes())], owner=user,
                          title="quota").conversation
    client.force_login(user)
    return conversation


def test_the_page_shows_the_providers_code_and_message(client, failed):
    page = client.get(f"/c/{failed.pk}/").content.decode()
    assert "insufficient_quota" in page
    assert MESSAGE in page
    assert "This turn failed" in page


def test_the_exports_show_them_too(failed):
    import json

    doc = json.loads(export_document(failed))
    markdown = render_export(doc, "markdown")
    html = render_export(doc, "html")
    for text in (markdown, html):
        assert "insufficient_quota" in text and "You exceeded your current quota" in text
