"""The client's address behind a proxy (``serve --proxy-headers``), trusting only the hops
configured.

``X-Forwarded-For`` is a list each proxy appends to (nginx's ``$proxy_add_x_forwarded_for``) or
replaces (``$remote_addr``). Its left-most entry is whatever the client wrote — daphne's own
reading takes it, so a client that changes the header gets round every per-address limit (the
failed-login one). As uvicorn and gunicorn do, the entries are read from the right instead, and
only as far as the trusted proxies go (``TURNSCOPE_TRUSTED_PROXIES``):

* a number ``N`` (default 1): the last ``N`` hops are proxies of ours — the peer and those that
  appended after it — so the client is the ``N``-th entry from the right (none: the peer);
* addresses or networks (``10.0.0.0/8,127.0.0.1``): the headers count only when the peer is one
  of them, and the client is the right-most entry that is not.

``X-Forwarded-Proto`` and ``-Port`` are read from the nearest proxy (their right-most value) and
only when the address was. Installed in daphne's HTTP and websocket protocols (which import
daphne's ``parse_x_forwarded_for`` by name); ``tests/live/test_forwarded.py`` pins the code.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def trusted() -> int | list[Network]:
    """``TURNSCOPE_TRUSTED_PROXIES`` read: a number of hops, or the proxies' networks."""
    value = str(getattr(settings, "TURNSCOPE_TRUSTED_PROXIES", "1") or "1").strip()
    if value.isdigit():
        return max(1, int(value))
    return [ipaddress.ip_network(item.strip(), strict=False)
            for item in value.split(",") if item.strip()]


def _address(entry: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    entry = entry.strip()
    if entry.startswith("["):  # [v6]:port
        entry = entry[1:].split("]", 1)[0]
    elif entry.count(":") == 1:  # v4:port
        entry = entry.split(":", 1)[0]
    try:
        return ipaddress.ip_address(entry)
    except ValueError:
        return None


def _is_trusted(entry: str, networks: list[Network]) -> bool:
    found = _address(entry)
    return found is not None and any(found in network for network in networks)


def client(entries: list[str], peer: str, trust: int | list[Network]) -> str | None:
    """The client's address from the ``X-Forwarded-For`` entries (in order) and the peer's
    address, or None when the headers are not to be believed (keep the peer)."""
    entries = [e.strip() for e in entries if e.strip()]
    if not entries:
        return None
    if isinstance(trust, int):
        return entries[-trust] if len(entries) >= trust else None
    if not _is_trusted(peer, trust):
        return None
    for entry in reversed(entries):
        if not _is_trusted(entry, trust):
            return entry
    return entries[0]  # every hop is ours: the first one saw the client


def _values(headers: Any, name: str) -> list[str]:
    """Every value of a header, all its lines and comma-separated items, in order."""
    raw = headers.getRawHeaders(name.encode()) if hasattr(headers, "getRawHeaders") else None
    if raw is None and isinstance(headers, dict):
        raw = next((v for k, v in headers.items() if k.lower() == name.lower().encode()), None)
        if isinstance(raw, bytes):
            raw = [raw]
    return [item for line in raw or [] for item in line.decode("latin-1").split(",")]


def parse_x_forwarded_for(
    headers: Any,
    address_header_name: str | None = "X-Forwarded-For",
    port_header_name: str | None = "X-Forwarded-Port",
    proto_header_name: str | None = "X-Forwarded-Proto",
    original_addr: Any = None,
    original_scheme: Any = None,
) -> tuple[Any, Any]:
    """Daphne's ``parse_x_forwarded_for``, reading from the right within the trusted hops."""
    if not address_header_name:
        return original_addr, original_scheme
    peer = original_addr[0] if original_addr else ""
    found = client(_values(headers, address_header_name), peer, trusted())
    if found is None:
        return original_addr, original_scheme
    address = _address(found)
    result = [str(address) if address is not None else found, 0]
    scheme = original_scheme
    ports = _values(headers, port_header_name) if port_header_name else []
    if ports and ports[-1].strip().isdigit():
        result[1] = int(ports[-1].strip())
    protos = _values(headers, proto_header_name) if proto_header_name else []
    if protos and protos[-1].strip().lower() in ("http", "https", "ws", "wss"):
        scheme = protos[-1].strip().lower()
    return result, scheme


def trust_configured_hops() -> None:
    """Read the forwarded headers this way in daphne's HTTP and websocket protocols."""
    from daphne import http_protocol, ws_protocol

    http_protocol.parse_x_forwarded_for = parse_x_forwarded_for  # type: ignore[assignment]
    ws_protocol.parse_x_forwarded_for = parse_x_forwarded_for  # type: ignore[assignment]
