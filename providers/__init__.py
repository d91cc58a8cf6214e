"""Adapters: one module per provider wire format, all reading through ``providers.wire``.

An adapter is a module with ``PROVIDER`` (its name) and
``parse(wire: WireInput, context: WireContext) -> Iterator[Part]``. Adapters never touch Django
models; they only translate wire frames into ``streams.parts``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from providers.wire import MalformedInput, WireInput, read
from streams.parts import Part

ADAPTERS = {
    "anthropic": "providers.anthropic",
    "openai": "providers.openai",
    "google": "providers.google",
}


@dataclass(frozen=True, slots=True)
class WireContext:
    """What is known besides the response itself.

    ``api_version`` is the API version header in force (Anthropic's ``anthropic-version``),
    ``request`` the request body when the recording has it (it names hosted tool versions), and
    ``endpoint`` the URL the request went to (it names Gemini's API version).
    """

    api_version: str | None = None
    request: dict[str, Any] | None = None
    endpoint: str | None = None


_loaded: dict[str, ModuleType] = {}  # provider -> its imported adapter module


def adapter(provider: str) -> ModuleType:
    module = _loaded.get(provider)
    if module is not None:
        return module  # import_module costs more than the parse of a short response
    try:
        name = ADAPTERS[provider]
    except KeyError:
        raise ValueError(
            f"unknown provider {provider!r} (expected one of {', '.join(sorted(ADAPTERS))})"
        ) from None
    module = _loaded[provider] = importlib.import_module(name)
    return module


def parse(provider: str, raw: bytes | str, context: WireContext | None = None) -> Iterator[Part]:
    """Read ``raw`` in any accepted wire shape and yield the provider's stream parts."""
    return adapter(provider).parse(read(raw), context or WireContext())


__all__ = ["ADAPTERS", "MalformedInput", "WireContext", "WireInput", "adapter", "parse"]
