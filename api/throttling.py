"""Throttles beyond the project defaults (user and anonymous rates, see settings)."""

from __future__ import annotations

import os

from rest_framework.throttling import UserRateThrottle


class WriteRateThrottle(UserRateThrottle):
    """Writes (ingest, import, fork) parse untrusted bodies and touch many rows: a lower rate."""

    scope = "api_write"
    rate = os.environ.get("API_WRITE_RATE", "120/min")
