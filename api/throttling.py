"""Throttles: the project defaults (user and anonymous rates, see settings) and a lower rate
for writes, all failing open when the cache that counts requests fails.

A throttle is a guard against abuse, not a gate the site depends on: with Redis down, a request
is let through (and the outage logged, at most every few seconds) rather than answered 500.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from django.conf import settings
from rest_framework import throttling
from rest_framework.authtoken.models import Token

log = logging.getLogger("turnscope.api")

WARN_EVERY = 10.0  # seconds
_last_warning = 0.0


class FailOpen:
    """Mixin for a ``SimpleRateThrottle``: a cache error allows the request."""

    def allow_request(self, request: Any, view: Any) -> bool:
        try:
            return super().allow_request(request, view)  # type: ignore[misc, no-any-return]
        except Exception:
            global _last_warning
            now = time.monotonic()
            if now - _last_warning >= WARN_EVERY:
                _last_warning = now
                log.warning("throttle %s: the cache is unavailable, letting requests through",
                            type(self).__name__, exc_info=True)
            return True


class UserRateThrottle(FailOpen, throttling.UserRateThrottle):
    pass


class AnonRateThrottle(FailOpen, throttling.AnonRateThrottle):
    pass


class WriteRateThrottle(UserRateThrottle):
    """Writes (ingest, import, fork) parse untrusted bodies and touch many rows: a lower rate."""

    scope = "api_write"
    rate = os.environ.get("API_WRITE_RATE", "120/min")


class WriteThrottled:
    """A view mixin: requests of its ``write_methods`` are also under ``WriteRateThrottle``."""

    write_methods: tuple[str, ...] = ("POST",)

    def get_throttles(self) -> list[Any]:
        found = list(super().get_throttles())  # type: ignore[misc]
        if self.request.method in self.write_methods:  # type: ignore[attr-defined]
            found.append(WriteRateThrottle())
        return found


class BulkImportRateThrottle(UserRateThrottle):
    """A bulk import: ingest and import requests from a token client (a script sending a
    history file by file), at ``settings.API_BULK_IMPORT_RATE`` (default 6000/min), in place of
    the write and per-user rates a browser session gets."""

    scope = "api_bulk_import"

    def get_rate(self) -> str:
        return str(getattr(settings, "API_BULK_IMPORT_RATE", "6000/min"))


def is_bulk_client(request: Any) -> bool:
    """A request authenticated by an API token (not a browser session)."""
    return isinstance(getattr(request, "auth", None), Token)


def import_throttles(request: Any, default: list[Any]) -> list[Any]:
    """The throttles of an ingest or import request: the bulk rate for token clients."""
    return [BulkImportRateThrottle()] if is_bulk_client(request) else default
