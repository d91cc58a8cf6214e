"""What the generateContent and Interactions readers share: the provider, the payload formats
and their version, the served model, errors, and Google Search's entry point."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from providers.values import as_dict, as_str, count
from streams.errors import MalformedInput
from streams.parts import Artifact, Part, Payload, ResponseEnd, StreamError
from streams.registries import ACTIVITY_NAMES, END_REASONS

PROVIDER = "google"
DEFAULT_API_VERSION = "v1beta"

CANDIDATE = "google.candidate"  # a candidate restricted to one block's parts (+ its metadata)
PART = "google.part"  # one content part, verbatim
METADATA = "google.candidate_metadata"  # grounding/citation metadata with no block to land on
ENTRY_POINT = "google.search_entry_point"  # searchEntryPoint {"renderedContent": ...}
ERROR = "google.error"  # an {"error": {...}} object
STEP = "google.interactions.step"  # an Interactions step, verbatim or rebuilt from deltas
ITEM = "google.interactions.item"  # an Interactions delta/content/annotation not understood
FORMATS = (CANDIDATE, PART, METADATA, ENTRY_POINT, ERROR, STEP, ITEM)

END_TURN, MAX_TOKENS, TOOL_USE, REFUSAL, ERROR_END = (
    "end_turn",
    "max_tokens",
    "tool_use",
    "refusal",
    "error",
)
WEB_SEARCH, CODE_EXECUTION = "web_search", "code_execution"
FILE_SEARCH, WEB_FETCH = "file_search", "web_fetch"  # File Search; URL context (generate only)
# Registered once for both wire formats: the adapter package is their producer.
_PRODUCER = __package__ or __name__
for _reason in (END_TURN, MAX_TOKENS, TOOL_USE, REFUSAL, ERROR_END):
    END_REASONS.register(_reason, producer=_PRODUCER)
for _name in (WEB_SEARCH, CODE_EXECUTION, FILE_SEARCH, WEB_FETCH):
    ACTIVITY_NAMES.register(_name, producer=_PRODUCER)

# Part keys that annotate a part rather than say what it is.
PART_METADATA = {"thought", "thoughtSignature", "partMetadata", "videoMetadata", "mediaResolution"}
# Candidate-level keys kept with the text block they annotate.
TEXT_METADATA = ("groundingMetadata", "citationMetadata", "urlContextMetadata")

_VERSION = re.compile(r"/(v\d+(?:(?:alpha|beta)\d*)?)(?:/|$)")
_MODEL = re.compile(r"/(?:models|tunedModels)/([^/:?]+)")


def api_version(endpoint: str | None) -> str:
    """The Gemini API version named by the request URL ("vertex/<v>" on Vertex AI)."""
    if not endpoint:
        return DEFAULT_API_VERSION
    url = urlsplit(endpoint)
    match = _VERSION.search(url.path)
    if not match:
        return DEFAULT_API_VERSION
    if "aiplatform" in (url.hostname or ""):
        return f"vertex/{match.group(1)}"
    return match.group(1)


def endpoint_model(endpoint: str | None) -> str:
    match = _MODEL.search(urlsplit(endpoint).path) if endpoint else None
    return match.group(1) if match else ""


def object_of(data: Any, line: int, what: str) -> dict[str, Any]:
    """``data`` when it is a JSON object; else the input is malformed."""
    if not isinstance(data, dict):
        raise MalformedInput(
            f"expected a JSON object ({what}), got {type(data).__name__}", line=line
        )
    return data


def keys(data: dict[str, Any]) -> str:
    """A few of an object's keys, to say what it was instead."""
    return ", ".join(sorted(data)[:8]) or "none"


def error_parts(error: dict[str, Any], version: str) -> Iterator[Part]:
    """An ``{"error": {...}}`` object: the StreamError, then the end of the response."""
    code = as_str(error.get("status")) or str(error.get("code") or "") or "error"
    yield StreamError(code, as_str(error.get("message")), Payload(PROVIDER, ERROR, version, error))
    yield ResponseEnd(ERROR_END)


def entry_point_artifact(entry: dict[str, Any], html: str, version: str) -> Artifact:
    # Untrusted HTML+CSS that Google's terms require to be displayed: the renderer sanitizes
    # and isolates display_html; the payload keeps the object verbatim.
    return Artifact(
        type="google.search_entry_point",
        summary="Google Search suggestions",
        display_html=html,
        payload=Payload(PROVIDER, ENTRY_POINT, version, entry),
    )


def search_summary(queries: int, sources: int | None) -> str:
    text = count(queries, "query", "queries")
    return text if sources is None else f"{text} · {count(sources, 'source')}"


# ---------------------------------------------------------------------------------------------
# Stored payloads


def decode(payload_value: Any, format: str) -> None:
    """Raise ValueError if a stored payload of ``format`` is not something this adapter wrote."""
    check = _DECODERS.get(format)
    if check is None:
        raise ValueError(f"unknown Google payload format {format!r}")
    if not isinstance(payload_value, dict):
        raise ValueError(f"{format}: expected a JSON object, got {type(payload_value).__name__}")
    check(payload_value)


def _decode_candidate(value: dict[str, Any]) -> None:
    parts = as_dict(value.get("content")).get("parts")
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise ValueError(f"{CANDIDATE}: content.parts must be a list of objects")


def _decode_part(value: dict[str, Any]) -> None:
    if not set(value) - PART_METADATA:
        raise ValueError(f"{PART}: a part needs a data field (text, functionCall, ...)")


def _decode_metadata(value: dict[str, Any]) -> None:
    if not value or not set(value) <= set(TEXT_METADATA):
        raise ValueError(f"{METADATA}: expected {', '.join(TEXT_METADATA)}")


def _decode_entry_point(value: dict[str, Any]) -> None:
    if not isinstance(value.get("renderedContent", value.get("sdkBlob")), str):
        raise ValueError(f"{ENTRY_POINT}: renderedContent must be a string")


def _decode_error(value: dict[str, Any]) -> None:
    if not any(k in value for k in ("message", "code", "status")):
        raise ValueError(f"{ERROR}: an error needs a message, code or status")


def _decode_typed(value: dict[str, Any]) -> None:
    if not as_str(value.get("type")):
        raise ValueError("an Interactions step or item needs a string type")


_DECODERS: dict[str, Callable[[dict[str, Any]], None]] = {
    CANDIDATE: _decode_candidate,
    PART: _decode_part,
    METADATA: _decode_metadata,
    ENTRY_POINT: _decode_entry_point,
    ERROR: _decode_error,
    STEP: _decode_typed,
    ITEM: _decode_typed,
}
