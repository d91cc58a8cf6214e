"""Rich markdown as a reader sees it, in Debian's chromium: math drawn as MathML, code
highlighted in both colour schemes with a keyboard-usable copy button, task checkboxes,
aligned table columns whose words stay whole at 360 px, citations around all of it; nothing
blocked by the CSP and nothing fetched from outside. Screenshots (light, dark, 360 px) go to
``artifacts/`` (gitignored)."""

from __future__ import annotations

import uuid

import pytest

from conversations.projections import import_document
from tests.support import REPO

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]

ARTIFACTS = REPO / "artifacts"

TEXT = """Rainfall trends over the basin, in brief.

The runoff ratio is $r = \\frac{Q}{P}$, with a thin space in $10\\,\\mathrm{mm}$; the yearly
balance is \\(P = Q + E + \\Delta S\\). The pull is weakest in late summer.

$$
\\bar{x} = \\frac{1}{n} \\sum_{i=1}^{n} x_i
$$

| Station | Precipitation | Temperature |
|:--------|:-------------:|------------:|
| Northbridge | 1,204 mm | 11.2 °C |
| Eastmoor | 987 mm | 12.9 °C |

- [x] gauges checked
- [ ] reservoir levels

```python
def runoff_ratio(q: float, p: float) -> float:
    return q / p  # dimensionless
```
"""


def _document() -> dict:
    def nid() -> str:
        return str(uuid.uuid4())

    def rng(part: str, end_part: str | None = None) -> dict:
        start = TEXT.index(part)
        end = TEXT.index(end_part) + len(end_part) if end_part else start + len(part)
        return {"start": start, "end": end}

    attributions = [
        {"source": {"url": "https://hydro.example/runoff", "title": "Runoff basics"},
         "excerpt": "the runoff ratio is discharge over precipitation",
         "range": rng("The runoff ratio", "\\frac{Q}{P}$")},
        {"source": {"url": "https://climate.example/summer", "title": "Summer minimum"},
         "excerpt": "the pull is weakest in late summer", "range": rng("The pull is weakest")},
        {"source": {"url": "https://stats.example/mean", "title": "Sample mean"},
         "range": rng("\\bar{x}", "x_i")},
        {"source": {"url": "https://stations.example/", "title": "Station table"},
         "range": rng("Northbridge", "1,204 mm")},
        {"source": {"url": "https://hydro.example/runoff", "title": "Runoff basics"},
         "range": rng("return q / p")},
    ]  # fmt: skip
    for attribution in attributions:
        attribution.setdefault("excerpt", "")
        attribution["incomplete"] = False
    return {
        "format": "turnscope.conversation", "version": 1, "projection": "portable",
        "conversation": {"id": nid(), "title": "Basin rainfall", "created_at":
                         "2026-11-29T10:00:00Z", "forked_from": None},
        "turns": [
            {"id": nid(), "index": 0, "role": "user", "status": "complete",
             "end_reason": "end_turn", "created_at": "2026-11-29T10:00:00Z",
             "events": [{"id": nid(), "seq": 1, "kind": "message", "incomplete": False,
                         "text": "How does rainfall turn into runoff?", "attributions": []}]},
            {"id": nid(), "index": 1, "role": "agent", "status": "complete",
             "end_reason": "end_turn", "created_at": "2026-11-29T10:00:01Z",
             "agent": {"agentId": "anthropic:claude-x",
                       "model": {"provider": "anthropic", "model": "claude-x"}},
             "events": [{"id": nid(), "seq": 2, "kind": "message", "incomplete": False,
                         "text": TEXT, "attributions": attributions}]},
        ],
    }  # fmt: skip


@pytest.fixture
def rich(client, django_user_model):
    user = django_user_model.objects.create_user("reader", password="pw-reader-123")
    conversation = import_document(_document(), owner=user)
    client.force_login(user)
    return conversation, client.cookies["sessionid"].value


def _open(browser, live_server, session, conversation, *, width, scheme):
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    host = live_server.url.split("//", 1)[1].split(":")[0]
    context.add_cookies([{"name": "sessionid", "value": session, "domain": host, "path": "/"}])
    outside: list[str] = []
    context.on("request", lambda r: None if r.url.startswith(
        (live_server.url, "data:", "about:", "blob:")) else outside.append(r.url))
    page = context.new_page()
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text)
            if "Content Security Policy" in m.text else None)
    response = page.goto(f"{live_server.url}/c/{conversation.pk}/")
    assert response.status == 200
    page.wait_for_timeout(300)
    return context, page, outside, blocked


def _colour(page, selector: str) -> str:
    return page.locator(selector).first.evaluate("e => getComputedStyle(e).color")


def test_rich_markdown_in_both_schemes_and_at_360px(live_server, rich, browser):
    conversation, session = rich
    ARTIFACTS.mkdir(exist_ok=True)
    colours = {}
    for name, width, scheme in (("light", 1100, "light"), ("dark", 1100, "dark"),
                                ("360px", 360, "light")):  # fmt: skip
        context, page, outside, blocked = _open(browser, live_server, session, conversation,
                                                width=width, scheme=scheme)
        message = page.locator(".turn.agent .message")
        # Math: MathML elements laid out by the browser (not TeX text).
        assert message.locator("math").count() == 4
        assert message.locator("math[display=block]").count() == 1
        # laid out as math: a fraction is taller than a letter (TeX as text would not be)
        fraction = message.locator(".math-display mfrac").bounding_box()
        letter = message.locator(".math-display mi").first.bounding_box()
        assert fraction and letter and fraction["height"] > 1.5 * letter["height"]
        assert "\\frac" not in message.inner_text() and "$" not in message.inner_text()
        # Code: token classes coloured by the stylesheet.
        colours[scheme] = (_colour(page, ".hl-k"), _colour(page, ".message pre code"))
        assert colours[scheme][0] != colours[scheme][1]
        # Tasks: disabled checkboxes.
        boxes = message.locator("input.task-list-item-checkbox")
        assert boxes.count() == 2
        assert boxes.evaluate_all("bs => bs.map(b => [b.disabled, b.checked])") == [
            [True, True], [True, False]]
        # Table: alignment honoured (by class: the CSP forbids inline styles).
        aligns = message.locator("tbody tr").first.locator("td").evaluate_all(
            "cells => cells.map(c => getComputedStyle(c).textAlign)")
        assert aligns == ["left", "center", "right"]
        # No cell breaks inside a word: every word of every cell sits on one line.
        broken = message.locator("table").evaluate("""t => {
            const out = [];
            for (const cell of t.querySelectorAll('th, td')) {
              const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
              for (let n = walker.nextNode(); n; n = walker.nextNode()) {
                const re = /\\S+/g; let m;
                while ((m = re.exec(n.data))) {
                  const r = document.createRange();
                  r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
                  const tops = new Set([...r.getClientRects()].map(x => Math.round(x.top)));
                  if (tops.size > 1) out.push(m[0]);
                }
              }
            }
            return out; }""")
        assert broken == [], broken
        # Citations sit around the new constructs.
        assert message.locator(".cite math").count() >= 2
        assert message.locator("pre .cite .hl-k").count() >= 1
        assert message.locator("td .cite").count() >= 1
        page.screenshot(path=str(ARTIFACTS / f"markdown-{name}.png"), full_page=True)
        assert blocked == [], blocked
        assert outside == [], outside
        context.close()
    assert colours["light"] != colours["dark"]


def test_copy_button_with_the_keyboard(live_server, rich, browser):
    conversation, session = rich
    context, page, _, blocked = _open(browser, live_server, session, conversation,
                                      width=1100, scheme="light")
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    button = page.locator(".message pre .code-copy")
    assert button.count() == 1
    assert button.get_attribute("aria-label") == "Copy code"
    page.locator("body").focus()
    for _ in range(100):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('code-copy')"):
            break
    else:
        pytest.fail("the copy button is not reachable with the keyboard")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('.code-copy').dataset.state === 'copied'")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == ("def runoff_ratio(q: float, p: float) -> float:\n"
                      "    return q / p  # dimensionless\n")
    assert button.inner_text() == "Copied"
    assert blocked == []
    context.close()
