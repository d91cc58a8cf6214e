"""Access logs (daphne's, and the development servers' through ``logging``) redact like every
other log line: keys planted in query strings, percent-encoded as clients send them, and the
proxy's path token never appear (issue 11, item 2)."""

from __future__ import annotations

import io
import logging
from urllib.parse import quote, urlencode

import pytest

from tests.api.test_secrets import HEADER_LINE, MARKERS, SECRETS, URL_SECRET

TOKEN = "9f8e7d6c5b4a39281706f5e4d3c2b1a0deadbeef"
KEY_VALUES = [*SECRETS, HEADER_LINE, f"my key: {SECRETS[0]}", f"note {SECRETS[3]} end"]


def planted_paths() -> list[str]:
    """Request targets as clients send them: every secret in ingest's prompt / title / endpoint
    and in other parameters, quoted both ways (``+`` and ``%20``), and behind a path token."""
    paths = []
    for value in KEY_VALUES:
        for name in ("prompt", "title", "q", "note"):
            paths.append("/api/v1/conversations/ingest?provider=anthropic&"
                         + urlencode({name: value}))
            paths.append(f"/api/v1/conversations/ingest?{name}={quote(value, safe='')}")
        endpoint = f"https://generativelanguage.example/v1beta/models/x?{URL_SECRET}"
        paths.append("/api/v1/conversations/ingest?" + urlencode({"endpoint": endpoint}))
    paths.append(f"/proxy/t/{TOKEN}/google/v1beta/models/x:streamGenerateContent?alt=sse&"
                 f"{URL_SECRET}")
    paths.append(f"/proxy/t/{TOKEN}/anthropic/v1/messages")
    return paths


def assert_clean(log: str, entries: int) -> None:
    assert log.count("\n") >= entries
    for marker in [*MARKERS, TOKEN, "Q7x", "RN3hLMy"]:
        assert marker not in log, log[max(0, log.find(marker) - 120):log.find(marker) + 60]
    assert "/proxy/t/[REDACTED]/google/v1beta/models/x:streamGenerateContent" in log
    assert "provider=anthropic" in log  # what is not a secret is still logged


def test_daphnes_access_log_redacts_planted_keys_and_path_tokens():
    from daphne.access import AccessLogGenerator

    from proxy.app import redact_access_log

    redact_access_log()
    stream = io.StringIO()
    log = AccessLogGenerator(stream)
    paths = planted_paths()
    for path in paths:
        log("http", "complete", {"client": "127.0.0.1:5000", "path": path, "status": 201,
                                 "method": "POST", "size": 10})
        log("websocket", "connecting", {"client": "127.0.0.1:5000", "path": path})
    assert_clean(stream.getvalue(), 2 * len(paths))


@pytest.mark.parametrize("logger_name", ["django.channels.server", "django.server"])
def test_development_servers_access_log_is_redacted(logger_name):
    """daphne's runserver logs each request through ``django.channels.server``."""
    logger = logging.getLogger(logger_name)
    assert logger.handlers, "the access log logger is not configured"
    stream = io.StringIO()
    previous = [h.setStream(stream) for h in logger.handlers
                if isinstance(h, logging.StreamHandler)]
    try:
        paths = planted_paths()
        for path in paths:
            logger.info("HTTP %(method)s %(path)s %(status)s [%(time_taken).2f, %(client)s]",
                        {"method": "POST", "path": path, "status": 201, "time_taken": 0.01,
                         "client": "127.0.0.1:5000"})
    finally:
        for h, old in zip([h for h in logger.handlers if isinstance(h, logging.StreamHandler)],
                          previous, strict=True):
            h.setStream(old)
    assert_clean(stream.getvalue(), len(paths))
