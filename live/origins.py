"""Which pages may open a websocket: the exact origin (scheme, host and port), never the host
alone.

A browser sends a websocket's ``Origin`` whatever page opened it, and the session cookie with
it, so a page on another port or scheme of the same host (``http://127.0.0.1:8209``) could read a
user's live conversation if only the host were checked (``AllowedHostsOriginValidator``). Allowed:
the origins in ``settings.TURNSCOPE_ALLOWED_ORIGINS`` (``TURNSCOPE_ALLOWED_ORIGINS``, for a
deployment behind a proxy that rewrites ``Host`` or terminates TLS), or, when none are set, the
origin the websocket itself was opened on: its scheme (``wss`` is ``https``; the
``SECURE_PROXY_SSL_HEADER`` is honoured as Django honours it for HTTP) and its ``Host`` header,
which must be one of ``ALLOWED_HOSTS``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import OriginValidator
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http.request import split_domain_port, validate_host


def check_origins(origins: list[str]) -> None:
    """Each must be a ``scheme://host[:port]`` origin; anything looser (a bare host, a path,
    ``*``, a ``.domain`` wildcard) is refused: each names one origin exactly."""
    for item in origins:
        parts = urlsplit(item)
        if (parts.scheme not in ("http", "https") or not parts.hostname
                or parts.hostname.startswith(".") or parts.path not in ("", "/")
                or parts.query or parts.fragment or parts.username or parts.password):
            raise ImproperlyConfigured(
                f"TURNSCOPE_ALLOWED_ORIGINS: {item!r} is not an origin like https://host[:port]")
        try:
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            raise ImproperlyConfigured(f"TURNSCOPE_ALLOWED_ORIGINS: bad port in {item!r}") from None


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin1")
    return None


def _secure(scope: dict[str, Any]) -> bool:
    if settings.SECURE_PROXY_SSL_HEADER:
        header, secure_value = settings.SECURE_PROXY_SSL_HEADER
        # Django's form is the META key ("HTTP_X_FORWARDED_PROTO"); the header is its tail.
        name = header.removeprefix("HTTP_").replace("_", "-").lower().encode()
        forwarded = _header(scope, name)
        if forwarded is not None:
            return forwarded.split(",", 1)[0].strip() == secure_value
    return scope.get("scheme", "ws") in ("wss", "https")


def own_origin(scope: dict[str, Any]) -> str | None:
    """The origin this websocket was opened on, if its ``Host`` is an allowed host."""
    host = _header(scope, b"host")
    if not host:
        return None
    domain, _port = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # as Django does for HTTP
    if not domain or domain.startswith(".") or not validate_host(domain, allowed):
        return None
    return f"{'https' if _secure(scope) else 'http'}://{host.lower()}"


def allowed_origins(scope: dict[str, Any]) -> list[str]:
    configured = getattr(settings, "TURNSCOPE_ALLOWED_ORIGINS", None)
    if configured:
        return list(configured)
    own = own_origin(scope)
    return [own] if own else []


class ExactOriginValidator:
    """Channels' ``OriginValidator`` (scheme, host and port compared; default ports filled in)
    over the app's own origins, worked out per connection (settings are read each time)."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        validator = OriginValidator(self.application, allowed_origins(scope))
        return await validator(scope, receive, send)
