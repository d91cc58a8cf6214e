"""A 5,000-turn conversation in Debian's chromium: the window of turns, "Earlier turns" by
keyboard (with script) and as a plain link (without), deep links to a turn and to a source
outside the window, and a streaming turn at the end that does not make the page fetch the
turns it does not show."""

from __future__ import annotations

import re

import pytest

from bench.long import build_long_conversation
from conversations import store
from conversations.models import Turn
from tests.conversations.test_browser import ARTIFACTS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]

SHOWN = "Array.from(document.querySelectorAll('section.turn')).map(s => +s.dataset.index)"


@pytest.fixture
def long_conversation(client, django_user_model):
    user = django_user_model.objects.create_user("reader", password="pw-reader-123")
    conversation = build_long_conversation(5000, owner=user)
    store.open_turns(conversation, [store.NewTurn("agent", [], status=Turn.Status.STREAMING)])
    linked = {i: str(conversation.turns.get(index=i).pk) for i in (7, 1201)}
    client.force_login(user)
    return conversation, linked, client.cookies["sessionid"].value


def _context(browser, live_server, session, **options):
    context = browser.new_context(viewport={"width": 1100, "height": 900}, **options)
    host = live_server.url.split("//", 1)[1].split(":")[0]
    context.add_cookies([{"name": "sessionid", "value": session, "domain": host, "path": "/"}])
    return context


def test_window_earlier_turns_and_deep_links(live_server, long_conversation, browser):
    conversation, linked, session = long_conversation
    base = f"{live_server.url}/c/{conversation.pk}/"
    context = _context(browser, live_server, session)
    fragments: list[str] = []
    context.on("request", lambda r: fragments.append(r.url) if re.search(
        r"/turns/\d+/$", r.url) else None)
    page = context.new_page()
    assert page.goto(base).status == 200
    assert page.evaluate(SHOWN) == list(range(4951, 5001))

    # Keyboard: Tab to "Earlier turns", Enter; the 50 turns before come in above, and focus lands
    # on the newest of them.
    page.locator("body").focus()
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent.trim() === 'Earlier turns'"):
            break
    else:
        pytest.fail("'Earlier turns' is not reachable with the keyboard")
    page.keyboard.press("Enter")
    page.wait_for_selector('section.turn[data-index="4901"]')
    assert page.evaluate(SHOWN) == list(range(4901, 5001))
    assert page.evaluate("document.activeElement.dataset.index") == "4950"
    assert page.evaluate("document.getElementById('conversation').dataset.windowFrom") == "4901"
    page.locator("[data-window-earlier] a").scroll_into_view_if_needed()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "long-conversation-earlier.png"))

    # The page polls the state while a turn streams (no websocket on this test server): the
    # 4,900 turns it does not show are never fetched.
    page.wait_for_timeout(6500)
    outside = [u for u in fragments if int(u.rstrip("/").rsplit("/", 1)[1]) < 4901]
    assert outside == [], f"{len(outside)} turns outside the window were fetched"

    # A link to a turn far outside the window: the server renders the window that holds it.
    page.goto(f"{base}#turn-{linked[1201]}")
    page.wait_for_url(re.compile(r"\?turn="))
    page.wait_for_selector(f"#turn-{linked[1201]}")
    shown = page.evaluate(SHOWN)
    assert 1201 in shown and len(shown) == 50
    box = page.evaluate(f"document.getElementById('turn-{linked[1201]}')"
                        ".getBoundingClientRect().top")
    assert -1 < box < 900, "the linked turn is scrolled into view"  # (sub-pixel layout)
    assert page.locator("[data-window-later] a", has_text="Later turns").count() == 1

    # A citation's source anchor in another window works the same way.
    page.goto(f"{base}#src-{linked[7]}-1")
    page.wait_for_selector(f"#src-{linked[7]}-1")
    assert page.evaluate(SHOWN)[0] == 0
    page.screenshot(path=str(ARTIFACTS / "long-conversation-deep-link.png"))
    context.close()


def test_earlier_turns_without_script(live_server, long_conversation, browser):
    conversation, _, session = long_conversation
    context = _context(browser, live_server, session, java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{live_server.url}/c/{conversation.pk}/")
    page.get_by_role("link", name="Earlier turns").click()
    page.wait_for_url(re.compile(r"\?from=4901$"))
    indexes = page.locator("section.turn").evaluate_all("els => els.map(e => +e.dataset.index)")
    assert indexes == list(range(4901, 4951))
    page.get_by_role("link", name="Later turns").click()
    # The click starts a navigation; wait for the page it loads, not the one it leaves.
    page.wait_for_url(re.compile(r"\?from=4951$"))
    page.wait_for_selector('section.turn[data-index="4951"]')
    indexes = page.locator("section.turn").evaluate_all("els => els.map(e => +e.dataset.index)")
    assert indexes == list(range(4951, 5001))
    context.close()
