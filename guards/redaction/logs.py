"""Redaction of log lines: every log line and daphne's access log go through
``redact_log_line`` (``RedactingFilter`` on the handlers)."""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote_plus

from guards.redaction.rules import MARK, redact_text

# Tokens in a URL's path: the recording proxy's path-form API token (``/proxy/t/<token>/…``)
# and a shared link's (``/s/<token>/…``, ``/api/v1/shares/<token>``). ``/s/`` is matched
# anywhere: a stray ``/s/`` in some other URL loses its next segment to the mask, which costs
# a log reader less than a share's token would cost its owner.
_PATH_TOKEN = re.compile(r"(/proxy/t/|/s/|/api/v1/shares/)[^/\s?#\"']+")
_PATH_TOKEN_HINTS = ("/proxy/t/", "/s/", "/api/v1/shares/")
# A URL's query string in a log line (a request line, an access log entry).
_QUERY = re.compile(r"\?[^\s\"'#<>]+")


def _redact_query(match: re.Match[str]) -> str:
    """Each parameter read as a client sent it (percent-decoded: ``Bearer+…``, ``%3A``): a
    value that holds a credential once decoded is logged as ``[REDACTED]``."""
    params = []
    for param in match.group()[1:].split("&"):
        name, eq, value = param.partition("=")
        decoded = unquote_plus(value)
        if eq and (redact_text(decoded) != decoded or redact_text(f"?{name}=x") != f"?{name}=x"):
            value = MARK
        params.append(f"{name}{eq}{value}")
    return "?" + "&".join(params)


def redact_log_line(text: str) -> str:
    """A log line with every credential redacted: the rules above, the query parameters of any
    URL in it as decoded, and the tokens in paths (the proxy's, a share's) masked. Every log
    line and daphne's access log go through this one function."""
    if any(hint in text for hint in _PATH_TOKEN_HINTS):
        text = _PATH_TOKEN.sub(lambda m: m.group(1) + MARK, text)
    if "?" in text:
        text = _QUERY.sub(_redact_query, text)
    return redact_text(text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the formatted message (attach it to handlers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_log_line(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
