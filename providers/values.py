"""Reading untrusted JSON values, and the short texts adapters write about them.

Every adapter reads provider JSON that may lack a field or carry the wrong type; these say what
a value is when it is of the expected type, and an empty (or absent) one otherwise, so a
surprising field never raises where the wire format does not require it.
"""

from __future__ import annotations

from typing import Any


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
