"""Shares: a read-only link to a snapshot of a conversation, for anyone who holds it.

Anonymous access works and shows the portable projection only; the snapshot stays as shared
until the owner updates it; revoking and expiry are effective at once; every other URL of the
owner stays closed to the anonymous client; the token is neither stored nor logged."""

from __future__ import annotations

import logging
from datetime import timedelta

import orjson
import pytest
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from conversations import sharing, store
from conversations.forking import fork
from conversations.models import Event, Share
from conversations.schema import validate_export
from guards.redaction import RedactingFilter, redact_log_line
from streams.bodies import ArtifactBody
from streams.builder import EventRecord
from tests.api.conftest import add_turn, add_user_turn, build_conversation

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def conversation(alice):
    return build_conversation(owner=alice)


@pytest.fixture
def owner(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def _share(conversation, alice, **options):
    share, token = sharing.create(conversation, alice, **options)
    return share, token, f"/s/{token}/"


def test_the_token_is_unguessable_and_not_stored(conversation, alice):
    share, token, _ = _share(conversation, alice)
    assert len(token) >= 43  # 256 bits, base64url
    assert sharing.token_of(share) == token
    assert sharing.find(token).pk == share.pk
    assert sharing.find(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    # Nothing in the database holds the token: a dump of the table opens no share.
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM conversations_share")
        rows = cursor.fetchall()
    assert rows and token not in repr(rows)
    other, other_token = sharing.create(conversation, alice)
    assert other_token != token and other.sealed_token != share.sealed_token


def test_the_link_is_shown_again_after_the_key_changes_only_with_a_fallback(
        conversation, alice, settings):
    share, token, _ = _share(conversation, alice)
    old = settings.SECRET_KEY
    settings.SECRET_KEY = "another-secret-key-" + "x" * 40
    assert sharing.token_of(share) is None  # cannot be shown, still works:
    assert sharing.find(token).pk == share.pk
    settings.SECRET_KEY_FALLBACKS = [old]
    assert sharing.token_of(share) == token


def test_anonymous_page_shows_the_rendering_and_nothing_of_the_owners(conversation, alice):
    _, _token, url = _share(conversation, alice)
    response = Client().get(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert "in Paris today." in html
    assert 'class="cite-marker' in html  # cited spans
    assert 'class="sources"' in html and "meteo.example.fr" in html  # numbered sources
    assert 'class="timeline"' in html and "paris weather" in html  # activity timeline
    assert 'class="ledger' in html  # research ledger
    assert "anthropic · claude-sonnet-4-20250514" in html  # model chip
    assert "Let me check." in html  # reasoning, included by default
    # Never the payloads, the composer, the owner's actions or links into the owner's pages.
    assert "encrypted_index" not in html and "server_tool_use" not in html
    assert "composer" not in html and "Fork here" not in html and "Re-run" not in html
    assert f"/c/{conversation.pk}" not in html and "/api/v1/" not in html
    assert "Replay live" not in html and "Rename" not in html
    # Headers: not indexed, no Referer, not kept by any cache, the same strict policy.
    assert response["X-Robots-Tag"].startswith("noindex")
    assert response["Referrer-Policy"] == "no-referrer"
    assert "no-store" in response["Cache-Control"]
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy.split("script-src")[1]
    # Source links leave without a Referer too.
    assert 'rel="noopener noreferrer nofollow"' in html


def test_the_snapshot_stays_until_the_owner_updates_it(conversation, alice, owner):
    share, _, url = _share(conversation, alice)
    add_user_turn(conversation, "A question asked after sharing")
    assert "after sharing" not in Client().get(url).content.decode()
    assert owner.post(f"/shares/{share.pk}/update/").status_code == 302
    assert "after sharing" in Client().get(url).content.decode()


def test_a_turn_streaming_when_shared_is_left_out(conversation, alice):
    turn = add_turn(conversation, "agent", status="streaming")
    store.append_events(turn, [EventRecord("message", text="half an answer")])
    _, token, url = _share(conversation, alice)
    store.append_events(turn, [EventRecord("message", text="the rest")])
    store.finish_turn(turn, status="complete", end_reason="end_turn")
    html = Client().get(url).content.decode()
    assert "half an answer" not in html and "the rest" not in html
    assert "in Paris today." in html
    exported = orjson.loads(b"".join(
        Client().get(f"/s/{token}/export/?format=json").streaming_content))
    assert [t["index"] for t in exported["turns"]] == [0, 1, 2, 3, 4]


def test_reasoning_can_be_left_out_of_the_page_and_the_exports(conversation, alice):
    _, token, url = _share(conversation, alice, include_reasoning=False)
    html = Client().get(url).content.decode()
    assert "Let me check." not in html and "reasoning left out" in html
    assert "in Paris today." in html
    for fmt in ("json", "markdown", "html"):
        body = b"".join(Client().get(f"/s/{token}/export/?format={fmt}").streaming_content)
        assert b"Let me check." not in body and b"in Paris today" in body, fmt
    # The owner's own export still has it (the snapshot's chunks are cached apart).
    owner_doc = orjson.loads(store_export(conversation))
    assert any(e["kind"] == "reasoning" for t in owner_doc["turns"] for e in t["events"])


def store_export(conversation) -> bytes:
    from conversations.projections import export_json
    return export_json(conversation)


def test_exports_are_the_portable_snapshot(conversation, alice):
    _, token, _ = _share(conversation, alice)
    response = Client().get(f"/s/{token}/export/?format=json")
    assert response.status_code == 200
    assert response["Referrer-Policy"] == "no-referrer"
    assert "attachment" in response["Content-Disposition"]
    body = b"".join(response.streaming_content)
    doc = orjson.loads(body)
    validate_export(doc)
    assert doc["projection"] == "portable"
    assert b'"payload"' not in body and b'"replay"' not in body and b"encrypted_index" not in body
    assert len(doc["turns"]) == 5
    for fmt in ("markdown", "html"):
        got = Client().get(f"/s/{token}/export/?format={fmt}")
        assert got.status_code == 200, fmt
        assert b"in Paris today" in b"".join(got.streaming_content), fmt
    assert Client().get(f"/s/{token}/export/?format=native").status_code == 400


def test_revoke_is_effective_at_once(conversation, alice, owner):
    share, token, url = _share(conversation, alice)
    for _ in range(2):  # the second read comes from the render caches
        assert Client().get(url).status_code == 200
    assert Client().get(f"/s/{token}/export/?format=html").status_code == 200
    assert owner.post(f"/shares/{share.pk}/revoke/").status_code == 302
    for path in (url, f"{url}turns/?from=0&to=2", f"{url}export/?format=json"):
        response = Client().get(path)
        assert response.status_code == 404, path
        assert response["Referrer-Policy"] == "no-referrer"
    assert not Share.objects.filter(pk=share.pk).exists()


def test_expiry_is_effective_at_once(conversation, alice):
    share, _token, url = _share(conversation, alice, expires="1d")
    assert share.expires_at - timezone.now() > timedelta(hours=23)
    assert Client().get(url).status_code == 200
    Share.objects.filter(pk=share.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert Client().get(url).status_code == 404
    assert Client().get(f"{url}export/?format=json").status_code == 404
    with pytest.raises(ValueError):
        sharing.create(conversation, alice, expires="2d")


def test_a_conversation_given_to_someone_else_closes_its_former_owners_links(
        conversation, alice, django_user_model):
    _, _, url = _share(conversation, alice)
    store.set_owner(conversation, django_user_model.objects.create_user("carol"))
    assert Client().get(url).status_code == 404


def test_views_are_counted(conversation, alice, owner):
    share, _, url = _share(conversation, alice)
    for _ in range(3):
        Client().get(url)
    share.refresh_from_db()
    assert share.views == 3
    page = owner.get("/shares/").content.decode()
    assert f"/s/{sharing.token_of(share)}/" in page and "<dd>3</dd>" in page


def test_the_owner_shares_from_the_page_and_lists_and_revokes(conversation, alice, owner,
                                                               django_user_model):
    page = owner.get(f"/c/{conversation.pk}/").content.decode()
    assert f'action="/c/{conversation.pk}/shares/"' in page
    response = owner.post(f"/c/{conversation.pk}/shares/",
                          {"expires": "7d", "reasoning": "1"})
    assert response.status_code == 302
    share = Share.objects.get(conversation=conversation)
    assert share.include_reasoning and share.expires_at is not None
    listing = owner.get(response["Location"]).content.decode()
    assert f"/s/{sharing.token_of(share)}/" in listing
    # Someone else can neither share it, see the link, update nor revoke it.
    bob = django_user_model.objects.create_user("bob", password="pw-bob-12345")
    other = Client()
    other.force_login(bob)
    assert other.post(f"/c/{conversation.pk}/shares/", {"expires": "never"}).status_code == 404
    assert sharing.token_of(share) not in other.get("/shares/").content.decode()
    assert other.post(f"/shares/{share.pk}/revoke/").status_code == 404
    assert other.post(f"/shares/{share.pk}/update/").status_code == 404
    assert Share.objects.filter(pk=share.pk).exists()
    # A bad expiry is refused with a message, nothing made.
    owner.post(f"/c/{conversation.pk}/shares/", {"expires": "forever"})
    assert Share.objects.filter(conversation=conversation).count() == 1


def test_sharing_off_hides_the_button_and_closes_the_links(conversation, alice, owner,
                                                           settings):
    _, _token, url = _share(conversation, alice)
    settings.TURNSCOPE_SHARING = False
    assert Client().get(url).status_code == 404
    page = owner.get(f"/c/{conversation.pk}/").content.decode()
    assert "/shares/" not in page and ">Share<" not in page
    assert owner.get("/shares/").status_code == 404
    assert owner.post(f"/c/{conversation.pk}/shares/", {"expires": "never"}).status_code == 404
    with pytest.raises(sharing.SharingDisabled):
        sharing.create(conversation, alice)
    settings.TURNSCOPE_SHARING = True
    assert Client().get(url).status_code == 200


def _paths(resolver: URLResolver, prefix: str = "") -> list[tuple[str, URLPattern]]:
    out = []
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            out += _paths(entry, prefix + str(entry.pattern))
        else:
            out.append((prefix + str(entry.pattern), entry))
    return out


def test_every_other_url_of_the_owner_stays_closed_to_the_anonymous_client(
        conversation, alice):
    share, token, url = _share(conversation, alice)
    event = Event.objects.filter(conversation=conversation).first()
    values = {"conversation_id": conversation.pk, "id": conversation.pk, "index": 1,
              "event_id": event.pk, "share_id": share.pk, "object_id": conversation.pk,
              "turn_index": 1, "token": token}
    anonymous = Client()
    assert anonymous.get(url).status_code == 200  # the share opens; nothing else does
    checked = 0
    for pattern, _entry in _paths(get_resolver()):
        route = pattern.replace("^", "").replace("$", "")
        if route.startswith(("s/", "static", "favicon", "csp-report", "accounts/",
                             "api/v1/schema", "api/v1/docs", "recorded", "admin/login",
                             "admin/logout", "admin/password_reset", "admin/jsi18n")) \
                or "(?P" in route:
            continue
        path = "/" + route
        for name, value in values.items():
            for kind in ("uuid", "int", "str", "path"):
                path = path.replace(f"<{kind}:{name}>", str(value))
            path = path.replace(f"<{name}>", str(value))
        if "<" in path:
            continue
        for method in ("get", "post"):
            response = getattr(anonymous, method)(path)
            assert response.status_code in (302, 401, 403, 404, 405), (method, path)
            if response.status_code == 302:
                assert "login" in response["Location"], (method, path)
            body = b"".join(response.streaming_content) if response.streaming \
                else response.content
            assert b"in Paris today" not in body, (method, path)
        checked += 1
    assert checked >= 20


def test_forks_are_linked_only_when_shared_too(conversation, alice):
    child = fork(conversation, 1, owner=alice)
    _, child_token, child_url = _share(child, alice)
    html = Client().get(child_url).content.decode()
    assert "forked from another conversation" in html and "/s/" not in html.split(
        "forked from")[1].split("</p>")[0]
    _, parent_token, parent_url = _share(conversation, alice)
    html = Client().get(child_url).content.decode()
    assert f'href="/s/{parent_token}/"' in html
    assert f'href="/s/{child_token}/"' in Client().get(parent_url).content.decode()
    # The fork's export names no other conversation.
    doc = orjson.loads(b"".join(Client().get(f"/s/{child_token}/export/?format=json")
                                .streaming_content))
    assert doc["conversation"]["forked_from"] is None


def test_search_entry_point_of_a_shared_turn(conversation, alice):
    agent = add_turn(conversation, "agent", status="streaming")
    store.append_events(agent, [EventRecord("provider_artifact", body=ArtifactBody(
        "google.search_entry_point", "Search suggestions",
        display_html='<div class="chip">tides</div><script>alert(1)</script>'))])
    store.finish_turn(agent, status="complete", end_reason="end_turn")
    _, token, url = _share(conversation, alice)
    event = Event.objects.get(turn=agent)
    html = Client().get(url).content.decode()
    frame = f"/s/{token}/events/{event.pk}/search-entry-point/"
    assert frame in html and f"/c/{conversation.pk}/events/" not in html
    response = Client().get(frame)
    assert response.status_code == 200 and b"tides" in response.content
    assert b"<script" not in response.content
    assert response["Referrer-Policy"] == "no-referrer"
    assert "script-src 'none'" in response["Content-Security-Policy"] or \
        "default-src 'none'" in response["Content-Security-Policy"]


def test_earlier_turns_of_a_long_share(conversation, alice, settings):
    settings.TURNSCOPE_PAGE_TURNS = 2
    _, token, url = _share(conversation, alice)
    html = Client().get(url).content.decode()
    assert f'data-fragment="/s/{token}/turns/?from=1&amp;to=3"' in html
    fragment = Client().get(f"/s/{token}/turns/?from=1&to=3")
    assert fragment.status_code == 200
    assert b"in Paris today" in fragment.content and b"Fork here" not in fragment.content


def test_the_token_is_redacted_from_log_lines(conversation, alice, caplog):
    _, token, url = _share(conversation, alice)
    for line in (f'127.0.0.1:5 - - "GET {url}export/?format=json HTTP/1.1" 200 9',
                 f"Not Found: {url}", f"http://127.0.0.1:8000{url}turns/",
                 f"DELETE /api/v1/shares/{token} HTTP/1.1"):
        assert token not in redact_log_line(line)
    logger = logging.getLogger("turnscope.test-share")
    handler = logging.Handler()
    handler.addFilter(RedactingFilter())
    seen = []
    handler.emit = lambda record: seen.append(record.getMessage())
    logger.addHandler(handler)
    try:
        logger.warning("Not Found: %s", url)
    finally:
        logger.removeHandler(handler)
    assert seen and token not in seen[0] and "/s/[REDACTED]/" in seen[0]
