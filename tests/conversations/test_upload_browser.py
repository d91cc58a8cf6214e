"""Bring your own conversations in Debian's chromium: drop a recording, a cassette, a ChatGPT
export and a bad file on the list page, watch the progress bar and the per-file results, open
what was imported. The file picker is reachable from the keyboard."""

from __future__ import annotations

import base64

import pytest

from tests.support import REPO, shared_path

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]

ARTIFACTS = REPO / "artifacts"


@pytest.fixture
def session(client, django_user_model):
    # Database work happens before Playwright starts its event loop in this thread.
    user = django_user_model.objects.create_user("uploader", password="pw-uploader-123")
    client.force_login(user)
    return client.cookies["sessionid"].value


def dropped_files() -> list[dict[str, str]]:
    recording = shared_path("fixtures", "providers", "anthropic",
                            "vercel-ai__anthropic-web-search-tool.1.chunks.txt")
    cassette = shared_path("fixtures", "providers", "google",
                           "pydantic-ai__test_google_model_web_search_tool.yaml")
    export = shared_path("fixtures", "chat-exports", "librechat__chatgpt-export.json")
    files = [(p.name, p.read_bytes()) for p in (recording, cassette, export)]
    files.append(("notes.txt", b"Just some notes, not a conversation."))
    return [{"name": name, "data": base64.b64encode(data).decode()} for name, data in files]


# Record every state of the progress bar and its status, as the page sets them (the page sets
# the status text, then the bar: watching the bar's setters sees each pair, however fast).
WATCH_JS = """() => {
  window.__seen = [];
  const bar = document.querySelector('[data-bar]');
  const status = document.querySelector('[data-status]');
  const value = Object.getOwnPropertyDescriptor(HTMLProgressElement.prototype, 'value');
  Object.defineProperty(bar, 'value', {
    get() { return value.get.call(this); },
    set(v) {
      value.set.call(this, v);
      window.__seen.push({text: status.textContent, value: value.get.call(this)});
    },
  });
  const remove = bar.removeAttribute.bind(bar);
  bar.removeAttribute = (name) => {
    remove(name);
    window.__seen.push({text: status.textContent, value: null});
  };
}"""

DROP_JS = """(files) => {
  const transfer = new DataTransfer();
  for (const f of files) {
    const bytes = Uint8Array.from(atob(f.data), c => c.charCodeAt(0));
    transfer.items.add(new File([bytes], f.name));
  }
  return transfer;
}"""


def test_drag_and_drop_upload(live_server, session, browser):
    files = dropped_files()
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    host = live_server.url.split("//", 1)[1].split(":")[0]
    context.add_cookies([{"name": "sessionid", "value": session, "domain": host, "path": "/"}])
    outside: list[str] = []
    context.on("request", lambda r: None if r.url.startswith(
        (live_server.url, "data:", "about:", "blob:")) else outside.append(r.url))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    assert page.goto(f"{live_server.url}/").status == 200

    # The picker is reachable from the keyboard.
    page.locator("body").focus()
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "upload-files":
            break
    else:
        pytest.fail("the file picker is not reachable with the keyboard")

    page.evaluate(WATCH_JS)
    transfer = page.evaluate_handle(DROP_JS, files)
    zone = page.locator("[data-drop-zone]")
    zone.dispatch_event("dragenter", {"dataTransfer": transfer})
    assert "is-over" in zone.get_attribute("class")
    zone.dispatch_event("drop", {"dataTransfer": transfer})
    page.wait_for_selector(".upload.is-done", timeout=60_000)

    seen = page.evaluate("window.__seen")
    texts = [s["text"] for s in seen]
    assert any(t.startswith("Sending") for t in texts), texts
    assert any(t.startswith("Importing") for t in texts), texts
    importing = [s["value"] for s in seen if s["text"].startswith("Importing")]
    assert importing == sorted(importing)  # the bar only moves forward
    assert importing[-1] == 100  # every byte of the files read
    assert texts[-1] == "Done: 4 conversations imported, 1 problem."
    assert page.locator("[data-bar]").evaluate("bar => bar.value") == 100

    rows = page.locator(".upload-file")
    assert rows.count() == 4
    results = {}
    for i in range(4):
        row = rows.nth(i)
        name = row.locator(".file-name").inner_text()
        results[name] = (row.locator(".file-state").inner_text(),
                         [a.inner_text() for a in row.locator(".result-ok > a").all()],
                         row.locator(".result-error").all_inner_texts())
    assert results["notes.txt"][0] == "1 problem"
    assert results["notes.txt"][2][0].startswith("notes.txt, line 1: not a format this app "
                                                 "reads")
    assert results["librechat__chatgpt-export.json"][:2] == (
        "2 conversations", ["Conversation 1. Web Search", "Conversation 2"])
    assert results["pydantic-ai__test_google_model_web_search_tool.yaml"][:2] == (
        "1 conversation", ["What is the weather in San Francisco today?"])
    assert results["vercel-ai__anthropic-web-search-tool.1.chunks.txt"][0] == "1 conversation"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "upload-results.png"), full_page=True)

    # The same files again: nothing is imported twice; each row links what is there.
    transfer = page.evaluate_handle(DROP_JS, files)
    zone.dispatch_event("drop", {"dataTransfer": transfer})
    page.locator("[data-status]", has_text="Done: 0 conversations imported, 4 already "
                 "imported").wait_for(timeout=60_000)
    again = page.locator(".upload-file", has_text="librechat__chatgpt-export.json")
    assert again.locator(".file-state").inner_text() == "2 already imported"
    assert [a.inner_text() for a in again.locator(".result-already > a").all()] == [
        "Conversation 1. Web Search", "Conversation 2"]
    page.screenshot(path=str(ARTIFACTS / "upload-already.png"), full_page=True)

    # Open what was imported: the ChatGPT conversation, with its searches and citations.
    page.locator(".upload-results a", has_text="Conversation 1. Web Search").click()
    page.wait_for_selector(".turn")
    assert page.locator("h1").inner_text() == "Conversation 1. Web Search"
    assert page.locator(".turn.agent").count() == 3
    assert page.locator(".timeline .activity").count() >= 4
    assert page.locator(".cite-marker").count() >= 4
    assert "【" not in page.locator("[data-turns]").inner_text()
    page.screenshot(path=str(ARTIFACTS / "upload-opened.png"), full_page=True)
    page.go_back()
    page.reload()
    assert page.locator(".conversation-row").count() == 4  # none twice
    # Bulk delete: select two, the bar counts them, the confirmation lists them.
    submit = page.locator("[data-bulk-submit]")
    assert submit.is_disabled()
    boxes = page.locator("input[data-select]")
    boxes.nth(0).check()
    boxes.nth(1).check()
    assert page.locator("[data-bulk-count]").inner_text() == "2 selected"
    page.screenshot(path=str(ARTIFACTS / "upload-list.png"), full_page=True)
    submit.click()
    page.wait_for_selector("h1:has-text('Delete 2 conversations?')")
    page.screenshot(path=str(ARTIFACTS / "bulk-delete-confirm.png"))
    page.locator("button.danger").click()
    page.wait_for_selector(".flash")
    assert page.locator(".conversation-row").count() == 2
    assert "Deleted 2 conversations." in page.locator(".flash").inner_text()
    # The WSGI test server has no websocket route: the conversation page's live socket fails.
    errors = [e for e in errors if "WebSocket" not in e]
    assert errors == [] and outside == []
    context.close()
