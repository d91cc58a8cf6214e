"""Google's search-suggestions chip renders with its own colours in Chromium: its sandboxed
document is served with a policy of its own (its sanitized styles inline, nothing fetched, no
script), so no CSP violation blocks them — in a turn the page loaded with, and in one inserted
later (the live view, "Earlier turns"), which a ``srcdoc`` frame would have left unstyled."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest

from conversations.ingest import ResponseFile, ingest
from streams.bodies import ArtifactBody
from streams.builder import EventRecord
from tests.support import REPO, add_turn, recorded

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]

ARTIFACTS = REPO / "artifacts"
RECORDING = "pydantic-ai__test_google_model_web_search_tool.yaml"
# Google's chip markup uses a <style> block and, in places, style attributes of its own.
CHIP = (
    "<style>.container { background-color: #123456; padding: 8px; }"
    " .chip { color: #fafafa; border: solid 1px; }</style>"
    '<div class="container"><span class="headline" style="color: rgb(200, 10, 20);'
    ' font-weight: 700">Search suggestions</span>'
    '<a class="chip" style="background-color: rgb(10, 120, 30)"'
    ' href="https://www.google.com/search?q=tides">tides</a></div>'
)


@pytest.fixture
def chip_conversation(client, django_user_model):
    [rec] = recorded("google", RECORDING)[:1]
    body = orjson.loads(rec.raw)
    body["candidates"][0]["groundingMetadata"]["searchEntryPoint"]["renderedContent"] = CHIP
    user = django_user_model.objects.create_user("reader", password="pw-reader-123")
    conversation = ingest("google", [ResponseFile("chip.json", orjson.dumps(body),
                                                  rec.context)], owner=user).conversation
    client.force_login(user)
    return conversation, client.cookies["sessionid"].value


STYLES_JS = """() => {
  const pick = (sel, prop) => getComputedStyle(document.querySelector(sel))[prop];
  return {container: pick('.container', 'backgroundColor'), chip: pick('.chip', 'color'),
          headline: pick('.headline', 'color'), weight: pick('.headline', 'fontWeight'),
          chipBackground: pick('.chip', 'backgroundColor')};
}"""


def test_the_chip_renders_with_its_own_colours(live_server, chip_conversation, browser):
    conversation, session = chip_conversation
    context = browser.new_context(viewport={"width": 900, "height": 700})
    host = live_server.url.split("//", 1)[1].split(":")[0]
    context.add_cookies([{"name": "sessionid", "value": session, "domain": host, "path": "/"}])
    page = context.new_page()
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text)
            if "Content Security Policy" in m.text else None)
    response = page.goto(f"{live_server.url}/c/{conversation.pk}/")
    assert response.status == 200
    # The frame's own document has loaded (it is fetched from its URL).
    page.frame_locator("iframe.artifact-frame").locator(".container").wait_for()
    [frame] = [f for f in page.frames if f != page.main_frame]
    styles = frame.evaluate(STYLES_JS)
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("iframe.artifact-frame").screenshot(path=str(ARTIFACTS / "search-chip.png"))
    assert styles == COLOURS, styles

    # A turn that arrives after the page loaded, with a chip of other colours, inserted as the
    # page's script inserts one (the live view, "Earlier turns"): a srcdoc frame would inherit
    # the policy the page loaded with, which allowed only the first chip's styles.
    record = EventRecord("provider_artifact", body=ArtifactBody(
        "google.search_entry_point", "Search suggestions",
        display_html=CHIP.replace("#123456", "#654321")))
    with ThreadPoolExecutor(1) as pool:  # (Playwright's loop runs in this thread)
        later = pool.submit(add_turn, conversation, "agent", record, provider="google",
                            model="gemini-2.5-flash").result()
    page.evaluate("""async (url) => {
      const html = await (await fetch(url)).text();
      const box = document.createElement('div');
      box.id = 'inserted';
      box.innerHTML = html;
      document.body.append(box);
    }""", f"/c/{conversation.pk}/turns/{later.index}/")
    page.frame_locator("#inserted iframe.artifact-frame").locator(".container").wait_for()
    [_, frame] = [f for f in page.frames if f != page.main_frame]
    assert frame.evaluate(STYLES_JS) == COLOURS | {"container": "rgb(101, 67, 33)"}
    assert not violations, violations


COLOURS = {"container": "rgb(18, 52, 86)", "chip": "rgb(250, 250, 250)",
           "headline": "rgb(200, 10, 20)", "weight": "700", "chipBackground": "rgb(10, 120, 30)"}
