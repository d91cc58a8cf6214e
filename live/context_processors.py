"""Template context for the live calls: the composer's provider choices (a callable, so they
are read from the environment only when a template shows the composer)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from live import calls


def live_calls(request: HttpRequest) -> dict[str, Any]:
    return {"live_composer": calls.composer}
