"""Each provider's own error shape, both ways (the shapes are the providers' own:
``Provider.error_body`` and ``error_code`` in ``providers/<p>/provider.py``).

``body`` builds the error a provider's SDK expects (so an app that gets a 401 from Turnscope's
proxy sees the same kind of exception it would get from the provider), and ``read`` takes the
code and message out of an error the provider sent (an HTTP 4xx/5xx body), so a failed turn shows
them.
"""

from __future__ import annotations

from typing import Any

import orjson

from guards.redaction import redact_text
from providers import registry
from providers.provider import error_code


def body(provider: str, status: int, code: str, message: str) -> bytes:
    """The JSON error body ``provider`` sends with ``status``; ``code`` is Turnscope's name for
    what went wrong (it goes where the provider puts a machine-readable code). A service with
    no shape of its own registered gets the common one."""
    found = registry.find(provider)
    value: dict[str, Any] = (found.error_body(status, code, message) if found is not None
                             else {"error": {"code": code, "message": message}})
    return orjson.dumps(value)


def read(provider: str, status: int, raw: bytes) -> tuple[str, str]:
    """``(code, message)`` from an error response body (redacted: an error may echo a key);
    ``http_<status>`` and the start of the body when it is not in the provider's shape."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = None
    if isinstance(value, list) and value and isinstance(value[0], dict):
        value = value[0]  # Gemini's JSON-array stream form wraps an error too
    error = value.get("error") if isinstance(value, dict) else None
    code = message = ""
    if isinstance(error, dict):
        message = _string(error.get("message"))
        found = registry.find(provider)
        code = found.error_code(error) if found is not None else error_code(error)
    elif isinstance(error, str):  # some gateways: {"error": "message"}
        message = error
    if not message:
        message = raw[:300].decode("utf-8", "replace").strip()
    return redact_text(code or f"http_{status}")[:200], redact_text(message)[:2000]


def _string(value: object) -> str:
    return value if isinstance(value, str) else ""
