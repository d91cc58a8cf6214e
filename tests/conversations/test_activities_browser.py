"""Hosted activities of the second recording set in Debian's chromium: each shows its label
in the reader's words, code runs their code, output and exit code, and images load as data:
images under the page's CSP (nothing blocked, nothing fetched from outside the app)."""

from __future__ import annotations

import pytest

from conversations.ingest import ResponseFile, ingest
from tests.support import REPO, shared_path

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]

ARTIFACTS = REPO / "artifacts"
FILES = {
    "connector": ("openai",
                  "pydantic-ai__test_openai_responses_model_mcp_server_tool_with_connector.json"),
    "image": ("openai",
              "pydantic-ai__test_openai_responses_code_execution_return_image_stream.sse.txt"),
    "generation": ("openai", "vercel-ai__azure-image-generation-tool.1.chunks.txt"),
    "tool_search": ("anthropic",
                    "pydantic-ai__test_anthropic_native_tool_search_streaming.interaction0.sse.txt"),
    "approval": ("openai", "vercel-ai__openai-mcp-tool-approval.1.chunks.txt"),
    "refusal": ("anthropic", "llm-anthropic__test_refusal_raises.sse.txt"),
    "bash": ("anthropic", "pydantic-ai__test_anthropic_code_execution_tool_stream.sse.txt"),
}


@pytest.fixture
def conversations(client, django_user_model):
    user = django_user_model.objects.create_user("reader", password="pw-reader-123")
    made = {}
    for key, (provider, name) in FILES.items():
        path = shared_path("fixtures", "providers-more", provider, name)
        made[key] = ingest(provider, [ResponseFile(name, path.read_bytes())], owner=user,
                           title=key).conversation
    client.force_login(user)
    return made, client.cookies["sessionid"].value


def test_new_activities_read_as_what_they_are(live_server, conversations, browser):
    made, session = conversations
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    host = live_server.url.split("//", 1)[1].split(":")[0]
    context.add_cookies([{"name": "sessionid", "value": session, "domain": host, "path": "/"}])
    outside: list[str] = []
    context.on("request", lambda r: None if r.url.startswith(
        (live_server.url, "data:", "about:", "blob:")) else outside.append(r.url))
    page = context.new_page()
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text)
            if "Content Security Policy" in m.text else None)
    ARTIFACTS.mkdir(exist_ok=True)

    def visit(key: str) -> None:
        response = page.goto(f"{live_server.url}/c/{made[key].pk}/")
        assert response.status == 200
        page.wait_for_timeout(300)
        page.screenshot(path=str(ARTIFACTS / f"activities-{key}.png"), full_page=True)

    def activity_text(name: str) -> list[str]:
        return page.locator(f'li.activity[data-activity="{name}"]').all_inner_texts()

    visit("connector")
    calls = activity_text("mcp_call")
    assert len(calls) == 2
    for text in calls:
        assert "MCP call search_events on Google Calendar — failed: 500" in text
        assert "An unknown error occurred while executing the tool." in text
    assert "Listed MCP tools on Google Calendar" in activity_text("mcp_list_tools")[0]

    visit("image")
    page.locator("li.activity details.activity-code summary").first.click()
    (run,) = activity_text("code_execution")
    assert "import matplotlib.pyplot as plt" in run
    image = page.locator("li.activity img.activity-image")
    assert image.count() == 1
    assert image.evaluate("i => i.complete && i.naturalWidth > 0 && i.src.startsWith('data:')")

    visit("generation")
    (generation,) = activity_text("image_generation")
    assert "Image generation — never finished" in generation
    assert page.locator("img.activity-image").evaluate("i => i.naturalWidth") == 1  # 1x1 PNG

    visit("tool_search")
    assert "Looked up tools: get_exchange_rate — completed" in activity_text("tool_search")[0]

    visit("approval")
    approval = activity_text("mcp_approval_request")[0]
    assert "MCP call create_short_url on Link shortener — waiting for approval" in approval
    assert "approval_request" in page.locator(".end-reason").inner_text()

    visit("refusal")
    refusal = page.locator("li.refusal").inner_text()
    assert "Refused by the provider" in refusal and "reasoning_extraction" in refusal
    assert "reverse engineering" in refusal

    visit("bash")
    page.locator("li.activity details summary").first.click()
    (bash,) = activity_text("code_execution")
    assert 'echo "65465-6544 * 65464-6+1.02255" | bc -l' in bash
    assert "exit code 0" in bash

    assert blocked == [], f"the CSP blocked: {blocked}"
    assert outside == [], f"requests left the app: {outside}"
    context.close()
