"""A person's view of a hostile conversation, in Debian's chromium: nothing fires, nothing
leaves 127.0.0.1, and activating a citation marker focuses its source."""

from __future__ import annotations

import json
import uuid

import pytest

from conversations.projections import import_document
from tests.support import REPO, SECURITY_FIXTURES, shared_path

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]

ARTIFACTS = REPO / "artifacts"


def _vectors() -> dict[str, list[str]]:
    path = shared_path("fixtures", "security", "app_specific_vectors.json")
    by_field: dict[str, list[str]] = {}
    for vector in json.loads(path.read_text())["vectors"]:
        payload = vector.get("payload")
        if payload is None:
            payload = "".join(
                part if isinstance(part, str) else part.get("s", "") * int(part.get("n", 1))
                for part in vector.get("payload_parts", [])
            )
        by_field.setdefault(vector["field"], []).append(payload[:2000])
    polyglots = (SECURITY_FIXTURES / "payloadsallthethings" / "XSS_Polyglots.txt")
    by_field["assistant.markdown"] += polyglots.read_text().splitlines()[:16]
    return by_field


def hostile_document() -> dict:
    v = _vectors()
    events, seq = [], 0

    def nid() -> str:
        return str(uuid.uuid4())

    for i, query in enumerate(v["assistant.markdown"][:8]):
        seq += 1
        events.append({"id": nid(), "seq": seq, "kind": "hosted_activity", "activity": {
            "id": f"srv_{i}", "name": "web_search", "state": "completed",
            "input": {"query": query}, "summary": query[:80],
            "sources": [{"url": u, "title": t} for u, t in
                        zip(v["citation.url"][:5], v["citation.title"][:5], strict=False)],
            "error_code": ""}})
    safe = "https://example.org/page"
    for i, text in enumerate(v["assistant.markdown"]):
        seq += 1
        urls = v["citation.url"]
        titles = v["citation.title"]
        excerpts = v["citation.excerpt"]
        events.append({
            "id": nid(), "seq": seq, "kind": "message", "text": f"Claim {i}: {text}",
            "incomplete": False,
            "attributions": [
                {"source": {"url": safe if i == 0 else urls[i % len(urls)],
                            "title": titles[i % len(titles)]},
                 "excerpt": excerpts[i % len(excerpts)], "incomplete": i % 3 == 0},
            ],
        })
    for html in v["grounding.renderedContent"]:
        seq += 1
        events.append({"id": nid(), "seq": seq, "kind": "provider_artifact",
                       "type": "google.search_entry_point", "summary": "Search suggestions",
                       "display_html": html})
    return {
        "format": "turnscope.conversation", "version": 1, "projection": "portable",
        "conversation": {"id": nid(), "title": v["citation.title"][0],
                         "created_at": "2026-11-29T10:00:00Z", "forked_from": None},
        "turns": [{"id": nid(), "index": 0, "role": "agent", "status": "complete",
                   "end_reason": "end_turn", "created_at": "2026-11-29T10:00:00Z",
                   "agent": {"agentId": "anthropic:claude-x",
                             "model": {"provider": "anthropic", "model": "claude-x"}},
                   "events": events}],
    }


@pytest.fixture
def hostile(client, django_user_model):
    # Database work happens before Playwright starts its event loop in this thread.
    user = django_user_model.objects.create_user("viewer", password="pw-viewer-123")
    conversation = import_document(hostile_document(), owner=user)
    client.force_login(user)
    return conversation, client.cookies["sessionid"].value


def test_hostile_conversation_page(live_server, hostile, browser):
    conversation, session = hostile

    context = browser.new_context(viewport={"width": 1100, "height": 900})
    host = live_server.url.split("//", 1)[1].split(":")[0]
    context.add_cookies([{"name": "sessionid", "value": session, "domain": host, "path": "/"}])
    page = context.new_page()
    dialogs: list[str] = []
    outside: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    def watch(request) -> None:
        url = request.url
        if not url.startswith((live_server.url, "data:", "about:", "blob:")):
            outside.append(url)

    context.on("request", watch)
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(
        live_server.url) else route.abort())
    response = page.goto(f"{live_server.url}/c/{conversation.pk}/")
    assert response.status == 200
    page.wait_for_timeout(500)
    # Hover and focus every marker: cards must not execute anything either.
    markers = page.locator(".cite-marker")
    assert markers.count() >= 10
    for i in range(min(markers.count(), 12)):
        markers.nth(i).hover()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "hostile-conversation.png"), full_page=True)

    # Keyboard: tab to the first marker, activate it, the focused element is its source.
    page.locator("body").focus()
    for _ in range(200):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('cite-marker')"):
            break
    else:
        pytest.fail("no citation marker is reachable with the keyboard")
    target = page.evaluate("document.activeElement.getAttribute('href')")
    label = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert label and label.startswith("Source ")
    page.keyboard.press("Enter")
    page.wait_for_timeout(200)
    assert page.evaluate("'#' + document.activeElement.id") == target

    assert dialogs == [], f"dialogs fired: {dialogs}"
    assert outside == [], f"requests left the app: {outside}"
    context.close()
