"""Response headers every page and API answer gets, and the endpoint CSP violation reports go to.

* ``PrivateCacheMiddleware``: ``Cache-Control: private`` on every response Django makes (pages,
  fragments, the state document, exports, the API): they carry a user's conversations, and a
  shared cache or proxy must never keep one for the next user. Static files (served ahead of
  the middleware) and the recording proxy (its own ASGI app, which passes the provider's
  headers through unchanged) are not Django responses and are left alone.
* ``ReportingEndpointsMiddleware``: names the report endpoint for the CSP's ``report-to``.
* ``csp_report``: the browser's violation reports (``report-uri``'s ``application/csp-report``
  and the Reporting API's ``application/reports+json``), logged with credentials redacted, at
  most ``TURNSCOPE_CSP_REPORTS_PER_MINUTE`` a minute per client address and process (the rest are
  counted in the next line that is logged). Anyone can post one, so it writes nothing but a log
  line and never trusts the content.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any

import orjson
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control
from django.utils.deprecation import MiddlewareMixin
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from guards.redaction import redact_value

log = logging.getLogger("turnscope.csp")

REPORT_PATH = "/csp-report/"
REPORT_GROUP = "csp"
MAX_REPORT_BYTES = 64 * 1024
MAX_FIELD_CHARS = 300
MAX_CLIENTS = 10_000  # in the window; beyond it, new clients count as over their limit
FIELDS = (  # what a report says, in both formats' spellings
    ("document-uri", "documentURL"), ("violated-directive", "effectiveDirective"),
    ("effective-directive", "effectiveDirective"), ("blocked-uri", "blockedURL"),
    ("source-file", "sourceFile"), ("line-number", "lineNumber"),
    ("column-number", "columnNumber"), ("disposition", "disposition"),
    ("script-sample", "sample"),
)


# MiddlewareMixin: sync and async alike. A sync-only middleware would run every async view
# (the Replay live button, the live runner's spawns) under async_to_sync, on a loop that ends with
# the request, taking the tasks it started with it.


class PrivateCacheMiddleware(MiddlewareMixin):
    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        patch_cache_control(response, private=True)
        return response


class ReportingEndpointsMiddleware(MiddlewareMixin):
    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if "Content-Security-Policy" in response:
            response.setdefault("Reporting-Endpoints", f'{REPORT_GROUP}="{REPORT_PATH}"')
        return response


class _PerMinute:
    """How many reports each client had logged in the last 60 seconds (this process only: no
    shared state, so it works the same whatever else is down). A sliding window, not calendar
    minutes: a burst across a minute's boundary would otherwise log twice the limit."""

    def __init__(self) -> None:
        self.logged: dict[str, collections.deque[float]] = {}
        self.suppressed = 0
        self.swept = float("-inf")
        self.lock = threading.Lock()

    def take(self, client: str, limit: int) -> tuple[bool, int]:
        """Whether this report may be logged, and how many were suppressed before it."""
        with self.lock:
            now = time.monotonic()
            if now - self.swept > 1:  # at most once a second: a sweep walks every client
                self.swept = now
                for known in [c for c, t in self.logged.items() if not t or t[-1] <= now - 60]:
                    del self.logged[known]  # quiet for a minute: nothing of it in the window
            times = self.logged.get(client)
            if times is None:
                if len(self.logged) >= MAX_CLIENTS:
                    self.suppressed += 1
                    return False, 0
                times = self.logged[client] = collections.deque()
            while times and times[0] <= now - 60:
                times.popleft()
            if len(times) >= limit:
                self.suppressed += 1
                return False, 0
            times.append(now)
            suppressed, self.suppressed = self.suppressed, 0
            return True, suppressed


_limiter = _PerMinute()


def _reports(body: Any) -> list[dict[str, Any]]:
    if isinstance(body, dict) and isinstance(body.get("csp-report"), dict):
        return [body["csp-report"]]  # report-uri
    if isinstance(body, list):  # the Reporting API: [{"type", "url", "body": {...}}, ...]
        return [r["body"] for r in body[:20] if isinstance(r, dict)
                and r.get("type") == "csp-violation" and isinstance(r.get("body"), dict)]
    return []


def _summary(report: dict[str, Any]) -> dict[str, str]:
    out = {}
    for name, other in FIELDS:
        value = report.get(name, report.get(other))
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            out[name] = str(value)[:MAX_FIELD_CHARS]
    return redact_value(out)  # type: ignore[no-any-return]


@csrf_exempt
@require_POST
def csp_report(request: HttpRequest) -> HttpResponse:
    if int(request.META.get("CONTENT_LENGTH") or 0) > MAX_REPORT_BYTES:
        return HttpResponse(status=413)
    body = request.read(MAX_REPORT_BYTES + 1)
    if len(body) > MAX_REPORT_BYTES:
        return HttpResponse(status=413)
    try:
        reports = _reports(orjson.loads(body))
    except orjson.JSONDecodeError:
        return HttpResponse(status=400)
    client = request.META.get("REMOTE_ADDR", "")
    limit = settings.TURNSCOPE_CSP_REPORTS_PER_MINUTE
    for report in reports:
        allowed, suppressed = _limiter.take(client, limit)
        if not allowed:
            continue
        fields = " ".join(f"{k}={orjson.dumps(v).decode()}" for k, v in _summary(report).items())
        more = f" ({suppressed} more not logged)" if suppressed else ""
        log.warning("CSP violation%s: %s", more, fields)
    return HttpResponse(status=204)
