"""Cache-Control: private on every page and API answer; CSP violation reports are logged,
redacted and rate-limited."""

from __future__ import annotations

import logging

import orjson
import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from conversations import store
from tests.support import add_user_turn
from turnscope import security

pytestmark = pytest.mark.django_db

KEY = "sk-ant-api03-" + "A1b2C3d4E5" * 9  # credential-shaped


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture(autouse=True)
def _fresh_limiter(monkeypatch):
    monkeypatch.setattr(security, "_limiter", security._PerMinute())


def private(response) -> bool:
    directives = {d.strip().split("=")[0] for d in response.get("Cache-Control", "").split(",")}
    return "private" in directives and "public" not in directives


def test_every_page_and_api_answer_is_private(client, alice):
    conversation = store.create_conversation(owner=alice, title="mine")
    add_user_turn(conversation, "hello")
    client.force_login(alice)
    pages = ["/", f"/c/{conversation.pk}/", f"/c/{conversation.pk}/turns/0/",
             f"/c/{conversation.pk}/state/", reverse("login")]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        assert private(response), (url, response.get("Cache-Control"))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=alice).key}")
    for url in ["/api/v1/conversations", f"/api/v1/conversations/{conversation.pk}",
                f"/api/v1/conversations/{conversation.pk}/export?format=markdown",
                f"/api/v1/conversations/{conversation.pk}/events"]:
        response = api.get(url)
        assert response.status_code == 200, (url, response.content[:200])
        assert private(response), (url, response.get("Cache-Control"))
    # errors carry a user's request too
    assert private(api.get("/api/v1/conversations/00000000-0000-4000-8000-000000000000"))


def test_the_csp_reports_to_the_app(client, alice):
    client.force_login(alice)
    response = client.get("/")
    policy = response["Content-Security-Policy"]
    assert "report-uri /csp-report/" in policy and "report-to csp" in policy
    assert response["Reporting-Endpoints"] == 'csp="/csp-report/"'


def report_uri_body(**fields) -> bytes:
    return orjson.dumps({"csp-report": {"document-uri": "https://t.example/c/1/",
                                        "violated-directive": "style-src", **fields}})


def test_a_report_is_logged_with_credentials_redacted(client, caplog):
    caplog.set_level(logging.WARNING, logger="turnscope.csp")
    response = client.post("/csp-report/", report_uri_body(**{
        "blocked-uri": f"https://evil.example/?key={KEY}", "script-sample": KEY}),
        content_type="application/csp-report")
    assert response.status_code == 204
    [record] = [r for r in caplog.records if r.name == "turnscope.csp"]
    line = record.getMessage()
    assert "CSP violation" in line and "style-src" in line and "evil.example" in line
    assert KEY not in line and "[REDACTED]" in line


def test_reporting_api_reports_are_read_too(client, caplog):
    caplog.set_level(logging.WARNING, logger="turnscope.csp")
    body = orjson.dumps([{"type": "csp-violation", "url": "https://t.example/",
                          "body": {"documentURL": "https://t.example/",
                                   "effectiveDirective": "img-src",
                                   "blockedURL": "https://tracker.example/p.gif"}},
                         {"type": "deprecation", "body": {"id": "x"}}])
    assert client.post("/csp-report/", body,
                       content_type="application/reports+json").status_code == 204
    [record] = [r for r in caplog.records if r.name == "turnscope.csp"]
    assert "img-src" in record.getMessage() and "tracker.example" in record.getMessage()


def test_reports_are_rate_limited_per_client(client, caplog, settings):
    settings.TURNSCOPE_CSP_REPORTS_PER_MINUTE = 3
    caplog.set_level(logging.WARNING, logger="turnscope.csp")
    for _ in range(10):
        assert client.post("/csp-report/", report_uri_body(),
                           content_type="application/csp-report").status_code == 204
    assert len([r for r in caplog.records if r.name == "turnscope.csp"]) == 3
    other = client.post("/csp-report/", report_uri_body(), REMOTE_ADDR="10.0.0.9",
                        content_type="application/csp-report")
    assert other.status_code == 204
    last = [r for r in caplog.records if r.name == "turnscope.csp"][-1].getMessage()
    assert "7 more not logged" in last


def test_bad_reports_are_refused_without_a_log_line(client, caplog):
    caplog.set_level(logging.WARNING, logger="turnscope.csp")
    assert client.get("/csp-report/").status_code == 405
    assert client.post("/csp-report/", b"{not json",
                       content_type="application/csp-report").status_code == 400
    big = b'{"csp-report": {"x": "' + b"y" * (security.MAX_REPORT_BYTES) + b'"}}'
    assert client.post("/csp-report/", big,
                       content_type="application/csp-report").status_code == 413
    assert not [r for r in caplog.records if r.name == "turnscope.csp"]


def test_every_middleware_runs_async_views_natively():
    """One sync-only middleware puts every async view under async_to_sync, on a loop that ends
    with the request: a live turn it spawned then dies mid-stream."""
    from django.conf import settings
    from django.utils.module_loading import import_string

    for path in settings.MIDDLEWARE:
        assert getattr(import_string(path), "async_capable", False), path


def test_the_report_limit_holds_over_any_sixty_seconds(client, caplog, settings, monkeypatch):
    """The limit counts the last sixty seconds, not calendar minutes: a burst across a minute's
    boundary logs the limit, not twice it."""
    settings.TURNSCOPE_CSP_REPORTS_PER_MINUTE = 3
    monkeypatch.setattr(security, "_limiter", security._PerMinute())
    now = [119.0]  # a second before a minute's boundary
    monkeypatch.setattr(security.time, "monotonic", lambda: now[0])
    caplog.set_level(logging.WARNING, logger="turnscope.csp")

    def logged() -> int:
        return len([r for r in caplog.records if r.name == "turnscope.csp"])

    for _ in range(2):
        client.post("/csp-report/", report_uri_body(), content_type="application/csp-report")
    now[0] = 121.0
    for _ in range(5):
        client.post("/csp-report/", report_uri_body(), content_type="application/csp-report")
    assert logged() == 3
    now[0] = 179.5  # the first two are out of the window, the third is not
    for _ in range(5):
        client.post("/csp-report/", report_uri_body(), content_type="application/csp-report")
    assert logged() == 5
