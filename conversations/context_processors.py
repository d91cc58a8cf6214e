"""Template context every page reads: whether this instance shares conversations (the Share
button and the Shares link show only then)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from conversations import sharing as _sharing


def sharing(request: HttpRequest) -> dict[str, Any]:
    return {"sharing_enabled": _sharing.enabled()}
