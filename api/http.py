"""HTTP plumbing shared by the API views: JSON out, size-limited bodies in, checked query
parameters. Error bodies are shaped by ``api.errors``."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import orjson
from django.conf import settings
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.metadata import SimpleMetadata
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.renderers import JSONRenderer

from conversations.reading import InvalidFilter, check_filter_text

# -- out ---------------------------------------------------------------------------------------


class OrjsonRenderer(JSONRenderer):
    """JSON via orjson: native payloads are stored JSON text (``orjson.Fragment``) and are
    emitted verbatim, never re-encoded."""

    def render(self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
               ) -> bytes:
        if data is None:
            return b""
        return orjson.dumps(data, default=str)


class JsonOnlyNegotiation(DefaultContentNegotiation):
    """The API answers in JSON whatever the Accept header says (no 406), and ``?format=`` is a
    view parameter (``openwop``, ``markdown``…), not DRF's renderer switch."""

    def select_renderer(self, request: Any, renderers: list[Any], format_suffix: Any = None
                        ) -> tuple[Any, str]:
        renderer = renderers[0]
        return renderer, renderer.media_type


# -- in ----------------------------------------------------------------------------------------


class ApiMetadata(SimpleMetadata):
    """``OPTIONS``: describes a view's actions only when it has a serializer to describe them
    with; the views that read raw bodies (import, ingest) or a small request of their own (fork)
    answer with their name, media types and the allowed methods (DRF's default asserts)."""

    def determine_actions(self, request: Any, view: Any) -> dict[str, Any]:
        if getattr(view, "serializer_class", None) is None:
            return {}
        return super().determine_actions(request, view)  # type: ignore[no-any-return]


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "payload_too_large"


def max_body_bytes() -> int:
    return int(getattr(settings, "TURNSCOPE_MAX_UPLOAD_BYTES", 16 * 1024 * 1024))


def read_limited(stream: Any, meta: Any, limit: int | None = None) -> bytes:
    """Read a request body of at most ``limit`` bytes; a larger one is a 413, refused before it
    is read when Content-Length says so."""
    limit = max_body_bytes() if limit is None else limit
    declared = meta.get("CONTENT_LENGTH") or "0"
    try:
        declared_length = int(declared)
    except ValueError:
        raise ParseError("Content-Length is not a number.") from None
    if declared_length > limit:
        raise PayloadTooLarge(f"The request body is {declared_length} bytes; the limit is "
                              f"{limit} bytes.")
    if stream is None:
        return b""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLarge(f"The request body is larger than the limit of {limit} bytes.")
    return data


class LimitedJSONParser(BaseParser):
    """application/json, size-limited, parsed by orjson; a parse error names the problem."""

    media_type = "application/json"
    limit: int | None = None

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        request = (parser_context or {}).get("request")
        meta = request.META if request is not None else {}
        raw = read_limited(stream, meta, self.limit)
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"The body is not valid JSON: {exc}") from None


class SmallJSONParser(LimitedJSONParser):
    limit = 64 * 1024


class SpooledBodyParser(BaseParser):
    """Any media type but multipart: the body as one file to import, spooled to a temporary
    file (never held in memory whole), within the per-file import limit."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        from conversations import upload_limits

        request = (parser_context or {}).get("request")
        meta = request.META if request is not None else {}
        name = request.query_params.get("name", "") if request is not None else ""
        try:
            return upload_limits.spooled_body(stream, meta, name[:200] or "body")
        except upload_limits.TooLarge as exc:
            raise PayloadTooLarge(f"Too large: {exc}.") from None


class LimitedMultiPartParser(MultiPartParser):
    """Several files to import: the per-file and per-upload limits are a 413."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        from conversations import upload_limits

        try:
            return super().parse(stream, media_type, parser_context)
        except upload_limits.TooLarge as exc:
            raise PayloadTooLarge(f"Too large: {exc}.") from None


class RawBodyParser(BaseParser):
    """Any media type: the view reads the raw bytes itself (provider wire formats)."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> bytes:
        request = (parser_context or {}).get("request")
        return read_limited(stream, request.META if request is not None else {})


# -- query parameters --------------------------------------------------------------------------


def _checked(name: str, value: str, max_length: int) -> str:
    """``value`` if the database can compare it and it is short enough; else a 400."""
    try:
        check_filter_text(name, value)
    except InvalidFilter as exc:
        raise ValidationError({name: exc.message}) from None
    if len(value) > max_length:
        raise ValidationError({name: f"must be at most {max_length} characters"})
    return value


def text_param(request: Any, name: str, *, max_length: int = 500, default: str = "") -> str:
    return _checked(name, request.query_params.get(name, default), max_length)


def header_param(request: Any, name: str, *, max_length: int = 500) -> str:
    """A value that may hold a secret (a prompt, a title, a URL with its query): sent as the
    header ``Turnscope-<Name>`` (percent-encoded UTF-8), never in the URL, where access logs and
    proxies keep it. The query parameter of the same name is still read, for old clients."""
    header = request.headers.get(f"Turnscope-{name.replace('_', '-')}")
    if header is None:
        return text_param(request, name, max_length=max_length)
    try:
        value = unquote(header, errors="strict")
    except UnicodeDecodeError:
        raise ValidationError({name: "must be percent-encoded UTF-8"}) from None
    return _checked(name, value, max_length)


def choice_param(request: Any, name: str, choices: Any, default: str | None = None) -> str:
    value = request.query_params.get(name)
    if value is None or value == "":
        if default is None:
            raise ValidationError({name: f"is required (one of {', '.join(choices)})"})
        return default
    if value not in choices:
        raise ValidationError({name: f"must be one of {', '.join(choices)}"})
    return value

