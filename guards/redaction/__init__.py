"""Secrets redaction: credential-shaped strings never reach the database or the logs.

Everything that comes in (provider wire bytes, import documents, titles and prompts given to the
API) passes through here on the way in. Only *specific* credential shapes are matched (provider
API keys, bearer tokens, credential headers, key-bearing URL query parameters, JWTs): provider
payloads legitimately hold long opaque blobs (signatures, encrypted search results) and those
must round-trip unchanged, so there is no "long random run" rule, and every key prefix must start
at a token boundary (a key prefix inside a base64url blob is not a key).

Redaction replaces the secret with ``[REDACTED]``, which contains no character that needs escaping
in JSON, so redacting wire text keeps it valid JSON / SSE.

The rules and the value-level functions are in ``rules``; wire bytes (streamed, recorded) in
``wire``; event records and export documents in ``documents``; log lines in ``logs``; text shown
while it streams in ``live``. Callers use the names below.
"""

from guards.redaction.documents import redact_document, redact_records
from guards.redaction.live import LIVE_CONTEXT, LiveText
from guards.redaction.logs import RedactingFilter, redact_log_line
from guards.redaction.rules import (
    MARK,
    looks_secret,
    may_hold_secret,
    redact_bytes,
    redact_fragment,
    redact_text,
    redact_value,
    redact_with_map,
)
from guards.redaction.wire import WireLines, redact_wire

__all__ = [
    "LIVE_CONTEXT",
    "MARK",
    "LiveText",
    "RedactingFilter",
    "WireLines",
    "looks_secret",
    "may_hold_secret",
    "redact_bytes",
    "redact_document",
    "redact_fragment",
    "redact_log_line",
    "redact_records",
    "redact_text",
    "redact_value",
    "redact_wire",
    "redact_with_map",
]
