"""Password guessing is rate-limited per client address and username (issue 11, item 8): 40
wrong passwords used to leave the right one working."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache(settings):
    settings.TURNSCOPE_LOGIN_FAILURES = "3/15min"
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123",
                                                 is_staff=True)


def login(client: Client, password: str, username: str = "alice", path: str = "/accounts/login/"):
    return client.post(path, {"username": username, "password": password})


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_after_too_many_failures_even_the_right_password_is_refused(alice):
    client = Client(REMOTE_ADDR="203.0.113.7")
    assert [login(client, "wrong").status_code for _ in range(3)] == [200, 200, 429]
    response = login(client, "pw-alice-123")
    assert response.status_code == 429
    assert "Too many failed attempts" in response.content.decode()
    assert not logged_in(client)
    # the admin's login shares the limit
    login(client, "pw-alice-123", path="/admin/login/")
    assert not logged_in(client)
    # another address, and another username from this address, are not held back
    other = Client(REMOTE_ADDR="198.51.100.9")
    assert login(other, "pw-alice-123").status_code == 302 and logged_in(other)
    assert login(client, "wrong", username="bob").status_code == 200


def test_a_success_clears_the_count(alice):
    client = Client(REMOTE_ADDR="203.0.113.8")
    for _ in range(2):
        login(client, "wrong")
    assert login(client, "pw-alice-123").status_code == 302
    client.logout()
    for _ in range(2):
        login(client, "wrong")
    assert login(client, "pw-alice-123").status_code == 302  # 2 + 2, never 3 in a row


def test_the_rate_parser():
    from guards.ratelimit import parse_rate

    assert parse_rate("10/min") == (10, 60)
    assert parse_rate("5/15min") == (5, 900)
    assert parse_rate("100/day") == (100, 86400)
    with pytest.raises(ValueError):
        parse_rate("ten per minute")


def test_sessions_that_name_the_model_backend_stay_logged_in(alice):
    client = Client()
    client.force_login(alice, backend="django.contrib.auth.backends.ModelBackend")
    assert client.get("/").status_code == 200
