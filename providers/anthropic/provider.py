"""Anthropic, as ``providers.provider.Provider`` names what a provider provides."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import providers.anthropic as package
from providers.anthropic import proxied, request
from providers.anthropic.blocks import DEFAULT_API_VERSION, FORMATS, PROVIDER
from providers.anthropic.messages import decode, parser
from providers.anthropic.standin import AnthropicStandIn
from providers.protocol import ResponseParser, WireContext, parse_rows
from providers.proxied import ProxiedRequest
from providers.requests import PriorTurn, TurnRequest, UpstreamRequest
from providers.standin import StandIn
from providers.wire import Row, WireInput, WireKind
from streams.parts import Part

# The error ``type`` per HTTP status (Anthropic's docs: "Errors").
ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
    500: "api_error", 502: "api_error", 503: "overloaded_error", 504: "api_error",
    529: "overloaded_error",
}


class Anthropic:
    name = PROVIDER
    label = "Anthropic"
    package = package.__name__
    formats: tuple[str, ...] = FORMATS
    api_url = "https://api.anthropic.com"  # its public API (``TURNSCOPE_UPSTREAM_*`` overrides it)
    key_variable = "ANTHROPIC_API_KEY"
    models: tuple[str, ...] = ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5")
    model_refused = "?#"
    stand_in: StandIn = AnthropicStandIn()
    # Frame shapes only Anthropic writes (how a recording file is told apart).
    signature = re.compile(
        rb'"type"\s*:\s*"(?:message_start|content_block_start|content_block_delta)"'
        rb'|event:\s*message_start|"stop_reason"\s*:|"model"\s*:\s*"claude')

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
        return proxied.read_request(body, api_version or DEFAULT_API_VERSION)

    def proxied_endpoint(self, path: str) -> str | None:
        return "messages" if path == "/v1/messages" else None

    def error_body(self, status: int, code: str, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"),
                                           "message": message}}

    def error_code(self, error: dict[str, Any]) -> str:
        code = error.get("type")
        return code if isinstance(code, str) else ""

    def auth_header(self, key: str) -> tuple[str, str]:
        return ("x-api-key", key)


ANTHROPIC = Anthropic()
