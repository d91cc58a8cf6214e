"""live.forwarded: behind ``serve --proxy-headers`` the client is read from the right of
X-Forwarded-For, only as far as the trusted hops go: a client that writes the header itself
gets round no per-address limit."""

from __future__ import annotations

import inspect

import pytest
from daphne import http_protocol, utils, ws_protocol
from twisted.web.http_headers import Headers

from live import forwarded
from tests.support import source_fingerprint

PEER = ["10.0.0.2", 51000]  # the proxy in front


def read(settings, trust: str, *values: bytes, peer=PEER, proto: bytes | None = None):
    settings.TURNSCOPE_TRUSTED_PROXIES = trust
    headers = Headers({b"X-Forwarded-For": list(values)} if values else {})
    if proto is not None:
        headers.setRawHeaders(b"X-Forwarded-Proto", [proto])
    return forwarded.parse_x_forwarded_for(headers, original_addr=list(peer),
                                           original_scheme="http")


def test_nginx_replacing_the_header_names_the_client(settings):
    # proxy_set_header X-Forwarded-For $remote_addr;
    assert read(settings, "1", b"203.0.113.7")[0] == ["203.0.113.7", 0]


def test_nginx_appending_names_the_client_whatever_it_wrote_before(settings):
    # proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; the client sent its own
    assert read(settings, "1", b"198.51.100.99, 203.0.113.7")[0] == ["203.0.113.7", 0]
    assert read(settings, "1", b"198.51.100.99", b"203.0.113.7")[0] == ["203.0.113.7", 0]


def test_two_proxies_by_count(settings):
    # a CDN, then nginx appending: "forged, client, cdn"
    assert read(settings, "2", b"1.1.1.1, 203.0.113.7, 192.0.2.10")[0] == ["203.0.113.7", 0]
    assert read(settings, "2", b"203.0.113.7")[0] == PEER  # fewer than the hops: not believed


def test_trusted_addresses(settings):
    trust = "10.0.0.0/8, 192.0.2.10"
    assert read(settings, trust, b"1.1.1.1, 203.0.113.7, 192.0.2.10")[0] == ["203.0.113.7", 0]
    # a peer that is not one of ours: its headers are its own words
    stranger = ["198.51.100.5", 4000]
    assert read(settings, trust, b"203.0.113.7", peer=stranger)[0] == stranger
    assert read(settings, trust, b"10.1.1.1, 10.2.2.2")[0] == ["10.1.1.1", 0]  # all ours


def test_the_scheme_is_the_nearest_proxys_and_only_with_the_address(settings):
    assert read(settings, "1", b"203.0.113.7", proto=b"http, https") == (
        ["203.0.113.7", 0], "https")
    assert read(settings, "1", proto=b"https") == (PEER, "http")
    assert read(settings, "1", b"[2001:db8::1]:443")[0] == ["2001:db8::1", 0]


def test_installed_where_daphne_reads_the_headers(monkeypatch):
    monkeypatch.setattr(http_protocol, "parse_x_forwarded_for", utils.parse_x_forwarded_for)
    monkeypatch.setattr(ws_protocol, "parse_x_forwarded_for", utils.parse_x_forwarded_for)
    forwarded.trust_configured_hops()
    assert http_protocol.parse_x_forwarded_for is forwarded.parse_x_forwarded_for
    assert ws_protocol.parse_x_forwarded_for is forwarded.parse_x_forwarded_for


def test_the_daphne_code_it_replaces_is_unchanged():
    """Daphne calls ``parse_x_forwarded_for`` by the name each protocol module imported, with
    these arguments; an upgrade that changes either fails here."""
    assert source_fingerprint(utils.parse_x_forwarded_for) == "7d9ccb0df9d4afa8"
    for module in (http_protocol, ws_protocol):
        assert "from .utils import" in inspect.getsource(module)
        assert "= parse_x_forwarded_for(" in inspect.getsource(module)


@pytest.mark.parametrize("value", ["", "x"])
def test_a_bad_setting_is_an_error_not_a_silent_default(settings, value):
    settings.TURNSCOPE_TRUSTED_PROXIES = value
    if value:
        with pytest.raises(ValueError):
            forwarded.trusted()
    else:
        assert forwarded.trusted() == 1
