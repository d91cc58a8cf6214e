"""The shares API: make a link to a conversation of yours, list yours, revoke one; in the
OpenAPI schema; closed to others and when sharing is turned off."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from conversations.models import Share
from tests.api.conftest import token_client

pytestmark = pytest.mark.django_db


def test_create_list_and_revoke(alice_api, conversation):
    made = alice_api.post(f"/api/v1/conversations/{conversation.pk}/shares",
                          {"expires": "7d", "include_reasoning": False}, format="json")
    assert made.status_code == 201, made.content
    body = made.json()
    token = body["token"]
    assert len(token) >= 43 and body["url"].endswith(f"/s/{token}/")
    assert body["conversation"] == str(conversation.pk) and body["turns"] == 5
    assert body["include_reasoning"] is False and body["expires_at"] and not body["expired"]
    page = Client().get(f"/s/{token}/")
    assert page.status_code == 200 and b"Let me check." not in page.content
    listed = alice_api.get("/api/v1/shares").json()
    assert [s["token"] for s in listed] == [token] and listed[0]["views"] == 1
    assert alice_api.delete(f"/api/v1/shares/{token}").status_code == 204
    assert Client().get(f"/s/{token}/").status_code == 404
    assert alice_api.delete(f"/api/v1/shares/{token}").status_code == 404
    assert alice_api.get("/api/v1/shares").json() == []


def test_bad_options_are_refused(alice_api, conversation):
    response = alice_api.post(f"/api/v1/conversations/{conversation.pk}/shares",
                              {"expires": "2d"}, format="json")
    assert response.status_code == 400 and "expires" in response.content.decode()
    assert not Share.objects.exists()


def test_others_can_neither_share_nor_revoke(alice_api, conversation, django_user_model):
    bob = token_client(django_user_model.objects.create_user("bob", password="pw-bob-12345"))
    assert bob.post(f"/api/v1/conversations/{conversation.pk}/shares", {},
                    format="json").status_code == 404
    token = alice_api.post(f"/api/v1/conversations/{conversation.pk}/shares", {},
                           format="json").json()["token"]
    assert bob.get("/api/v1/shares").json() == []
    assert bob.delete(f"/api/v1/shares/{token}").status_code == 404
    anonymous = APIClient()
    assert anonymous.get("/api/v1/shares").status_code in (401, 403)
    assert anonymous.delete(f"/api/v1/shares/{token}").status_code in (401, 403)
    assert Client().get(f"/s/{token}/").status_code == 200


def test_sharing_off(alice_api, conversation, settings):
    settings.TURNSCOPE_SHARING = False
    response = alice_api.post(f"/api/v1/conversations/{conversation.pk}/shares", {},
                              format="json")
    assert response.status_code == 404 and "turned off" in response.json()["detail"]
    assert alice_api.get("/api/v1/shares").status_code == 404


def test_in_the_openapi_schema(alice_api):
    schema = alice_api.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    text = schema.content.decode()
    for path in ("/api/v1/conversations/{id}/shares", "/api/v1/shares",
                 "/api/v1/shares/{token}"):
        assert path in text, path
