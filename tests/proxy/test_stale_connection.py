"""A database connection that died under the proxy (PostgreSQL restarted, the backend ended)
is replaced before a request is refused: the token lookup tries once more on a new connection
instead of answering 503. PostgreSQL only (``DATABASE_URL``): SQLite has no server to lose."""

from __future__ import annotations

import pytest
from django.db import connection, connections
from rest_framework.authtoken.models import Token

from proxy import app

pytestmark = pytest.mark.django_db(transaction=True)


def end_backend_of_this_connection() -> None:
    """Ends this connection's server process from another connection, as a restart would."""
    pid = connection.connection.info.backend_pid
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            assert cursor.fetchone()[0]
    finally:
        other.close()


@pytest.mark.parametrize("health_checks", [True, False])
def test_the_token_lookup_survives_a_connection_ended_underneath(django_user_model, settings,
                                                                 health_checks):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL): a server that can end a connection")
    # Both ways: Django's health check before reuse, and the lookup's own retry without it.
    settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] = health_checks
    connection.settings_dict["CONN_HEALTH_CHECKS"] = health_checks
    user = django_user_model.objects.create_user("proxied")
    key = Token.objects.create(user=user).key
    assert app._lookup(key) == user
    end_backend_of_this_connection()
    assert app._lookup(key) == user
