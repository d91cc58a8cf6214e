"""What one tab does reaches the others (a real daphne, Debian's chromium): a rename, a new
conversation and a delete made in one tab show in another tab open on the conversation and in
one open on the list, without reloading either (``conversations.actions``, ``static/live.js``,
``static/list.js``)."""

from __future__ import annotations

import pytest

from tests.live import e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("announce-e2e")
    env = e2e.base_env(tmp)
    setup = e2e.prepare(env)
    server = e2e.Daphne(env, tmp / "daphne.log")
    manager, browser = e2e.chromium()
    yield {"setup": setup, "server": server, "browser": browser}
    browser.close()
    manager.stop()
    server.stop()


def tab(world, path):
    page = e2e.logged_in_page(world["browser"], world["server"], world["setup"]["session"])
    page.goto(world["server"].url + path)
    page.wait_for_function("() => document.querySelector('main').dataset.live === 'open'")
    return page


def test_a_rename_delete_and_new_conversation_reach_the_other_tabs(world):
    conversation = world["setup"]["watch"][1]
    acting = tab(world, f"/c/{conversation}/")
    watching = tab(world, f"/c/{conversation}/")
    listing = tab(world, "/")
    row = f'li.conversation-row[data-conversation-id="{conversation}"] .row-title'
    assert listing.text_content(row) == "watch 1"

    acting.click("details.rename summary")
    acting.fill("#rename-title", "## Tides, **renamed**")
    acting.click(".rename-form button[type=submit]")
    acting.wait_for_url(f"**/c/{conversation}/")
    watching.wait_for_function(
        "() => document.querySelector('.conversation-head h1').textContent === "
        "'Tides, renamed'")
    assert watching.title() == "Tides, renamed · Turnscope"
    assert watching.input_value("#rename-title") == "## Tides, **renamed**"
    listing.wait_for_function(f"() => document.querySelector('{row}').textContent === "
                              "'Tides, renamed'")

    new = tab(world, "/")
    new.click("form[action$='/new/'] button[type=submit]")
    new.wait_for_url("**/c/*/**")
    created = new.url.split("/c/")[1].split("/")[0]
    listing.wait_for_selector(
        f'ol.conversation-list > li.conversation-row:first-child[data-conversation-id='
        f'"{created}"]')

    acting.goto(f"{world['server'].url}/c/{conversation}/delete/")
    acting.click(".confirm-form button[type=submit]")
    acting.wait_for_url("**/")
    watching.wait_for_selector("[data-deleted-notice]")
    assert watching.evaluate("() => document.querySelector('main').dataset.deleted") == "yes"
    assert watching.is_disabled("#rename-title")
    listing.wait_for_selector(row, state="detached")
    assert listing.url == world["server"].url + "/"  # no reload: the same page, changed


def test_a_link_made_and_revoked_in_one_tab_reaches_the_shared_links_page(world):
    conversation = world["setup"]["watch"][2]
    links = tab(world, "/shares/")
    acting = tab(world, f"/c/{conversation}/")
    acting.click("details.share summary")
    acting.click(".share-form button[type=submit]")
    acting.wait_for_url("**/shares/**")
    share_row = acting.locator("li.share-row.new")
    share_id = share_row.get_attribute("id")
    links.wait_for_selector("[data-list-notice]")
    assert "1 new link" in links.text_content("[data-list-notice]")
    links.reload()  # now the page lists it
    links.wait_for_function("() => document.querySelector('main').dataset.live === 'open'")
    assert links.is_visible(f"#{share_id}")
    share_row.locator("form[action$='/revoke/'] button").click()
    acting.wait_for_url("**/shares/")
    links.wait_for_selector(f"#{share_id}", state="detached")


# Drops every announcement this page would get: what a page whose socket was down missed.
DEAF_TO_ACTIONS = """(() => {
  const Real = window.WebSocket;
  function Deaf(url, protocols) {
    const ws = protocols === undefined ? new Real(url) : new Real(url, protocols);
    let handler = null;
    Object.defineProperty(ws, 'onmessage', {set(fn) { handler = fn; }, get() { return handler; }});
    ws.addEventListener('message', (e) => {
      if (handler && !String(e.data).includes('"type":"conversation"')) handler.call(ws, e);
    });
    return ws;
  }
  Deaf.prototype = Real.prototype;
  Deaf.OPEN = Real.OPEN;
  window.WebSocket = Deaf;
})();"""


def test_a_page_that_missed_the_announcements_catches_up_when_it_reconnects(world):
    conversation = world["setup"]["watch"][3]
    server = world["server"]
    deaf = e2e.logged_in_page(world["browser"], server, world["setup"]["session"])
    deaf.add_init_script(DEAF_TO_ACTIONS)
    deaf.goto(f"{server.url}/c/{conversation}/")
    deaf.wait_for_function("() => document.querySelector('main').dataset.live === 'open'")
    acting = tab(world, f"/c/{conversation}/")
    acting.click("details.rename summary")
    acting.fill("#rename-title", "renamed meanwhile")
    acting.click(".rename-form button[type=submit]")
    acting.wait_for_url(f"**/c/{conversation}/")
    deaf.wait_for_timeout(500)
    assert deaf.text_content(".conversation-head h1") == "watch 3"  # it missed the rename
    deaf.evaluate("() => window.turnscopeLive.drop()")  # reconnects: hello has the title
    deaf.wait_for_function("() => document.querySelector('.conversation-head h1').textContent"
                           " === 'renamed meanwhile'")

    acting.goto(f"{server.url}/c/{conversation}/delete/")
    acting.click(".confirm-form button[type=submit]")
    acting.wait_for_url("**/")
    deaf.wait_for_timeout(500)
    assert deaf.query_selector("[data-deleted-notice]") is None  # it missed the delete
    deaf.evaluate("() => window.turnscopeLive.drop()")  # refused (4403), then the state: 404
    deaf.wait_for_selector("[data-deleted-notice]")
    assert "no longer here" in deaf.text_content("[data-deleted-notice]")
