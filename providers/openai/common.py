"""What the Responses and Chat Completions readers share: the provider, the payload version,
the error format, and the readers of usage, tool declarations, arguments and ranges."""

from __future__ import annotations

from typing import Any

import orjson

from providers.values import as_int, as_str
from streams.errors import MalformedInput

PROVIDER = "openai"
API_VERSION = "v1"

ERROR = "openai.error"  # an error object (`error` event, `response.error`, chunk `error`)

CLIENT_TOOL_TYPES = {"function", "custom"}  # request/response tool types the host runs itself


def require(data: dict[str, Any], key: str, kind: type, line: int, what: str) -> Any:
    """``data[key]`` when it is a ``kind``; else the input is malformed."""
    value = data.get(key)
    if not isinstance(value, kind):
        raise MalformedInput(
            f"{what}: expected {key!r} to be a {kind.__name__}, got {type(value).__name__}",
            line=line,
        )
    return value


def flatten_usage(usage: Any, prefix: str = "") -> dict[str, int]:
    """Nested integer counters as one flat dict with dotted keys (floats such as cost skipped)."""
    out: dict[str, int] = {}
    if not isinstance(usage, dict):
        return out
    for key, value in usage.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_usage(value, f"{name}."))
        elif as_int(value) is not None:
            out[name] = value
    return out


def tool_version(tools: Any) -> str:
    """ "v1" plus the hosted tool types in force, in declaration order."""
    hosted: list[str] = []
    for tool in tools if isinstance(tools, list) else ():
        kind = as_str(tool.get("type")) if isinstance(tool, dict) else ""
        if kind and kind not in CLIENT_TOOL_TYPES and kind not in hosted:
            hosted.append(kind)
    return "+".join([API_VERSION, *hosted])


def json_arguments(text: str) -> Any:
    """Function arguments are a JSON string; keep the string when it is not valid JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def char_range(start: Any, end: Any) -> tuple[int | None, int | None]:
    """A character range, or none at all when missing or zero-length (OpenRouter's 0/0)."""
    s, e = as_int(start), as_int(end)
    if s is None or e is None or e <= s or s < 0:
        return None, None
    return s, e


def check_error(value: dict[str, Any], format: str) -> None:
    """A stored error payload needs something to say."""
    if not any(k in value for k in ("code", "message", "type", "error")):
        raise ValueError(f"{format}: needs a 'code' or a 'message'")
