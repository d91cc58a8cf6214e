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
