"""A logged-in browser opening a proxy URL: the provider's answer is HTML with a script and a
``Set-Cookie`` (a hostile or compromised upstream). Nothing of it acts as Turnscope."""

from __future__ import annotations

import pytest

from tests.live import e2e
from tests.servers import served
from upstream.recorded import RecordedUpstream, Reply

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HOSTILE = (b"<!doctype html><html><head><title>upstream</title></head><body>"
           b"<p id=p>hello</p><script>window.ran = true; document.title = 'ran';"
           b"fetch('/api/v1/conversations').then(r => r.text())"
           b".then(t => { document.title = 'read ' + t.length; });</script>"
           b"<img src=x onerror=\"document.title = 'onerror'\"></body></html>")


def test_a_proxied_html_answer_runs_no_script_and_sets_no_cookie(tmp_path):
    upstream = RecordedUpstream([Reply(chunks=(HOSTILE,), content_type="text/html", headers=(
        ("set-cookie", "csrftoken=ATTACKERFIXED; Path=/"),
        ("set-cookie", "planted=1; Path=/; Max-Age=3600")))])
    with served(upstream) as fake:
        env = e2e.base_env(tmp_path, TURNSCOPE_UPSTREAM_ANTHROPIC=fake.url)
        setup = e2e.prepare(env)
        server = e2e.Daphne(env, tmp_path / "daphne.log")
        manager, browser = e2e.chromium()
        try:
            page = e2e.logged_in_page(browser, server, setup["session"])
            page.context.add_cookies([{"name": "csrftoken", "value": "OWNCSRF",
                                       "domain": "127.0.0.1", "path": "/"}])
            response = page.goto(f"{server.url}/proxy/t/{setup['token']}/anthropic/v1/page")
            assert response is not None and response.status == 200
            page.wait_for_selector("#p")  # the document is there, parsed
            page.screenshot(path=str(tmp_path / "proxied-html.png"))
            # Evaluated by the test harness (outside the page's CSP): what the page's own
            # script would have changed.
            assert page.evaluate("() => window.ran") is None
            assert page.title() == "upstream"
            [request] = upstream.requests  # the script's fetch never happened, not even here
            assert request.header("cookie") is None
            cookies = {c["name"]: c["value"] for c in page.context.cookies()}
            assert cookies == {"sessionid": setup["session"], "csrftoken": "OWNCSRF"}
            # and the session still opens the app's own pages
            assert page.goto(f"{server.url}/").status == 200
        finally:
            browser.close()
            manager.stop()
            server.stop()
