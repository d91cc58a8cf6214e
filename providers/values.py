"""Reading untrusted JSON values, and the short texts adapters write about them.

Every adapter reads provider JSON that may lack a field or carry the wrong type; these say what
a value is when it is of the expected type, and an empty (or absent) one otherwise, so a
surprising field never raises where the wire format does not require it.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from streams.bodies import IMAGE_MEDIA_TYPES, MAX_IMAGE_URL_CHARS, MAX_OUTPUT_TEXT_CHARS


def as_str(value: Any) -> str:
    """``value`` when it is a string, else ""."""
    return value if isinstance(value, str) else ""


def as_int(value: Any) -> int | None:
    """``value`` when it is an integer (never a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else {}."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else []."""
    return value if isinstance(value, list) else []


def int_counters(value: Any) -> dict[str, int]:
    """The integer fields of a usage object (nested objects and lists left out)."""
    return {k: v for k, v in as_dict(value).items() if type(v) is int}  # JSON: int, never bool


def count(n: int, word: str, plural: str = "") -> str:
    """``"1 result"``, ``"3 results"``; ``plural`` when it is not ``word + "s"``."""
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


def clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def output_text(text: str) -> str:
    """An activity's output text as the portable body keeps it: cut when very long (the native
    payload keeps all of it)."""
    return text if len(text) <= MAX_OUTPUT_TEXT_CHARS else text[: MAX_OUTPUT_TEXT_CHARS - 1] + "…"


_DATA_URL = re.compile(r"data:(image/[a-z.+-]+);base64,([A-Za-z0-9+/]*={0,2})")
_FORMATS = {"png": "image/png", "jpeg": "image/jpeg", "jpg": "image/jpeg", "gif": "image/gif",
            "webp": "image/webp"}


def image_output(url: str = "", *, b64: str = "", output_format: str = "png") -> dict[str, str]:
    """An image for an activity's ``output``: a data: URL (``url``, or ``b64`` data in
    ``output_format``), or {} when it is not a raster image of an allowed type, not valid
    base64, or too long to keep in the portable body (the payload still has it)."""
    if b64:
        media_type = _FORMATS.get(output_format.lower(), "")
        url = f"data:{media_type};base64,{b64}" if media_type else ""
    match = _DATA_URL.fullmatch(url) if len(url) <= MAX_IMAGE_URL_CHARS else None
    if match is None or match.group(1) not in IMAGE_MEDIA_TYPES:
        return {}
    try:
        base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        return {}
    return {"url": url, "media_type": match.group(1)}
