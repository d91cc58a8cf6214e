"""The providers Turnscope knows, registered in this one place.

``register_providers`` names each provider object (``providers/<p>/provider.py``, a
``providers.provider.Provider``) explicitly, the way a plugin's ``register_models`` hook hands
its models to a ``register`` callback: adding a provider is a package under ``providers/`` and
one line here. Nothing is found by its name through ``importlib``; outside ``providers/`` a
provider is reached only through ``get`` / ``find`` / ``providers()`` (the import contract
"providers are reached through the registry" in ``pyproject.toml``).
"""

from __future__ import annotations

from collections.abc import Callable

from providers.anthropic.provider import ANTHROPIC
from providers.google.provider import GOOGLE
from providers.openai.provider import OPENAI
from providers.provider import Provider


def register_providers(register: Callable[[Provider], None]) -> None:
    """Every provider, in the order a person is offered them."""
    register(ANTHROPIC)
    register(OPENAI)
    register(GOOGLE)


_REGISTERED: dict[str, Provider] = {}


def _register(provider: Provider) -> None:
    if provider.name in _REGISTERED:
        raise ValueError(f"provider {provider.name!r} is registered twice")
    _REGISTERED[provider.name] = provider


register_providers(_register)


def providers() -> tuple[Provider, ...]:
    """The registered providers, in their order."""
    return tuple(_REGISTERED.values())


def names() -> tuple[str, ...]:
    """The registered providers' names, in their order."""
    return tuple(_REGISTERED)


def find(name: str) -> Provider | None:
    """The provider called ``name``; None when there is none."""
    return _REGISTERED.get(name)


def get(name: str) -> Provider:
    """The provider called ``name``; ``ValueError`` when there is none."""
    found = _REGISTERED.get(name)
    if found is None:
        raise ValueError(
            f"unknown provider {name!r} (expected one of {', '.join(sorted(_REGISTERED))})"
        )
    return found
