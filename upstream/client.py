"""The one HTTP client to the providers: pooled, with connect and read timeouts.

Base URLs come from settings (``TURNSCOPE_UPSTREAM_ANTHROPIC`` / ``_OPENAI`` / ``_GOOGLE``),
defaulting to the providers' public API URLs; a path is appended to them as the provider's SDK
would append it to its own base URL (``/v1/messages``, ``/v1/responses``,
``/v1beta/models/{model}:streamGenerateContent``).

One ``httpx.AsyncClient`` per event loop (its pooled connections belong to that loop): daphne
runs one, so in the server there is one client. Responses are opened with ``stream=True`` and
read raw (``Response.aiter_raw``): the bytes as the provider sent them, never decoded or
re-encoded here.

    response = await client.send("POST", client.url("anthropic", "/v1/messages"),
                                 headers=[(b"x-api-key", key), ...], content=body)
    try:
        async for chunk in response.aiter_raw(): ...
    finally:
        await response.aclose()
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx
from django.conf import settings

from providers import registry
from upstream import hosts

PUBLIC_BASE_URLS = {provider.name: provider.api_url for provider in registry.providers()}
PROVIDERS = tuple(PUBLIC_BASE_URLS)

# httpx fills in these when a request does not set them; a forwarded request carries exactly
# what the app sent, so they are removed again unless the app sent them (``send``).
_CLIENT_DEFAULTS = ("accept", "accept-encoding", "connection", "user-agent")

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


class UnknownProvider(ValueError):
    pass


def base_url(provider: str) -> str:
    """The configured base URL of ``provider``'s API (no trailing slash)."""
    configured = getattr(settings, "TURNSCOPE_UPSTREAM", {}) or {}
    try:
        default = PUBLIC_BASE_URLS[provider]
    except KeyError:
        raise UnknownProvider(f"unknown provider {provider!r}") from None
    return (configured.get(provider) or default).rstrip("/")


def url(provider: str, path: str, query: str | bytes = "") -> str:
    """``path`` (and the raw ``query`` string, kept as it came) under the base URL of
    ``provider``: one of the three providers' APIs, or a service of ``upstream.hosts`` (Azure
    OpenAI, Vertex AI, a named upstream)."""
    if isinstance(query, bytes):
        query = query.decode("latin-1")
    if provider in PUBLIC_BASE_URLS:
        base = base_url(provider)
    else:
        host = hosts.find(provider)
        if host is None:
            raise UnknownProvider(f"unknown provider {provider!r}")
        base = hosts.base_url(host, path)
    full = base + "/" + path.lstrip("/")
    return f"{full}?{query}" if query else full


def timeouts() -> httpx.Timeout:
    """Connect within ``TURNSCOPE_UPSTREAM_CONNECT_TIMEOUT`` seconds; then wait at most
    ``TURNSCOPE_UPSTREAM_READ_TIMEOUT`` for each read (a stream may be silent while the model
    thinks, so this is per read, not for the whole response)."""
    connect = float(getattr(settings, "TURNSCOPE_UPSTREAM_CONNECT_TIMEOUT", 10.0))
    read = float(getattr(settings, "TURNSCOPE_UPSTREAM_READ_TIMEOUT", 600.0))
    return httpx.Timeout(connect=connect, read=read, write=read, pool=connect)


def _no_cookies() -> CookieJar:
    """A jar that keeps nothing: one client serves every user's proxied calls and the server's
    own keys, so a cookie a provider set on one response (``__cf_bm``, ``_cfuvid``) would go out
    on everyone's next request. A request carries only the cookies its sender put in it."""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))  # (httpx uses a jar as is)


def client() -> httpx.AsyncClient:
    """The running loop's client (made on first use)."""
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None or found.is_closed:
        found = _clients[loop] = httpx.AsyncClient(
            timeout=timeouts(),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64,
                                keepalive_expiry=60),
            follow_redirects=False,  # a redirect is the app's to follow, as without the proxy
            trust_env=False,  # never a proxy from the environment between Turnscope and a provider
            cookies=_no_cookies(),
        )
    return found


async def send(
    method: str,
    target: str,
    *,
    headers: Sequence[tuple[bytes, bytes]] = (),
    content: bytes = b"",
) -> httpx.Response:
    """Send a request and return the response once its headers are in; the body is read by the
    caller (``aiter_raw``) and the response must be closed (``aclose``).

    Raises ``httpx.TimeoutException`` (connect or first-byte timeout) and
    ``httpx.TransportError`` (unreachable) as httpx does."""
    http = client()
    request = http.build_request(method, target, headers=list(headers), content=content)
    sent = {name.lower() for name, _ in headers}
    for name in _CLIENT_DEFAULTS:
        if name.encode() not in sent and name in request.headers:
            del request.headers[name]
    return await http.send(request, stream=True)


async def aclose() -> None:
    """Close the running loop's client (its pooled connections)."""
    found = _clients.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.aclose()
