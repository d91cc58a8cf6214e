"""A shared page in Debian's chromium, opened by someone without an account: every XSS corpus
of ../shared/fixtures/security rendered through it executes nothing and fetches nothing from
elsewhere; axe finds no violation, light and dark; and a screenshot of a real one."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from conversations import sharing
from conversations.projections import import_document
from live import bundled
from tests.conversations.test_browser import ARTIFACTS, hostile_document
from tests.live.test_axe import SCHEMES, axe_source, summary  # noqa: F401 (a fixture)
from tests.rendering.test_security import CORPORA

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]

MAX_VECTOR = 2000  # characters of a vector kept (the longest are repetitions)


def corpus_document() -> dict[str, Any]:
    """Every vector of every corpus, once, in every untrusted field a shared page shows: a
    search's query, summary and sources, a message with its citations' titles, URLs and
    excerpts, reasoning, a tool call. A turn per corpus."""
    seen: set[str] = set()
    turns = []
    for index, (name, read) in enumerate(sorted(CORPORA.items())):
        events: list[dict[str, Any]] = []
        for vector in read():
            vector = vector[:MAX_VECTOR]
            if not vector.strip() or vector in seen or "\x00" in vector:
                continue
            seen.add(vector)
            seq = len(events)
            events += [
                {"id": str(uuid.uuid4()), "seq": seq + 1, "kind": "hosted_activity",
                 "activity": {"id": f"srv_{index}_{seq}", "name": "web_search",
                              "state": "completed", "input": {"query": vector},
                              "summary": vector[:200], "error_code": "",
                              "sources": [{"url": vector, "title": vector}]}},
                {"id": str(uuid.uuid4()), "seq": seq + 2, "kind": "message",
                 "text": vector, "incomplete": False, "attributions": [
                     {"source": {"url": vector, "title": vector}, "excerpt": vector,
                      "incomplete": False},
                     {"source": {"url": f"https://ok.example/{index}/{seq}", "title": vector},
                      "excerpt": vector, "incomplete": False,
                      "range": {"start": 0, "end": len(vector)}}]},
                {"id": str(uuid.uuid4()), "seq": seq + 3, "kind": "reasoning", "text": vector,
                 "redacted": False, "incomplete": False},
            ]
        turns.append({"id": str(uuid.uuid4()), "index": index, "role": "agent",
                      "status": "complete", "end_reason": "end_turn",
                      "created_at": "2026-11-29T10:00:00Z",
                      "agent": {"agentId": "anthropic:claude-x",
                                "model": {"provider": "anthropic", "model": "claude-x"}},
                      "events": events, "corpus": name})
    seq = 0
    for turn in turns:  # seqs run across the conversation
        turn.pop("corpus")
        for event in turn["events"]:
            seq += 1
            event["seq"] = seq
    return {"format": "turnscope.conversation", "version": 1, "projection": "portable",
            "conversation": {"id": str(uuid.uuid4()), "title": "<img src=x onerror=alert(1)>",
                             "created_at": "2026-11-29T10:00:00Z", "forked_from": None},
            "turns": turns}


def _anonymous(browser: Any, base: str) -> tuple[Any, Any, list[str], list[str]]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60000)
    dialogs: list[str] = []
    outside: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    context.on("request", lambda r: None if r.url.startswith(
        (base, "data:", "about:", "blob:")) else outside.append(r.url))
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(
        base) else route.abort())
    return context, page, dialogs, outside


@pytest.fixture
def shared_hostile(django_user_model):
    # Database work happens before Playwright starts its event loop in this thread.
    owner = django_user_model.objects.create_user("owner", password="pw-owner-123")
    tokens = []
    for doc in (hostile_document(), corpus_document()):
        conversation = import_document(doc, owner=owner)
        tokens.append(sharing.create(conversation, owner)[1])
    return tokens


def test_every_corpus_through_a_shared_page_executes_nothing(live_server, shared_hostile,
                                                             browser, settings):
    settings.TURNSCOPE_PAGE_TURNS = 50  # every corpus turn on the one page
    base = live_server.url
    context, page, dialogs, outside = _anonymous(browser, base)
    for token, turns in zip(shared_hostile, (1, len(CORPORA)), strict=True):
        response = page.goto(f"{base}/s/{token}/", wait_until="load")
        assert response.status == 200
        assert page.locator("section.turn").count() == turns
        assert response.headers["referrer-policy"] == "no-referrer"
        # Open everything a reader can open, and bring up source cards by hover and focus.
        page.evaluate("() => document.querySelectorAll('main details')"
                      ".forEach(d => { d.open = true; })")
        markers = page.locator(".cite-marker")
        assert markers.count() >= (10 if turns == 1 else 1000)
        for i in range(min(markers.count(), 24)):
            page.mouse.move(0, 0)  # the last card would cover the next marker
            markers.nth(i).hover(force=True)
            markers.nth(i).focus()
        page.wait_for_function("() => document.readyState === 'complete'")
        # The page's own script ran (it makes the source cards): a page that ran no script at
        # all would pass the checks below for nothing.
        assert page.evaluate("() => !!document.querySelector('.source-card')")
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(f"{base}/s/{shared_hostile[0]}/")
    page.screenshot(path=str(ARTIFACTS / "shared-hostile.png"), full_page=False)
    assert dialogs == [], f"dialogs fired: {dialogs[:5]}"
    assert outside == [], f"requests left the app: {outside[:5]}"
    context.close()


@pytest.fixture
def shared_sample(django_user_model, client):
    owner = django_user_model.objects.create_user("owner", password="pw-owner-123")
    [(_, conversation, _)] = bundled.load(owner, only=["anthropic-tides"])
    token = sharing.create(conversation, owner, expires="7d")[1]
    client.force_login(owner)
    return token, conversation.pk, client.cookies["sessionid"].value


AXE_RUN = """async () => {
  document.querySelectorAll('main details').forEach(d => { d.open = true; });
  const marker = document.querySelector('.cite-marker');
  if (marker) marker.focus();
  const r = await axe.run(document, {resultTypes: ['violations']});
  return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 200)}))}));
}"""


@pytest.mark.parametrize("scheme", SCHEMES)
def test_shared_pages_have_no_axe_violations(live_server, shared_sample, browser,
                                             axe_source, scheme):  # noqa: F811 (the fixture)
    """The shared page (anonymous), and the owner's Share form and list of shared links."""
    token, conversation, session = shared_sample
    host = live_server.url.split("//", 1)[1].split(":")[0]
    found = {}
    for path, signed_in in ((f"/s/{token}/", False), (f"/c/{conversation}/", True),
                            ("/shares/", True)):
        context = browser.new_context(viewport={"width": 1280, "height": 900},
                                      color_scheme=scheme)
        if signed_in:
            context.add_cookies([{"name": "sessionid", "value": session,
                                  "domain": host, "path": "/"}])
        page = context.new_page()
        page.set_default_timeout(20000)
        page.goto(f"{live_server.url}{path}")
        assert page.url == f"{live_server.url}{path}"  # not sent to the login page
        if path.startswith("/s/"):
            assert page.locator(".cite-marker").count() > 0
            assert page.locator(".composer, .turn-actions").count() == 0
        if path == "/shares/":
            assert page.locator("input[data-share-url]").input_value().endswith(f"/s/{token}/")
        if path.startswith("/c/"):  # the Share form, open
            page.locator("details.share > summary").click()
            assert page.locator("#share-expires").is_visible()
        ARTIFACTS.mkdir(exist_ok=True)
        name = path.strip("/").split("/")[0] or "list"
        page.screenshot(path=str(ARTIFACTS / f"share-{name}-{scheme}.png"), full_page=True)
        page.evaluate(axe_source)
        violations = page.evaluate(AXE_RUN)
        context.close()
        if violations:
            found[path] = violations
    assert not found, summary(found)
