"""Websockets check the page's exact origin: scheme, host and port (live.origins)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings

from conversations import store
from live.origins import check_origins

pytestmark = pytest.mark.django_db(transaction=True)


def app():
    from turnscope.asgi import application

    return application


def headers(user, origin: bytes | None, host: bytes = b"127.0.0.1:8000", extra=()):
    client = Client()
    client.force_login(user)
    out = [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
           (b"host", host), *extra]
    if origin is not None:
        out.append((b"origin", origin))
    return out


def hello_received(conversation, hdrs, scheme: str = "ws") -> bool:
    """Whether the socket opens and says hello (a refused origin is closed at the handshake)."""
    async def go() -> bool:
        communicator = WebsocketCommunicator(app(), f"/ws/conversations/{conversation.pk}/",
                                             headers=hdrs)
        communicator.scope["scheme"] = scheme
        connected, _ = await communicator.connect()
        if not connected:
            return False
        message = await communicator.receive_json_from(timeout=2)
        await communicator.disconnect()
        return message["type"] == "hello"

    return async_to_sync(go)()


def test_the_page_of_the_same_origin_gets_hello(owner):
    conversation = store.create_conversation(owner=owner)
    assert hello_received(conversation, headers(owner, b"http://127.0.0.1:8000"))
    assert hello_received(conversation, headers(owner, b"https://127.0.0.1:8000"), scheme="wss")
    # Default ports are the same origin written either way.
    assert hello_received(conversation, headers(owner, b"http://localhost", host=b"localhost:80"))


@pytest.mark.parametrize("origin", [
    b"http://127.0.0.1:8209",  # another port of the same host: the reported hijack
    b"http://127.0.0.1",  # the same host on port 80
    b"https://127.0.0.1:8000",  # another scheme
    b"http://localhost:8000",  # another allowed host is another origin
    b"http://evil.example",
    b"null",
    None,
])
def test_a_page_of_another_origin_is_refused(owner, origin):
    conversation = store.create_conversation(owner=owner)
    assert not hello_received(conversation, headers(owner, origin))


def test_a_host_outside_allowed_hosts_is_refused_even_as_its_own_origin(owner):
    conversation = store.create_conversation(owner=owner)
    assert not hello_received(conversation, headers(owner, b"http://evil.example:8000",
                                                    host=b"evil.example:8000"))


@override_settings(TURNSCOPE_ALLOWED_ORIGINS=["https://turnscope.example"])
def test_configured_origins_replace_the_own_origin(owner):
    """Behind a TLS proxy that rewrites Host, the page's origin is the configured one."""
    conversation = store.create_conversation(owner=owner)
    assert hello_received(conversation, headers(owner, b"https://turnscope.example"))
    assert hello_received(conversation, headers(owner, b"https://turnscope.example:443"))
    assert not hello_received(conversation, headers(owner, b"http://turnscope.example"))
    assert not hello_received(conversation, headers(owner, b"https://turnscope.example:8443"))
    assert not hello_received(conversation, headers(owner, b"https://a.turnscope.example"))
    assert not hello_received(conversation, headers(owner, b"http://127.0.0.1:8000"))


@override_settings(SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"))
def test_the_proxy_ssl_header_gives_the_scheme(owner):
    conversation = store.create_conversation(owner=owner)
    forwarded = [(b"x-forwarded-proto", b"https")]
    assert hello_received(conversation, headers(owner, b"https://127.0.0.1:8000",
                                                extra=forwarded))
    assert not hello_received(conversation, headers(owner, b"http://127.0.0.1:8000",
                                                    extra=forwarded))


@pytest.mark.parametrize("bad", ["*", "127.0.0.1", "https://.example.com", "ftp://x.example",
                                 "https://x.example/path", "https://x.example:port"])
def test_loose_configured_origins_are_a_configuration_error(bad):
    with pytest.raises(ImproperlyConfigured):
        check_origins([bad])
    check_origins(["https://x.example", "http://127.0.0.1:8000", "http://[::1]:8000"])
