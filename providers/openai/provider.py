"""OpenAI (the Responses API and Chat Completions), as ``providers.provider.Provider`` names
what a provider provides. The OpenAI-compatible services (xAI, Groq, DeepSeek, Azure, named
upstreams) speak this provider's wire."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import providers.openai as package
from providers import provider as base
from providers.openai import FORMATS, PROVIDER, decode, parser, proxied, request
from providers.openai.standin import OpenAIStandIn
from providers.protocol import ResponseParser, WireContext, parse_rows
from providers.proxied import ProxiedRequest
from providers.requests import PriorTurn, TurnRequest, UpstreamRequest
from providers.standin import StandIn
from providers.wire import Row, WireInput, WireKind
from streams.parts import Part

# The recorded endpoints, by the proxy's names (``read_request``'s ``endpoint``).
_ENDPOINTS = {"/v1/responses": "responses", "/v1/chat/completions": "chat"}


class OpenAI:
    name = PROVIDER
    label = "OpenAI"
    package = package.__name__
    formats: tuple[str, ...] = FORMATS
    api_url = "https://api.openai.com"  # its public API (``TURNSCOPE_UPSTREAM_*`` overrides it)
    key_variable = "OPENAI_API_KEY"
    models: tuple[str, ...] = ("gpt-5-mini", "gpt-5", "gpt-4.1")
    model_refused = "?#"
    stand_in: StandIn = OpenAIStandIn()
    # Frame shapes only OpenAI's wire has (how a recording file is told apart).
    signature = re.compile(
        rb'"type"\s*:\s*"response\.|"object"\s*:\s*"(?:response|chat\.completion)'
        rb'|event:\s*response\.|"choices"\s*:')

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
        return proxied.read_request(body, endpoint)

    def proxied_endpoint(self, path: str) -> str | None:
        return _ENDPOINTS.get(path)

    def error_body(self, status: int, code: str, message: str) -> dict[str, Any]:
        kind = "server_error" if status >= 500 else "invalid_request_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def error_code(self, error: dict[str, Any]) -> str:
        return base.error_code(error)

    def auth_header(self, key: str) -> tuple[str, str]:
        return ("authorization", f"Bearer {key}")


OPENAI = OpenAI()
