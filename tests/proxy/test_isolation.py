"""The proxy answers on Turnscope's origin: it is no door into the app's session. Turnscope's
cookies and CSRF header never leave for a provider, a provider's cookies never land on
Turnscope's origin, and a browser never runs or sniffs what a provider sent."""

from __future__ import annotations

import httpx
import pytest

from proxy import app
from tests.proxy.conftest import ANTHROPIC_KEY, wait_recorded
from upstream.recorded import Reply

pytestmark = pytest.mark.django_db(transaction=True)

HTML = b"<html><body><script>document.title = 'ran'</script></body></html>"


def test_the_browsers_cookies_and_csrf_header_are_not_forwarded(upstream, proxy_url, token):
    upstream.add(Reply(chunks=(b'{"data": []}',), content_type="application/json"))
    with httpx.Client() as http:
        response = http.get(f"{proxy_url}/proxy/t/{token}/anthropic/v1/models", headers={
            "cookie": "sessionid=SESSIONSECRET; csrftoken=CSRFSECRET",
            "x-csrftoken": "CSRFSECRET", "x-api-key": ANTHROPIC_KEY,
            "anthropic-version": "2023-06-01"})
    assert response.status_code == 200
    [request] = upstream.requests
    sent = repr(request.headers)
    assert "SESSIONSECRET" not in sent and "CSRFSECRET" not in sent
    assert request.header("cookie") is None and request.header("x-csrftoken") is None
    assert request.header("x-api-key") == ANTHROPIC_KEY  # the provider's own still goes


def test_turnscopes_api_token_scheme_is_not_forwarded_but_a_providers_bearer_is(
    upstream, proxy_url, token
):
    upstream.add(Reply(chunks=(b"{}",), content_type="application/json"),
                 Reply(chunks=(b"{}",), content_type="application/json"))
    with httpx.Client() as http:
        for value in (f"Token {token}", "Bearer sk-proj-PROVIDERKEY"):
            http.get(f"{proxy_url}/proxy/t/{token}/openai/v1/models",
                     headers={"authorization": value})
    first, second = upstream.requests
    assert first.header("authorization") is None
    assert second.header("authorization") == "Bearer sk-proj-PROVIDERKEY"


def test_an_upstreams_cookies_are_dropped_and_every_response_is_inert_in_a_browser(
    upstream, proxy_url, token
):
    upstream.add(Reply(chunks=(HTML,), content_type="text/html", headers=(
        ("set-cookie", "csrftoken=ATTACKERFIXED; Path=/"), ("set-cookie", "evil=1; Path=/"),
        ("clear-site-data", '"cookies", "storage"'), ("x-content-type-options", "sniff-me"),
        ("x-request-id", "req_1"))))
    with httpx.Client() as http:
        served = http.get(f"{proxy_url}/proxy/t/{token}/anthropic/v1/page")
        refused = http.get(f"{proxy_url}/proxy/t/{'0' * 40}/anthropic/v1/page")
        unknown = http.get(f"{proxy_url}/proxy/nowhere/v1/page")
    assert served.status_code == 200 and served.content == HTML  # every byte
    assert served.headers["x-request-id"] == "req_1"  # the provider's own headers pass
    assert "set-cookie" not in served.headers and "clear-site-data" not in served.headers
    for response in (served, refused, unknown):
        assert response.headers["content-security-policy"].startswith(
            "sandbox; default-src 'none'")
        assert response.headers.get_list("x-content-type-options") == ["nosniff"]
        assert response.headers["referrer-policy"] == "no-referrer"
    assert refused.status_code == 401 and unknown.status_code == 404
    wait_recorded()


def test_isolation_headers_are_added_to_every_proxied_response():
    headers = app.response_headers([(b"Set-Cookie", b"a=b"), (b"content-type", b"text/html")])
    names = [k.lower() for k, _ in headers]
    assert b"set-cookie" not in names
    assert names.count(b"content-security-policy") == 1
