"""Authentication and permissions across the whole site.

The walker covers every URL pattern of turnscope.urls (the API, the admin, and every page added
later): without credentials, each one must refuse (401/403), send the visitor to a login page,
or not allow the method (405), for every method. Only the short allowlist may answer.
"""

from __future__ import annotations

import re
import uuid
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.views import LoginView
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse
from django.urls.resolvers import RegexPattern, RoutePattern
from rest_framework.authtoken.models import Token
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView

from tests.api.conftest import token_client

pytestmark = pytest.mark.django_db

# URL names that may answer an anonymous visitor, and why.
ALLOWLIST = {
    "login": "the login form itself",
    "admin:login": "the admin's login form",
    "admin:logout": "ends a session; for a visitor without one it only redirects to the admin",
    # Browsers send violation reports without credentials; it only writes a (rate-limited) log
    # line (tests/turnscope/test_security.py).
    "csp-report": "CSP violation reports",
    "favicon": "the app's icon (static, the same for everyone; browsers ask before logging in)",
}
# Shared links (conversations.sharing): the token in the path is the credential, so anyone may
# ask; a path without a live token (as every sample here) is a 404, never a page.
TOKEN_ROUTES = {"share-page", "share-window", "share-export", "share-entry-point"}
METHODS = ("get", "post", "put", "patch", "delete")
SAMPLES = {"int": "1", "uuid": str(uuid.UUID(int=1)), "str": "x", "slug": "x", "path": "x/y"}


def _walk(patterns, prefix="", namespace=""):
    for p in patterns:
        if isinstance(p, URLResolver):
            ns = f"{namespace}{p.namespace}:" if p.namespace else namespace
            yield from _walk(p.url_patterns, prefix + _sample(p.pattern), ns)
        elif isinstance(p, URLPattern):
            name = f"{namespace}{p.name}" if p.name else None
            yield prefix + _sample(p.pattern), name, p


def _sample(pattern) -> str:
    """A concrete path for a pattern: converters get sample values; regex groups get their first
    alternative (admin app labels) or a sample word."""
    if isinstance(pattern, RoutePattern):
        route = str(pattern._route)
        return re.sub(r"<(?:(\w+):)?\w+>", lambda m: SAMPLES.get(m.group(1) or "str", "x"), route)
    assert isinstance(pattern, RegexPattern)
    regex = pattern._regex.lstrip("^").rstrip("$").replace("\\Z", "")

    def group(m: re.Match) -> str:
        body = m.group(1)
        first = body.split("|")[0]
        return first if re.fullmatch(r"[\w-]+", first) else "1"

    regex = re.sub(r"\(\?P<\w+>((?:[^()]|\([^()]*\))*)\)", group, regex)
    return regex.replace("\\", "")


def every_url():
    return list(_walk(get_resolver().url_patterns, "/"))


def login_urls() -> set[str]:
    return {reverse("login"), reverse("admin:login")}


def test_every_endpoint_needs_authentication():
    client = Client()
    checked, failures = 0, []
    for path, name, pattern in every_url():
        match = resolve(path)  # the sample path must reach this very pattern
        assert match.func is pattern.callback, f"sample {path} for {name} resolves elsewhere"
        if name in ALLOWLIST:
            continue
        if name in TOKEN_ROUTES:
            for method in METHODS:
                status = getattr(client, method)(path).status_code
                checked += 1
                if status not in (404, 405):
                    failures.append(f"{method.upper()} {path} ({name}) -> {status}")
            continue
        for method in METHODS:
            response = getattr(client, method)(path)
            checked += 1
            status = response.status_code
            if status in (401, 403, 405):
                continue
            if status in (301, 302) and urlsplit(response["Location"]).path in login_urls():
                continue
            failures.append(f"{method.upper()} {path} ({name}) -> {status}")
    assert not failures, "reachable without authentication:\n" + "\n".join(failures)
    assert checked > 50  # the walk really walked (API + admin at least)


def test_the_allowlist_is_short_and_real():
    assert len(ALLOWLIST) <= 5  # login forms, admin logout, CSP reports, the favicon
    for name in ALLOWLIST:
        reverse(name)  # each names a real route
    assert issubclass(resolve(reverse("login")).func.view_class, LoginView)


def test_every_api_view_declares_its_permissions():
    """Not inherited from the project default by accident: each DRF view of ours names its
    permission classes, and none is AllowAny."""
    found = 0
    for path, _name, pattern in every_url():
        view_class = getattr(pattern.callback, "cls", None) or getattr(
            pattern.callback, "view_class", None)
        wrapped = getattr(pattern.callback, "__wrapped__", None)
        if view_class is None and wrapped is not None:
            view_class = getattr(wrapped, "cls", None)
        if view_class is None or not issubclass(view_class, APIView):
            continue
        found += 1
        initkwargs = getattr(pattern.callback, "initkwargs", None) or getattr(
            wrapped, "initkwargs", {}) or {}
        declared = "permission_classes" in initkwargs or any(
            "permission_classes" in vars(k) for k in view_class.__mro__
            if k.__module__.startswith(("api.", "live.", "turnscope.")))
        assert declared, f"{path} ({view_class.__name__}) does not declare permission_classes"
        classes = initkwargs.get("permission_classes") or view_class.permission_classes
        assert AllowAny not in classes, f"{path} allows anyone"
    assert found >= 10


def test_token_and_session_authentication(alice, conversation):
    assert token_client(alice).get("/api/v1/conversations").status_code == 200
    browser = Client()
    assert browser.login(username="alice", password="pw-alice-123")
    assert browser.get("/api/v1/conversations").status_code == 200
    bogus = Client(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert bogus.get("/api/v1/conversations").status_code in (401, 403)


def test_session_writes_need_csrf(alice):
    browser = Client(enforce_csrf_checks=True)
    browser.login(username="alice", password="pw-alice-123")
    response = browser.post("/api/v1/conversations/import", {}, content_type="application/json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_create_token_command(alice, capsys):
    call_command("create_token", "alice")
    key = capsys.readouterr().out.strip()
    assert Token.objects.get(user=alice).key == key
    call_command("create_token", "alice")
    assert capsys.readouterr().out.strip() == key  # the same token until reset
    call_command("create_token", "alice", "--reset")
    new = capsys.readouterr().out.strip()
    assert new != key and Token.objects.get(user=alice).key == new
    client = Client(HTTP_AUTHORIZATION=f"Token {new}")
    assert client.get("/api/v1/capabilities").status_code == 200
    with pytest.raises(CommandError):
        call_command("create_token", "nobody")


def test_throttling(alice_api, monkeypatch):
    from rest_framework.throttling import UserRateThrottle

    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {"user": "3/min", "anon": "3/min"})
    codes = [alice_api.get("/api/v1/capabilities").status_code for _ in range(5)]
    assert codes[:3] == [200] * 3 and codes[3:] == [429, 429]


def test_write_endpoints_have_a_lower_rate(alice, alice_api, monkeypatch):
    from rest_framework.test import APIClient

    from api.throttling import WriteRateThrottle

    monkeypatch.setattr(WriteRateThrottle, "rate", "2/min")
    session = APIClient()
    session.force_login(alice)
    codes = [session.post("/api/v1/conversations/import", {}, format="json").status_code
             for _ in range(3)]
    assert codes == [400, 400, 429]
    # Fork is a write for token clients too.
    codes = [alice_api.post("/api/v1/conversations/00000000-0000-0000-0000-000000000000/fork",
                            {}, format="json").status_code for _ in range(3)]
    assert codes[-1] == 429


def test_a_token_client_importing_in_bulk_has_its_own_higher_rate(alice_api, monkeypatch,
                                                                  settings):
    from api.throttling import WriteRateThrottle

    monkeypatch.setattr(WriteRateThrottle, "rate", "2/min")
    settings.API_BULK_IMPORT_RATE = "5/min"
    codes = [alice_api.post("/api/v1/conversations/import", {}, format="json").status_code
             for _ in range(6)]
    assert codes == [400] * 5 + [429]
    ingest = [alice_api.post("/api/v1/conversations/ingest?provider=anthropic", b"{",
                             content_type="application/octet-stream").status_code
              for _ in range(2)]
    assert ingest == [429, 429]  # the same bulk budget


def test_creating_renaming_deleting_and_starting_turns_are_writes(alice, alice_api,
                                                                  monkeypatch):
    """Each write method of the conversation views is under the write rate; their reads are
    not."""
    from api.throttling import WriteRateThrottle
    from conversations import store

    monkeypatch.setattr(WriteRateThrottle, "rate", "2/min")
    created = [alice_api.post("/api/v1/conversations", {}, format="json").status_code
               for _ in range(3)]
    assert created == [201, 201, 429]
    from rest_framework.throttling import SimpleRateThrottle

    def cache_clear() -> None:  # a new minute's budget (the counters' cache of this test)
        SimpleRateThrottle.cache.clear()

    cache_clear()
    conversation = store.create_conversation(owner=alice, title="t")
    url = f"/api/v1/conversations/{conversation.pk}"
    renamed = [alice_api.patch(url, {"title": f"t{i}"}, format="json").status_code
               for i in range(2)]
    assert renamed == [200, 200]
    assert alice_api.delete(url).status_code == 429  # the same write budget
    assert all(alice_api.get(url).status_code == 200 for _ in range(4))  # reads are not writes
    cache_clear()
    turns = [alice_api.post(f"{url}/turns", {}, format="json").status_code for _ in range(3)]
    assert turns[-1] == 429 and 429 not in turns[:2]
