"""Each provider's own error shape, both ways.

``body`` builds the error a provider's SDK expects (so an app that gets a 401 from Turnscope's
proxy sees the same kind of exception it would get from the provider), and ``read`` takes the
code and message out of an error the provider sent (an HTTP 4xx/5xx body), so a failed turn shows
them.
"""

from __future__ import annotations

from typing import Any

import orjson

from guards.redaction import redact_text

# Anthropic error ``type`` per status (docs: "Errors").
_ANTHROPIC_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
    500: "api_error", 502: "api_error", 503: "overloaded_error", 504: "api_error",
    529: "overloaded_error",
}
# google.rpc.Code names Gemini puts in ``error.status``.
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 502: "UNAVAILABLE",
    503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}


def body(provider: str, status: int, code: str, message: str) -> bytes:
    """The JSON error body ``provider`` sends with ``status``; ``code`` is Turnscope's name for
    what went wrong (it goes where the provider puts a machine-readable code)."""
    value: dict[str, Any]
    if provider == "anthropic":
        value = {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"),
                                            "message": message}}
    elif provider == "openai":
        kind = "server_error" if status >= 500 else "invalid_request_error"
        value = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    elif provider == "google":
        value = {"error": {"code": status, "message": message,
                           "status": _GOOGLE_STATUS.get(status, "UNKNOWN")}}
    else:
        value = {"error": {"code": code, "message": message}}
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
        message = error.get("message") if isinstance(error.get("message"), str) else ""
        if provider == "anthropic":
            code = error.get("type") if isinstance(error.get("type"), str) else ""
        elif provider == "google":
            code = error.get("status") if isinstance(error.get("status"), str) else ""
        else:
            for key in ("code", "type"):
                if isinstance(error.get(key), str) and error[key]:
                    code = error[key]
                    break
    elif isinstance(error, str):  # some gateways: {"error": "message"}
        message = error
    if not message:
        message = raw[:300].decode("utf-8", "replace").strip()
    return redact_text(code or f"http_{status}")[:200], redact_text(message)[:2000]
