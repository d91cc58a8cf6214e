"""The proxy's other hosts (``upstream.hosts``): Azure OpenAI, Vertex AI (Gemini and Claude)
and named OpenAI-compatible upstreams, each through its official SDK against the recorded
upstream: the app's result through the proxy equals its result direct, the request reaches the
upstream unchanged (credentials included), the turn is recorded as the service that served it,
and the credentials are kept nowhere."""

from __future__ import annotations

from typing import Any

import pytest

from conversations.models import Event, ProviderPayload, Turn
from live.models import Recording
from tests.proxy.conftest import wait_recorded
from tests.proxy.sdk import PROMPT, outcome
from tests.support import FRESH_FIXTURES
from upstream import hosts
from upstream.recorded import reply

pytestmark = pytest.mark.django_db(transaction=True)

AZURE_KEY = "0123456789abcdef0123456789abcdef"  # Azure's keys are 32 hex digits: no known shape
GOOGLE_TOKEN = "ya29.PLANTEDvertexTOKEN0123456789abcdefghij"
XAI_KEY = "xai-PLANTEDxaiKEY0123456789abcdefghijklmnopqrstuvwxyz"
SECRETS = (AZURE_KEY, GOOGLE_TOKEN, XAI_KEY)


@pytest.fixture
def hosted(upstream, settings):
    """The recorded upstream as Azure's and Vertex AI's endpoint and as a named upstream."""
    settings.TURNSCOPE_UPSTREAM = {**settings.TURNSCOPE_UPSTREAM, "azure": upstream.url,
                                   "vertex": upstream.url}
    settings.TURNSCOPE_UPSTREAMS = {"xai": upstream.url}
    return upstream


def _fixture(folder, provider: str, name: str) -> bytes:
    path = folder / provider / name
    if not path.exists():
        pytest.skip(f"{path} is absent (tests read ../shared in place)")
    return path.read_bytes()


def _dump(value: Any) -> Any:
    dumped = value.model_dump(mode="json", exclude_none=False)
    if isinstance(dumped, dict):
        dumped.pop("sdk_http_response", None)
    return dumped


def _both(upstream, raw_provider: str, raw: bytes, ask) -> tuple[Any, Any]:
    """The app's outcome direct and through the proxy (the same recorded reply to each)."""
    served = reply(raw_provider, raw)
    upstream.add(served, served)
    return ask(direct=True), ask(direct=False)


def _recorded_turn() -> Turn:
    wait_recorded()
    [turn] = Turn.objects.filter(role=Turn.Role.AGENT)
    return turn


def _nothing_kept(*secrets: str) -> None:
    kept = [*Recording.objects.values_list("responses", flat=True),
            *ProviderPayload.objects.values_list("value", flat=True),
            *Event.objects.values_list("text", flat=True),
            *Event.objects.values_list("body", flat=True)]
    for secret in secrets:
        assert not [k for k in kept if secret in k]


def test_azure_openai_chat_through_the_proxy(hosted, proxy_url, token):
    import openai

    body = (b'{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini",'
            b'"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant",'
            b'"content":"Tides come twice a day.","annotations":[{"type":"url_citation",'
            b'"url_citation":{"url":"https://tides.example/","title":"Tides","start_index":0,'
            b'"end_index":5}}]}}],"usage":{"prompt_tokens":3,"completion_tokens":5,'
            b'"total_tokens":8}}')

    def ask(direct: bool) -> Any:
        endpoint = hosted.url if direct else f"{proxy_url}/proxy/azure"
        client = openai.AzureOpenAI(
            api_key=AZURE_KEY, api_version="2024-10-21", azure_endpoint=endpoint,
            azure_deployment="my-gpt", max_retries=0, timeout=30,
            default_headers={} if direct else {"X-Turnscope-Token": token})
        return outcome(lambda: _dump(client.chat.completions.create(
            model="my-gpt", messages=[{"role": "user", "content": PROMPT}])))

    direct, proxied = _both(hosted, "openai", body, ask)
    assert proxied == direct and direct[0] == "ok"
    first, second = hosted.requests
    assert second.path == first.path == "/openai/deployments/my-gpt/chat/completions"
    assert second.query == first.query == "api-version=2024-10-21"
    assert second.header("api-key") == AZURE_KEY  # passed through, as the app sent it
    assert hosted.sent[1] == hosted.sent[0]
    turn = _recorded_turn()
    assert (turn.provider, turn.model) == ("azure", "gpt-4o-mini")
    assert turn.events.filter(kind="message").get().attributions.get().url == (
        "https://tides.example/")
    _nothing_kept(*SECRETS)


RESPONSES_BODY = (
    b'{"id":"resp_1","object":"response","model":"gpt-4.1","status":"completed","output":['
    b'{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search",'
    b'"query":"tides"}},{"type":"message","id":"msg_1","role":"assistant","status":"completed",'
    b'"content":[{"type":"output_text","text":"Twice a day.","annotations":[]}]}],'
    b'"usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7}}')


@pytest.mark.parametrize("flavour", ["api-version", "v1"])
def test_azure_openai_responses_through_the_proxy(hosted, proxy_url, token, flavour):
    import openai

    def ask(direct: bool) -> Any:
        endpoint = hosted.url if direct else f"{proxy_url}/proxy/azure"
        headers = {} if direct else {"X-Turnscope-Token": token}
        if flavour == "v1":  # Azure's v1 API: the plain OpenAI client at <endpoint>/openai/v1
            client: Any = openai.OpenAI(api_key=AZURE_KEY, base_url=f"{endpoint}/openai/v1/",
                                        max_retries=0, timeout=30, default_headers=headers)
        else:
            client = openai.AzureOpenAI(api_key=AZURE_KEY, api_version="2025-03-01-preview",
                                        azure_endpoint=endpoint, max_retries=0, timeout=30,
                                        default_headers=headers)
        return outcome(lambda: _dump(client.responses.create(model="gpt-4.1", input=PROMPT)))

    direct, proxied = _both(hosted, "openai", RESPONSES_BODY, ask)
    assert proxied == direct and direct[0] == "ok"
    first, second = hosted.requests
    assert second.path == first.path
    assert second.path == ("/openai/v1/responses" if flavour == "v1" else "/openai/responses")
    turn = _recorded_turn()
    assert (turn.provider, turn.model) == ("azure", "gpt-4.1")
    assert turn.events.filter(kind="hosted_activity").exists()
    _nothing_kept(*SECRETS)


def test_claude_on_vertex_through_the_proxy(hosted, proxy_url, token):
    from anthropic import AnthropicVertex

    body = (b'{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",'
            b'"content":[{"type":"text","text":"Twice a day."}],"stop_reason":"end_turn",'
            b'"usage":{"input_tokens":3,"output_tokens":4}}')

    def ask(direct: bool) -> Any:
        root = hosted.url if direct else f"{proxy_url}/proxy/vertex"
        client = AnthropicVertex(
            region="us-east5", project_id="my-project", access_token=GOOGLE_TOKEN,
            base_url=f"{root}/v1", max_retries=0, timeout=30,
            default_headers={} if direct else {"X-Turnscope-Token": token})
        return outcome(lambda: _dump(client.messages.create(
            model="claude-sonnet-4-5@20250929", max_tokens=256,
            messages=[{"role": "user", "content": PROMPT}])))

    direct, proxied = _both(hosted, "anthropic", body, ask)
    assert proxied == direct and direct[0] == "ok"
    first, second = hosted.requests
    assert second.path == first.path == (
        "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/"
        "claude-sonnet-4-5@20250929:rawPredict")
    assert second.header("authorization") == f"Bearer {GOOGLE_TOKEN}"
    turn = _recorded_turn()
    assert (turn.provider, turn.model) == ("vertex", "claude-sonnet-4-5")
    assert [e.text for e in turn.events.all()] == ["Twice a day."]
    _nothing_kept(*SECRETS)


def test_gemini_on_vertex_through_the_proxy(hosted, proxy_url, token):
    import google.oauth2.credentials
    from google import genai
    from google.genai import types

    body = (b'{"candidates":[{"content":{"role":"model","parts":[{"text":"Twice a day."}]},'
            b'"finishReason":"STOP"}],"modelVersion":"gemini-2.5-flash","responseId":"r1",'
            b'"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4}}')

    def ask(direct: bool) -> Any:
        root = hosted.url if direct else f"{proxy_url}/proxy/vertex"
        credentials = google.oauth2.credentials.Credentials(token=GOOGLE_TOKEN)
        client = genai.Client(
            vertexai=True, project="my-project", location="europe-west4",
            credentials=credentials, http_options=types.HttpOptions(
                base_url=root, timeout=30_000,
                headers={} if direct else {"X-Turnscope-Token": token}))
        return outcome(lambda: _dump(client.models.generate_content(
            model="gemini-2.5-flash", contents=PROMPT)))

    direct, proxied = _both(hosted, "google", body, ask)
    assert proxied == direct and direct[0] == "ok"
    first, second = hosted.requests
    assert second.path == first.path
    assert second.path.endswith("/projects/my-project/locations/europe-west4/publishers/"
                                "google/models/gemini-2.5-flash:generateContent")
    assert second.header("authorization") == f"Bearer {GOOGLE_TOKEN}"
    turn = _recorded_turn()
    assert (turn.provider, turn.model) == ("vertex", "gemini-2.5-flash")
    _nothing_kept(*SECRETS)


def test_a_named_upstream_records_as_its_name(hosted, proxy_url, token):
    import openai

    raw = _fixture(FRESH_FIXTURES, "openai", "vercel-ai__xai-x-search-tool.chunks.txt")

    def ask(direct: bool) -> Any:
        root = hosted.url if direct else f"{proxy_url}/proxy/xai"
        client = openai.OpenAI(api_key=XAI_KEY, base_url=f"{root}/v1", max_retries=0,
                               timeout=30,
                               default_headers={} if direct else {"X-Turnscope-Token": token})
        return outcome(lambda: [_dump(e) for e in client.responses.create(
            model="grok-4-fast-reasoning", input=PROMPT, stream=True,
            tools=[{"type": "x_search"}])])  # type: ignore[list-item]

    direct, proxied = _both(hosted, "openai", raw, ask)
    assert proxied == direct and direct[0] == "ok"
    assert hosted.requests[1].path == "/v1/responses"
    assert hosted.requests[1].header("authorization") == f"Bearer {XAI_KEY}"
    turn = _recorded_turn()
    assert (turn.provider, turn.model) == ("xai", "grok-4-fast-reasoning")
    assert turn.end_reason == "end_turn"
    names = set(turn.events.filter(kind="hosted_activity").values_list("activity_name",
                                                                       flat=True))
    assert names == {"x_search", "web_search", "view_media"}
    assert not turn.events.filter(kind="tool_call_request").exists()
    # replayed from its recording, it is still xAI's (the name is kept with the bytes)
    [kept] = Recording.objects.get(turn=turn).response_list
    assert kept["served_by"] == "xai"
    _nothing_kept(*SECRETS)


def test_unknown_and_unconfigured_prefixes_are_404_and_forward_nothing(upstream, proxy_url,
                                                                       token, settings):
    import httpx

    settings.TURNSCOPE_UPSTREAM = {**settings.TURNSCOPE_UPSTREAM, "azure": ""}
    settings.TURNSCOPE_UPSTREAMS = {}
    for prefix in ("azure", "xai", "nope"):
        response = httpx.post(f"{proxy_url}/proxy/{prefix}/v1/chat/completions", json={},
                              headers={"X-Turnscope-Token": token})
        assert response.status_code == 404
        assert "/proxy/vertex" in response.json()["error"]["message"]
    assert upstream.requests == []


def test_the_upstreams_setting_is_checked():
    from django.core.exceptions import ImproperlyConfigured

    assert hosts.parse_upstreams(" xai=https://api.x.ai/ , groq=https://api.groq.com/openai") == {
        "xai": "https://api.x.ai", "groq": "https://api.groq.com/openai"}
    assert hosts.parse_upstreams("") == {}
    for bad in ("openai=https://x.example", "t=https://x.example", "Bad=https://x.example",
                "xai", "xai=ftp://x.example", "xai=https://a.example,xai=https://b.example",
                "xai=https://x.example/?key=1"):
        with pytest.raises(ImproperlyConfigured):
            hosts.parse_upstreams(bad)


def test_the_new_hosts_credentials_are_redacted_wherever_they_would_show():
    from guards.redaction import redact_log_line, redact_text

    for line in (f"api-key: {AZURE_KEY}", f"Authorization: Bearer {GOOGLE_TOKEN}",
                 f"calling with {GOOGLE_TOKEN} now", f"key {XAI_KEY}",
                 "pplx-PLANTEDperplexityKEY0123456789abcdefgh", f'{{"api-key": "{AZURE_KEY}"}}',
                 f"/proxy/azure/openai/v1/responses?api-key={AZURE_KEY}"):
        for redact in (redact_text, redact_log_line):
            cleaned = redact(line)
            assert "[REDACTED]" in cleaned
            assert not [s for s in (*SECRETS, "pplx-PLANTED") if s in cleaned], cleaned
