"""Throttles beyond the project defaults (user and anonymous rates, see settings)."""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from rest_framework.authtoken.models import Token
from rest_framework.throttling import UserRateThrottle


class WriteRateThrottle(UserRateThrottle):
    """Writes (ingest, import, fork) parse untrusted bodies and touch many rows: a lower rate."""

    scope = "api_write"
    rate = os.environ.get("API_WRITE_RATE", "120/min")


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
