"""Google Gemini (generateContent and the Interactions API), as ``providers.provider.Provider``
names what a provider provides."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import providers.google as package
from providers.google import FORMATS, PROVIDER, decode, parser, proxied, request
from providers.google.common import api_version as version_of
from providers.google.standin import GoogleStandIn
from providers.protocol import ResponseParser, WireContext, parse_rows
from providers.proxied import ProxiedRequest
from providers.requests import PriorTurn, TurnRequest, UpstreamRequest
from providers.standin import StandIn
from providers.wire import Row, WireInput, WireKind
from streams.parts import Part

# The google.rpc.Code name Gemini puts in ``error.status``, per HTTP status.
ERROR_STATUS = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 502: "UNAVAILABLE",
    503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

_GENERATE = re.compile(
    r"^/(v1|v1beta|v1alpha)/models/([^/:]+):(generateContent|streamGenerateContent)$")


class Google:
    name = PROVIDER
    label = "Google Gemini"
    package = package.__name__
    formats: tuple[str, ...] = FORMATS
    api_url = "https://generativelanguage.googleapis.com"  # TURNSCOPE_UPSTREAM_GOOGLE overrides
    key_variable = "GEMINI_API_KEY"
    models: tuple[str, ...] = ("gemini-2.5-flash", "gemini-2.5-pro")
    model_refused = "/?#"  # the model is a URL path segment (``models/<m>:generateContent``)
    stand_in: StandIn = GoogleStandIn()
    # Frame shapes only Gemini writes (how a recording file is told apart).
    signature = re.compile(rb'"candidates"\s*:|"modelVersion"\s*:|"usageMetadata"\s*:'
                           rb'|"event_type"\s*:\s*"interaction\.|"object"\s*:\s*"interaction"')

    def parser(self, context: WireContext, kind: WireKind, first: Row) -> ResponseParser:
        return parser(context, kind, first)

    def parse(self, wire: WireInput, context: WireContext) -> Iterator[Part]:
        return parse_rows(parser, wire, context)

    def decode(self, value: Any, format: str) -> None:
        decode(value, format)

    def build_request(self, history: Sequence[PriorTurn], turn: TurnRequest) -> UpstreamRequest:
        return request.build_request(history, turn)

    def build_continuation(
        self, history: Sequence[PriorTurn], turn: TurnRequest, paused: PriorTurn
    ) -> UpstreamRequest:
        return request.build_continuation(history, turn, paused)

    def read_request(
        self, body: dict[str, Any], endpoint: str, api_version: str | None, url: str
    ) -> ProxiedRequest:
        return proxied.read_request(body, version_of(url))

    def proxied_endpoint(self, path: str) -> str | None:
        return "generate" if _GENERATE.match(path) else None

    def error_body(self, status: int, code: str, message: str) -> dict[str, Any]:
        return {"error": {"code": status, "message": message,
                          "status": ERROR_STATUS.get(status, "UNKNOWN")}}

    def error_code(self, error: dict[str, Any]) -> str:
        code = error.get("status")
        return code if isinstance(code, str) else ""

    def auth_header(self, key: str) -> tuple[str, str]:
        return ("x-goog-api-key", key)


GOOGLE = Google()
