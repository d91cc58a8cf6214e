"""``GET /api/v1/sources`` and ``/api/v1/sources/models``: the Sources figures, yours only
(staff: everyone's, an owner to narrow by)."""

from __future__ import annotations

import pytest

from tests.api.conftest import build_conversation, token_client

pytestmark = pytest.mark.django_db


def test_sources_by_domain_and_url_are_the_owners_own(alice, bob, alice_api, bob_api):
    build_conversation(owner=alice)
    body = alice_api.get("/api/v1/sources").json()
    assert body["count"] == 2 and body["pages"] == 1
    by_domain = {item["domain"]: item for item in body["results"]}
    fr = by_domain["example.fr"]
    assert (fr["cited"], fr["consulted"], fr["consulted_not_cited"], fr["conversations"],
            fr["turns"]) == (1, 1, 0, 1, 1)
    assert fr["models"] == [{"provider": "anthropic", "model": "claude-sonnet-4-20250514",
                             "cited": 1}]
    assert fr["first_seen"] and fr["last_seen"]
    assert by_domain["example.com"]["consulted"] == 0
    urls = alice_api.get("/api/v1/sources", {"group": "url", "sort": "name",
                                             "order": "asc"}).json()["results"]
    assert [u["url"] for u in urls] == ["https://meteo.example.fr/paris",
                                        "https://news.example.com/today"]
    assert urls[0]["title"] == "Météo" and urls[0]["domain"] == "example.fr"
    assert bob_api.get("/api/v1/sources").json()["count"] == 0


def test_staff_see_everyones_and_narrow_by_owner(alice, bob, staff):
    build_conversation(owner=alice)
    build_conversation(owner=bob)
    staff_api = token_client(staff)
    every = staff_api.get("/api/v1/sources").json()["results"]
    assert {i["domain"]: i["conversations"] for i in every} == {"example.fr": 2,
                                                                "example.com": 2}
    one = staff_api.get("/api/v1/sources", {"owner": "bob"}).json()["results"]
    assert {i["domain"]: i["conversations"] for i in one} == {"example.fr": 1, "example.com": 1}
    # the owner filter is staff's only: alice still sees her own
    assert token_client(alice).get("/api/v1/sources", {"owner": "bob"}).json()["count"] == 2


def test_model_profiles(alice, alice_api):
    build_conversation(owner=alice)
    results = alice_api.get("/api/v1/sources/models").json()["results"]
    by = {(p["provider"], p["model"]): p for p in results}
    p = by[("anthropic", "claude-sonnet-4-20250514")]
    assert (p["answers"], p["searched_answers"], p["searches"], p["consulted"],
            p["cited_sources"], p["citations"]) == (1, 1, 1, 1, 2, 2)
    assert p["cited_not_consulted_share"] == 0.5 and p["consulted_not_cited_share"] == 0.0
    assert p["top_domains"][0]["cited"] == 1
    # the turn that named no model is an answer too, of no known model
    assert by[("", "")]["answers"] == 1 and by[("", "")]["consulted_per_answer"] == 0.0
    filtered = alice_api.get("/api/v1/sources/models", {"provider": "openai"}).json()
    assert filtered["results"] == []


def test_bad_filters_are_400(alice_api):
    for params in ({"since": "yesterday"}, {"group": "planet"}, {"sort": "size"},
                   {"page": "-1"}):
        response = alice_api.get("/api/v1/sources", params)
        assert response.status_code == 400, params
    assert alice_api.get("/api/v1/sources/models", {"until": "2026-13-01"}).status_code == 400


def test_anonymous_is_refused(client):
    assert client.get("/api/v1/sources").status_code in (401, 403)
