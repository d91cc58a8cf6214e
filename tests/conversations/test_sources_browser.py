"""The Sources pages in Debian's chromium: the charts drawn and coloured by the stylesheet in
light and dark (no CSP report: no inline script or style), nothing sideways at 360 px, and
sorting and drilling down by keyboard alone. Screenshots go to artifacts/."""

from __future__ import annotations

import pytest

from tests.api.conftest import build_conversation
from tests.conversations.test_source_report import _store
from tests.support import REPO

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]

ARTIFACTS = REPO / "artifacts"


@pytest.fixture
def session(client, django_user_model):
    user = django_user_model.objects.create_user("reader", password="pw-reader-123")
    _store(user)  # every shared recording: several providers and models
    build_conversation(owner=user)
    client.force_login(user)
    return client.cookies["sessionid"].value


def _open(browser, live_server, session, path, *, width, scheme):
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    host = live_server.url.split("//", 1)[1].split(":")[0]
    context.add_cookies([{"name": "sessionid", "value": session, "domain": host, "path": "/"}])
    page = context.new_page()
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text)
            if "Content Security Policy" in m.text else None)
    assert page.goto(f"{live_server.url}{path}").status == 200
    return context, page, blocked


# Every chart's labels, as drawn: a label left of the bars ends before the plot begins (pygal's
# own stylesheet anchored them; it is not served), and each legend entry lies inside the drawing.
LABELS_CLEAR = """() => {
  const bad = [];
  for (const svg of document.querySelectorAll('svg.chart-svg')) {
    const frame = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('.axis.x text, .axis.y text')) {
      const box = t.getBoundingClientRect();
      if (box.width && box.left < frame.left - 1) bad.push('outside: ' + t.textContent);
    }
    if (svg.querySelector('.horizontal')) {  // the categories on the left, the bars after them
      const bars = [...svg.querySelectorAll('.series .rect, .series rect')]
        .map(r => r.getBoundingClientRect().left);
      const left = Math.min(...bars);
      for (const t of svg.querySelectorAll('.axis.y text')) {
        const box = t.getBoundingClientRect();
        if (box.width && box.right > left + 1) bad.push('into the bars: ' + t.textContent);
      }
    }
    for (const t of svg.querySelectorAll('.legend text')) {
      const box = t.getBoundingClientRect();
      if (box.bottom > frame.bottom + 1) bad.push('legend cut: ' + t.textContent);
    }
  }
  return bad;
}"""


def test_charts_in_both_schemes_and_at_360px(live_server, session, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    fills = {}
    for name, width, scheme in (("light", 1100, "light"), ("dark", 1100, "dark"),
                                ("360px", 360, "light")):  # fmt: skip
        for path, label in (("/sources/", "domains"), ("/sources/models/", "models"),
                            ("/sources/urls/", "urls")):
            context, page, blocked = _open(browser, live_server, session, path, width=width,
                                           scheme=scheme)
            if label != "urls":
                chart = page.locator("svg.chart-svg").first
                box = chart.bounding_box()
                assert box and box["width"] > 200 and box["height"] > 80
                series = chart.locator(".series.color-0 .rect, .series.color-0 .line").first
                fills[(scheme, label)] = series.evaluate(
                    "e => getComputedStyle(e).fill + ' ' + getComputedStyle(e).stroke")
                assert page.evaluate(LABELS_CLEAR) == [], (path, name)
            overflow = page.evaluate("document.documentElement.scrollWidth")
            assert overflow <= width, (path, name, overflow)
            page.screenshot(path=str(ARTIFACTS / f"sources-{label}-{name}.png"),
                            full_page=True)
            assert blocked == [], blocked
            context.close()
    assert fills[("light", "models")] != fills[("dark", "models")]
    assert "rgb(0, 0, 0)" not in fills[("light", "domains")]  # coloured by the stylesheet


def test_sorting_and_drilling_down_with_the_keyboard(live_server, session, browser):
    context, page, _ = _open(browser, live_server, session, "/sources/", width=1100,
                             scheme="light")
    page.locator("th a", has_text="Conversations").focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**sort=conversations**")
    assert page.locator('th[aria-sort="descending"]').inner_text().startswith("Conversations")
    first = page.locator(".sources-table tbody th a").first
    domain = first.inner_text()
    first.focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**/sources/hosts/**")
    assert page.locator("h1").inner_text() == f"Sources on {domain}"
    page.locator(".citing-turn a").first.focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**/c/**")
    context.close()
