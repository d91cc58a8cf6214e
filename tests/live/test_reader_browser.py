"""The reader's page in a real browser on a real daphne (issue 17): it follows a stream, keeps
its layout while a block commits, says "live" only while a turn streams; citation markers are
24 px targets joined to their word, Back returns to a marker, the source card is tied to its
marker and can be hovered, a tap previews first, a source links back to its text, and menus
close on Escape and outside clicks. Screenshots go to artifacts/reader/."""

from __future__ import annotations

import itertools
import time

import pytest

from tests.live import e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SHOTS = e2e.REPO / "artifacts" / "reader"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reader-e2e")
    env = e2e.base_env(tmp)
    setup = e2e.prepare(env)
    server = e2e.Daphne(env, tmp / "daphne.log")
    manager, browser = e2e.chromium()
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield {"setup": setup, "server": server, "browser": browser}
    browser.close()
    manager.stop()
    server.stop()


def page_for(world, *, width=1024, height=800, **options):
    context = world["browser"].new_context(viewport={"width": width, "height": height},
                                           **options)
    context.add_cookies([{"name": "sessionid", "value": world["setup"]["session"],
                          "domain": "127.0.0.1", "path": "/"}])
    page = context.new_page()
    page.set_default_timeout(20000)
    return page


def open_sample(world, slug, **options):
    page = page_for(world, **options)
    page.goto(f"{world['server'].url}/c/{world['setup']['samples'][slug]}/")
    page.wait_for_function("() => document.getElementById('conversation').dataset.live "
                           "=== 'open'")
    return page


def live_badge(page) -> str:
    return page.evaluate("() => getComputedStyle(document.querySelector('.live-status'), "
                         "'::before').content")


# -- streaming ---------------------------------------------------------------------------------

HEIGHTS_JS = """() => {
  window.__heights = [];
  const box = document.querySelector('[data-turns]');
  const sample = () => { window.__heights.push(box.getBoundingClientRect().height);
                         window.__sampling = requestAnimationFrame(sample); };
  sample();
}"""


def test_the_page_follows_a_stream_and_keeps_its_layout(world):
    server, conversation = world["server"], world["setup"]["watch"][0]
    page = page_for(world, width=1024, height=500)
    page.goto(f"{server.url}/c/{conversation}/")
    page.wait_for_function("() => document.getElementById('conversation').dataset.live "
                           "=== 'open'")
    assert live_badge(page) in ("none", "normal", '""')  # nothing streams yet
    page.evaluate(HEIGHTS_JS)
    server.post(f"/_e2e/run/{conversation}/anthropic-tides/?speed=2&coalesce=0.05")
    turn = e2e.wait_for_turn(server, conversation)
    page.wait_for_selector(f"#turn-{turn['id']}")
    page.wait_for_function("() => document.querySelector('main').dataset.streaming === 'yes'")
    assert "live" in live_badge(page)
    page.evaluate("() => window.scrollTo(0, document.documentElement.scrollHeight)")
    stored = e2e.wait_until_settled(page, server, conversation, turn["id"])
    assert stored["status"] == "complete"
    time.sleep(0.3)
    heights = page.evaluate("() => { cancelAnimationFrame(window.__sampling); "
                            "return window.__heights; }")
    gap = page.evaluate("() => { const el = document.scrollingElement; "
                        "return el.scrollHeight - el.scrollTop - el.clientHeight; }")
    page.screenshot(path=str(SHOTS / "followed-stream.png"))
    assert gap <= 2, f"the reader at the bottom fell {gap}px behind"
    drops = [before - after for before, after in itertools.pairwise(heights)]
    # A block that continues a paragraph is shown inside it while it streams: committing it
    # does not fold a separate paragraph back into the one before.
    assert max(drops) <= 12, f"the page jumped up by {max(drops)}px when a block committed"
    assert live_badge(page) in ("none", "normal", '""')  # finished: no longer "live"
    e2e.assert_converged(page, server, conversation, {turn["id"]: 0})


def test_a_reader_who_scrolled_up_is_left_in_place(world):
    server, conversation = world["server"], world["setup"]["watch"][1]
    page = page_for(world, width=1024, height=400)
    page.goto(f"{server.url}/c/{conversation}/")
    page.wait_for_function("() => document.getElementById('conversation').dataset.live "
                           "=== 'open'")
    server.post(f"/_e2e/run/{conversation}/anthropic-tides/?speed=2&coalesce=0.05")
    turn = e2e.wait_for_turn(server, conversation)
    page.wait_for_function("() => document.documentElement.scrollHeight > 800")
    page.evaluate("() => window.scrollTo(0, 100)")
    e2e.wait_until_settled(page, server, conversation, turn["id"])
    assert page.evaluate("() => window.scrollY") == 100


# -- markers -----------------------------------------------------------------------------------

ORPHANS_JS = """() => {
  // A marker shares its line with the character before it (skipping the word joiner).
  const out = [];
  for (const m of document.querySelectorAll('.message .cite-marker')) {
    const walker = document.createTreeWalker(m.closest('.message'), NodeFilter.SHOW_TEXT);
    let prev = null, node;
    while ((node = walker.nextNode())) {
      if (m.contains(node)) break;
      if (node.data.replace(/[\\u2060\\s]/g, '')) prev = node;
    }
    if (!prev) continue;
    const text = prev.data.replace(/[\\u2060\\s]+$/, '');
    if (m.previousElementSibling && m.previousElementSibling.classList.contains('cite-marker')
        && m.previousElementSibling.contains(prev)) continue;
    const r = document.createRange();
    r.setStart(prev, text.length - 1); r.setEnd(prev, text.length);
    const a = r.getClientRects(), b = m.getClientRects();
    if (!a.length || !b.length) continue;
    const ch = a[a.length - 1], mk = b[0];
    if (mk.top >= ch.bottom - 1 || mk.bottom <= ch.top + 1) out.push(m.textContent + ' after ' +
                                                                   JSON.stringify(text.slice(-12)));
  }
  return out;
}"""

SIZES_JS = """() => [...document.querySelectorAll('.message .cite-marker')].map(m => {
  const r = m.getBoundingClientRect(); return [r.width, r.height]; })"""


@pytest.mark.parametrize("width", [360, 390, 1024])
def test_markers_are_touch_sized_and_never_orphaned(world, width):
    for slug in ("gemini-lighthouses", "anthropic-tides", "openai-sourdough"):
        page = open_sample(world, slug, width=width)
        assert page.evaluate(ORPHANS_JS) == [], (slug, width)
        sizes = page.evaluate(SIZES_JS)
        assert sizes, slug
        assert all(w >= 24 and h >= 24 for w, h in sizes), (slug, sizes)
        if slug == "gemini-lighthouses":
            page.screenshot(path=str(SHOTS / f"gemini-{width}.png"), full_page=True)
        page.context.close()


def test_back_after_a_marker_returns_to_it(world):
    page = open_sample(world, "gemini-lighthouses")
    start = page.url
    marker = page.locator(".message .cite-marker").nth(1)
    marker.scroll_into_view_if_needed()
    marker.click()
    assert "#src-" in page.url
    assert page.evaluate("() => document.activeElement.matches('.sources li')")
    page.go_back()
    page.wait_for_function("() => document.activeElement.classList.contains('cite-marker')")
    assert page.url == start  # still on the page, not the page before it
    assert page.evaluate("() => document.activeElement === "
                         "document.querySelectorAll('.message .cite-marker')[1]")


def test_the_card_is_tied_to_its_marker_and_can_be_hovered(world):
    page = open_sample(world, "anthropic-tides")
    marker = page.locator(".message .cite-marker").first
    marker.focus()
    card = page.locator("#source-card")
    assert card.is_visible()
    assert marker.get_attribute("aria-describedby") == "source-card"
    number = marker.get_attribute("data-source")
    excerpt = page.locator(f".turn.agent .sources li[data-source='{number}']").get_attribute(
        "data-excerpt")
    assert excerpt and excerpt in card.text_content()
    page.evaluate("() => document.activeElement.blur()")
    marker.hover()
    box = card.bounding_box()
    page.mouse.move(box["x"] + 10, box["y"] + 4, steps=4)  # over the gap and onto the card
    time.sleep(0.6)
    assert card.is_visible(), "the card closed before the pointer reached it"
    page.screenshot(path=str(SHOTS / "card.png"))
    page.mouse.move(5, 5)
    page.wait_for_function("() => document.getElementById('source-card').hidden")
    assert marker.get_attribute("aria-describedby") is None


def test_a_tap_previews_before_it_goes(world):
    page = open_sample(world, "gemini-lighthouses", width=390, height=800, has_touch=True,
                       is_mobile=True)
    start = page.url
    marker = page.locator(".message .cite-marker").first
    marker.scroll_into_view_if_needed()
    marker.tap()
    assert page.locator("#source-card").is_visible()
    assert page.url == start
    page.screenshot(path=str(SHOTS / "tap-preview-390.png"))
    marker.tap()
    page.wait_for_function("() => location.hash.startsWith('#src-')")


def test_a_source_links_back_to_the_text_citing_it(world):
    page = open_sample(world, "openai-sourdough")
    back = page.locator(".sources .cite-back").nth(1)
    number = back.get_attribute("data-source")
    back.click()
    assert page.evaluate("(n) => document.activeElement.matches("
                         "'.cite-marker[data-source=\"' + n + '\"]')", number)


def test_escape_and_an_outside_click_close_the_export_menu(world):
    page = open_sample(world, "openai-sourdough")
    menu = page.locator("details[data-menu]")
    menu.locator("summary").click()
    assert menu.get_attribute("open") is not None
    page.keyboard.press("Escape")
    assert menu.get_attribute("open") is None
    assert page.evaluate("() => document.activeElement.matches('details[data-menu] summary')")
    menu.locator("summary").click()
    assert menu.get_attribute("open") is not None
    page.locator("h1").click()
    assert menu.get_attribute("open") is None


# -- the list ----------------------------------------------------------------------------------

FILTERS_JS = """() => {
  const input = document.querySelector('.filters input[name=q]');
  const button = document.querySelector('.filters button[type=submit]');
  const style = getComputedStyle(input);
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = style.font;
  const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const b = button.getBoundingClientRect(), i = input.getBoundingClientRect();
  return {placeholder: ctx.measureText(input.placeholder).width, room: room,
          buttonLines: Math.round(b.height / parseFloat(getComputedStyle(button).lineHeight || 20)),
          buttonHeight: b.height, inputHeight: i.height, sameRow: Math.abs(b.top - i.top) < 4};
}"""


@pytest.mark.parametrize("width", [360, 1280])
def test_the_search_placeholder_fits_and_the_filter_button_stays_whole(world, width):
    page = page_for(world, width=width)
    page.goto(f"{world['server'].url}/")
    got = page.evaluate(FILTERS_JS)
    assert got["placeholder"] <= got["room"], got
    assert got["buttonHeight"] <= got["inputHeight"] + 4, got  # one line of text
    if width == 1280:
        assert got["sameRow"], got
    page.screenshot(path=str(SHOTS / f"list-{width}.png"))


# -- the ledger --------------------------------------------------------------------------------


@pytest.mark.parametrize(("scheme", "width"), [("light", 1024), ("dark", 1024), ("light", 360)])
def test_the_research_ledger_opens_under_the_answer(world, scheme, width):
    page = open_sample(world, "openai-sourdough", width=width, color_scheme=scheme)
    ledger = page.locator("details.ledger")
    assert ledger.get_attribute("open") is None  # collapsed until asked for
    ledger.locator("summary").focus()
    page.keyboard.press("Enter")
    assert ledger.get_attribute("open") is not None
    text = " ".join(ledger.inner_text().split())
    assert "Searched, in order" in text and "Page opened" in text and "Cited" in text
    assert "not opened (cited from the search results)" in text
    ledger.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"ledger-{scheme}-{width}.png"), full_page=True)
    ref = ledger.locator(".ledger-ref").first
    ref.click()
    assert page.evaluate("() => document.activeElement.matches('.sources li') || "
                         "location.hash.startsWith('#src-')")
