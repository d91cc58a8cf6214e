"""An OTLP/HTTP trace export read into plain spans (Django-free).

The body is an ``ExportTraceServiceRequest`` (``opentelemetry-proto``'s wire types), binary
protobuf (``application/x-protobuf``) or OTLP's JSON encoding (``application/json``: the proto3
JSON mapping, except that trace and span ids are hex strings, not base64), optionally
gzip-encoded. Unknown fields are ignored, as the specification asks of a receiver.

Attribute values become Python values (strings, numbers, booleans, lists, dicts; bytes stay
bytes), ids lower-case hex.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class MalformedExport(ValueError):
    """The body is not an ExportTraceServiceRequest in the declared encoding."""


class TooLarge(ValueError):
    """The body, once decompressed, is over the size cap."""


@dataclass
class SpanEvent:
    name: str
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass
class Span:
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    name: str
    attributes: dict[str, Any]
    events: list[SpanEvent] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""  # the instrumentation scope's name
    error: bool = False  # the span's status is ERROR
    status_message: str = ""
    start_ns: int = 0
    end_ns: int = 0


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` without its ``Content-Encoding`` (gzip, deflate or none), refused past
    ``limit`` bytes decompressed (a small bomb must not fill the memory)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise MalformedExport(f"unsupported Content-Encoding {encoding!r} (gzip or none)")
    decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or zlib header
    try:
        out = decoder.decompress(body, limit + 1)
        if len(out) > limit or decoder.unconsumed_tail:
            raise TooLarge(f"the decompressed body is over {limit} bytes")
        out += decoder.flush()
    except zlib.error as exc:
        raise MalformedExport(f"the body is not valid {encoding} ({exc})") from None
    if len(out) > limit:
        raise TooLarge(f"the decompressed body is over {limit} bytes")
    if not decoder.eof:
        raise MalformedExport(f"the {encoding} body is cut short")
    return out


def parse_request(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    """The export request ``body`` holds, in the encoding ``content_type`` names."""
    media = content_type.split(";")[0].strip().lower()
    request = ExportTraceServiceRequest()
    if media == PROTOBUF:
        try:
            request.ParseFromString(body)
        except (DecodeError, ValueError, RecursionError) as exc:
            raise MalformedExport(f"not an ExportTraceServiceRequest in protobuf ({exc})"
                                  ) from None
        return request
    if media == JSON:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise MalformedExport(f"not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise MalformedExport("the JSON body is not an object")
        try:
            _hex_ids_to_base64(data)
            json_format.ParseDict(data, request, ignore_unknown_fields=True)
        except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
            raise MalformedExport(f"not an ExportTraceServiceRequest in JSON ({exc})"
                                  ) from None
        return request
    raise MalformedExport(f"unsupported Content-Type {media!r} ({PROTOBUF} or {JSON})")


def _hex_ids_to_base64(data: dict[str, Any]) -> None:
    """OTLP/JSON writes trace and span ids as hex; the proto3 JSON mapping of ``bytes`` fields
    is base64, which the protobuf library reads: convert them in place."""
    import base64

    def convert(holder: dict[str, Any], key: str) -> None:
        value = holder.get(key)
        if isinstance(value, str) and value:
            try:
                raw = bytes.fromhex(value)
            except ValueError:
                raise MalformedExport(f"{key} {value[:40]!r} is not hex") from None
            holder[key] = base64.b64encode(raw).decode()

    for resource_spans in _dicts(data.get("resourceSpans", data.get("resource_spans"))):
        for scope_spans in _dicts(resource_spans.get("scopeSpans",
                                                     resource_spans.get("scope_spans"))):
            for span in _dicts(scope_spans.get("spans")):
                for key in ("traceId", "trace_id", "spanId", "span_id", "parentSpanId",
                            "parent_span_id"):
                    convert(span, key)
                for link in _dicts(span.get("links")):
                    for key in ("traceId", "trace_id", "spanId", "span_id"):
                        convert(link, key)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def spans(request: ExportTraceServiceRequest) -> list[Span]:
    """Every span of the request, its attributes as Python values."""
    out = []
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for span in scope_spans.spans:
                out.append(Span(
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(), name=span.name,
                    attributes=attributes(span.attributes),
                    events=[SpanEvent(e.name, attributes(e.attributes)) for e in span.events],
                    resource=resource, scope=scope,
                    error=span.status.code == span.status.STATUS_CODE_ERROR,
                    status_message=span.status.message,
                    start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano,
                ))
    return out


def attributes(pairs: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for pair in pairs:
        if isinstance(pair, KeyValue):
            result[pair.key] = value(pair.value)
    return result


def value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return attributes(any_value.kvlist_value.values)
    return getattr(any_value, kind)
