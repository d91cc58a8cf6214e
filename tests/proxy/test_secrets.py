"""Provider credentials pass through the proxy and are never stored, logged or shown."""

from __future__ import annotations

import logging

import pytest
from django.apps import apps
from django.db import connection

from conversations.models import Conversation
from conversations.projections import export_json
from live import bundled
from proxy.app import redacted_path
from tests.proxy import sdk
from tests.proxy.cases import Case
from tests.proxy.conftest import ANTHROPIC_KEY, GOOGLE_KEY, OPENAI_KEY, wait_recorded
from upstream.recorded import reply

pytestmark = pytest.mark.django_db(transaction=True)

PLANTED = (ANTHROPIC_KEY, OPENAI_KEY, GOOGLE_KEY)


def database_text() -> str:
    """Every row of every table, as text."""
    out = []
    with connection.cursor() as cursor:
        for model in apps.get_models():
            table = connection.ops.quote_name(model._meta.db_table)
            cursor.execute(f"SELECT * FROM {table}")
            out.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(out)


def test_planted_keys_are_forwarded_and_kept_nowhere(upstream, proxy_url, token, caplog):
    caplog.set_level(logging.DEBUG)
    samples = {s.provider: s for s in bundled.samples()}
    for provider in ("anthropic", "openai", "google"):
        upstream.add(reply(provider, samples[provider].responses[0].raw.encode()))
    headers = {"X-Turnscope-Token": token}
    for provider, model in (("anthropic", "claude-sonnet-4-6"), ("openai", "gpt-5-mini"),
                            ("google", "gemini-2.5-pro")):
        result = sdk.call(Case("x", provider, b"", True, model=model),
                          f"{proxy_url}/proxy/{provider}", headers)
        assert result[0] == "ok", result
    # and Gemini's key in the URL, as some clients send it
    import httpx

    upstream.add(reply("google", samples["google"].responses[0].raw.encode()))
    with httpx.Client() as http:
        response = http.post(
            f"{proxy_url}/proxy/google/v1beta/models/gemini-2.5-pro:streamGenerateContent"
            f"?alt=sse&key={GOOGLE_KEY}", headers=headers,
            content=b'{"contents": [{"role": "user", "parts": [{"text": "Lighthouses?"}]}]}')
    assert response.status_code == 200
    wait_recorded()

    sent = [r.headers for r in upstream.requests]
    assert ("x-api-key", ANTHROPIC_KEY) in sent[0] or (
        "authorization", f"Bearer {ANTHROPIC_KEY}") in sent[0]
    assert ("authorization", f"Bearer {OPENAI_KEY}") in sent[1]
    assert ("x-goog-api-key", GOOGLE_KEY) in sent[2]
    assert upstream.requests[3].params["key"] == [GOOGLE_KEY]
    assert all(not k.startswith("x-turnscope") for headers in sent for k, _ in headers)

    assert Conversation.objects.count() == 4
    stored = database_text()
    exports = b"".join(export_json(c, "native") for c in Conversation.objects.all()).decode()
    logged = caplog.text
    for key in PLANTED:
        assert key not in stored
        assert key not in exports
        assert key not in logged
    assert "[REDACTED]" in stored  # the ?key= of the recorded endpoint URL


def test_access_log_lines_lose_path_tokens_and_keys():
    line = f"POST /proxy/t/abc123/google/v1beta/models/x:generateContent?key={GOOGLE_KEY}"
    assert redacted_path(line) == ("POST /proxy/t/[REDACTED]/google/v1beta/models/"
                                   "x:generateContent?key=[REDACTED]")
